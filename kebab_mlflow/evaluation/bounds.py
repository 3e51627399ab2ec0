"""Bounds for unjudged hits on recorded runs: a run's doc-level metrics with the unjudged
documents in their cut-off counted relevant (grade 1), beside the usual values, which count
them non-relevant.

The rule is :mod:`kebab_mlflow.metrics.unjudged`'s, and every run computes it as it scores
(``aggregate.json``'s ``unjudged_bounds`` block; MLflow metrics ``<metric>_upper`` and
``unjudged_hits_at_<k>_doc``). Here it is applied to recorded rows: :func:`unjudged_docs`
lists each query's unjudged documents among the first k of its doc ranking (the documents in
order of first appearance, as the doc metrics rank them), :func:`optimistic_golden` adds them
to the golden set at grade 1 — ``compare --unjudged`` rescores both runs under that set
(comparison/unjudged.py) — and :func:`unjudged_bounds` rescores one run
(evaluation/rescore.py), so its bounds come from the same code as a fresh run's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kebab_mlflow.evaluation.per_query import PerQueryRow
from kebab_mlflow.evaluation.rescore import RecordedRun, rescore
from kebab_mlflow.golden import GoldenSet
from kebab_mlflow.metrics.registry import UPPER_SUFFIX
from kebab_mlflow.metrics.unjudged import BOUND_LEVEL, unjudged_in
from kebab_mlflow.names import DEFAULT_K


@dataclass(frozen=True, kw_only=True)
class UnjudgedBounds:
    """Per doc-level metric: (usual value = lower bound, value with the unjudged documents in
    its cut-off counted relevant) and the unjudged hits per query in the top k."""

    k: int
    lower: Mapping[str, float | None]
    upper: Mapping[str, float | None]
    unjudged_per_query: float  # mean over the queries with doc truth
    unjudged_hits: int  # in all, over those queries
    upper_scores: Mapping[str, np.ndarray]  # per query, in the golden set's order

    def metric(self, name: str) -> tuple[float | None, float | None]:
        return self.lower.get(name), self.upper.get(name)


def unjudged_docs(golden: GoldenSet, rows: Iterable[PerQueryRow], k: int) -> dict[str, list[str]]:
    """Query id → the distinct documents among the first ``k`` of its doc ranking that the
    golden set has not judged, for the queries with doc-level truth (the bounds' queries)."""
    return unjudged_doc_ids(golden, ((row.id, [h.doc_id for h in row.hits]) for row in rows), k)


def unjudged_doc_ids(golden: GoldenSet, rankings: Iterable[tuple[str, Sequence[str]]],
                     k: int) -> dict[str, list[str]]:
    """:func:`unjudged_docs` from (query id, its hits' doc ids) pairs."""
    by_id = {q.id: q for q in golden.queries}
    out: dict[str, list[str]] = {}
    for qid, doc_ids in rankings:
        q = by_id.get(qid)
        if q is None or not q.has_doc_truth:
            continue
        out[qid] = unjudged_in(doc_ids, q.expected_doc_ids, k)
    return out


def optimistic_golden(golden: GoldenSet, unjudged: Mapping[str, Sequence[str]]) -> GoldenSet:
    """``golden`` with each query's unjudged documents judged relevant (grade 1)."""
    queries = tuple(dataclasses.replace(q, expected_doc_ids={
        **dict(q.expected_doc_ids), **dict.fromkeys(unjudged.get(q.id, ()), 1)})
        for q in golden.queries)
    return dataclasses.replace(golden, queries=queries)


def unjudged_bounds(run: RecordedRun, golden: GoldenSet, k: int = DEFAULT_K) -> UnjudgedBounds:
    """The doc-level metrics of ``run`` under ``golden`` (lower) and with the unjudged
    documents in each metric's cut-off counted relevant (upper), by rescoring it; the
    unjudged hits counted in the top ``k``."""
    result = rescore(run, golden, intersect=True, quiet=True).result
    suffix = f"_{BOUND_LEVEL}{UPPER_SUFFIX}"
    upper = {name.removesuffix(UPPER_SUFFIX): values
             for name, values in result.bound_scores.items() if name.endswith(suffix)}
    counts = unjudged_docs(golden, run.rows, k)
    return UnjudgedBounds(
        k=k, lower={n: result.overall.get(n) for n in upper},
        upper={n: float(np.nanmean(v)) if np.isfinite(v).any() else None
               for n, v in upper.items()},
        unjudged_per_query=float(np.mean([len(v) for v in counts.values()])) if counts else 0.0,
        unjudged_hits=sum(len(v) for v in counts.values()), upper_scores=upper)
