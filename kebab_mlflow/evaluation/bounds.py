"""Bounds for unjudged hits: a run's doc-level metrics with every unjudged document in its top
k counted relevant (grade 1), beside the usual values, which count them non-relevant.

The usual value is the lower bound; the bound here is what the run would score if every
document it retrieved that nobody judged turned out relevant. A document is *judged* for a
query when the golden set lists it in ``expected_doc_ids`` (grade 0 included) — as
``judged_at_k_doc`` counts it. The bound is computed by rescoring the run's recorded hits
(evaluation/rescore.py) under an *optimistic* golden set, so it uses the same metric code as
the run itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kebab_mlflow.evaluation.per_query import PerQueryRow
from kebab_mlflow.evaluation.rescore import RecordedRun, rescore
from kebab_mlflow.golden import GoldenSet


@dataclass(frozen=True, kw_only=True)
class UnjudgedBounds:
    """Per doc-level metric: (usual value = lower bound, value with unjudged counted relevant)
    and the unjudged hits per query in the top k."""

    k: int
    lower: Mapping[str, float | None]
    upper: Mapping[str, float | None]
    unjudged_per_query: float  # mean over the queries with doc truth
    unjudged_hits: int  # in all, over those queries
    upper_scores: Mapping[str, np.ndarray]  # per query, in the golden set's order

    def metric(self, name: str) -> tuple[float | None, float | None]:
        return self.lower.get(name), self.upper.get(name)


def unjudged_docs(golden: GoldenSet, rows: Iterable[PerQueryRow], k: int) -> dict[str, list[str]]:
    """Query id → the distinct documents in its top ``k`` hits that the golden set has not
    judged, for the queries with doc-level truth (the bounds' queries)."""
    by_id = {q.id: q for q in golden.queries}
    out: dict[str, list[str]] = {}
    for row in rows:
        q = by_id.get(row.id)
        if q is None or not q.has_doc_truth:
            continue
        docs = dict.fromkeys(h["doc_id"] for h in row.hits if h["rank"] <= k)
        out[row.id] = [d for d in docs if d not in q.expected_doc_ids]
    return out


def optimistic_golden(golden: GoldenSet, unjudged: Mapping[str, Sequence[str]]) -> GoldenSet:
    """``golden`` with each query's unjudged documents judged relevant (grade 1)."""
    queries = tuple(dataclasses.replace(q, expected_doc_ids={
        **dict(q.expected_doc_ids), **dict.fromkeys(unjudged.get(q.id, ()), 1)})
        for q in golden.queries)
    return dataclasses.replace(golden, queries=queries)


def unjudged_bounds(run: RecordedRun, golden: GoldenSet, k: int = 10,
                    unjudged: Mapping[str, Sequence[str]] | None = None) -> UnjudgedBounds:
    """The doc-level metrics of ``run`` under ``golden`` (lower) and with the unjudged
    documents in its top ``k`` counted relevant (upper). ``unjudged``: the documents to count
    relevant (default: this run's; compare passes the union of both runs' so that both sides
    are scored on one set of judgments)."""
    unjudged = unjudged if unjudged is not None else unjudged_docs(golden, run.rows, k)
    lower = rescore(run, golden, intersect=True, quiet=True).result
    upper = rescore(run, optimistic_golden(golden, unjudged), intersect=True,
                    quiet=True).result
    counts = unjudged_docs(golden, run.rows, k)
    doc = [name for name in lower.overall if name.endswith("_doc")]
    return UnjudgedBounds(
        k=k, lower={n: lower.overall[n] for n in doc}, upper={n: upper.overall[n] for n in doc},
        unjudged_per_query=float(np.mean([len(v) for v in counts.values()])) if counts else 0.0,
        unjudged_hits=sum(len(v) for v in counts.values()),
        upper_scores={n: upper.scores[n] for n in doc if n in upper.scores})
