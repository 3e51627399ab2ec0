"""Bounds for unjudged hits: a doc-level metric's value with the unjudged documents in its
cut-off counted relevant, beside the usual value (which counts them non-relevant).

A document is *judged* for a query when the golden set lists it in ``expected_doc_ids``
(grade 0 included), as ``judged_at_k_doc`` counts it; the queries are those with doc-level
truth (a relevant document), the ones a doc metric counts. For a metric with cut-off k
(``ndcg_at_10_doc``: 10; ``mrr_doc``: its cut-off 10; ``map_doc`` and ``r_precision_doc``: the
retrieved depth), every document among the first k of the doc ranking (documents in order of
first appearance, as the doc metrics rank them) that nobody judged is added at grade 1, and
the metric is computed again by the same code. :func:`unjudged_in` is that rule for one
query, :func:`counted_relevant` the same on a whole relevance table (no Python loop over the
queries: a run file of a million queries pays a few numpy passes per cut-off).

The usual value is the lower bound of what full judgments could give *when the unjudged
documents are relevant or not at random*; the value here is what the run scores if every
unjudged document it retrieved is relevant. It is usually the higher one but not always: a
document counted relevant also raises the ideal ranking of nDCG, and the denominators of MAP
and recall, so a run whose judged relevant documents come first and whose unjudged ones
come after judged non-relevant ones can score lower with them counted (docs/golden-versions.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from kebab_mlflow.metrics.aggregate import mean_or_none
from kebab_mlflow.metrics.registry import (
    MRR_CUTOFF,
    UPPER_SUFFIX,
    Level,
    MetricDef,
    retrieval_metrics,
)
from kebab_mlflow.metrics.retrieval import RelevanceTable, first_appearance

BOUND_LEVEL = Level.DOC  # chunk judgments are all positive: nothing is unjudged there


def upper_name(metric: str) -> str:
    """``ndcg_at_10_doc`` → ``ndcg_at_10_doc_upper`` (its MLflow metric)."""
    return f"{metric}{UPPER_SUFFIX}"


def unjudged_name(k: int, level: str = BOUND_LEVEL) -> str:
    """The mean unjudged documents per query among the first ``k``: ``unjudged_hits_at_10_doc``."""
    return f"unjudged_hits_at_{k}_{level}"


def bound_cutoff(metric: MetricDef, depth: int) -> int | None:
    """The cut-off within which ``metric``'s unjudged documents count relevant: its own k
    (mrr: its cut-off), the retrieved depth for map and r_precision; None for a metric that
    has no bound (another level than doc, or judged_at_k)."""
    if metric.level != BOUND_LEVEL or metric.family == "judged":
        return None
    return metric.k if metric.k is not None else depth


def bounded_metrics(cutoffs: Sequence[int], depth: int) -> Iterator[tuple[MetricDef, int]]:
    """Every doc metric a run of these cut-offs and depth reports, with its bound cut-off."""
    for metric in retrieval_metrics(BOUND_LEVEL, cutoffs, depth):
        k = bound_cutoff(metric, depth)
        if k is not None:
            yield metric, k


def bound_cutoffs(cutoffs: Sequence[int], depth: int) -> list[int]:
    """The cut-offs the bounds need: the run's, its depth, and mrr's when it reaches it."""
    return sorted({*cutoffs, depth, *([MRR_CUTOFF] if depth >= MRR_CUTOFF else [])})


def unjudged_in(doc_ids: Sequence[str], judged: Mapping[str, int], k: int) -> list[str]:
    """The distinct documents among the first ``k`` of a hit list's doc ranking that
    ``judged`` (a query's ``expected_doc_ids``) does not list, in rank order."""
    return [d for d in first_appearance(doc_ids)[:k] if d not in judged]


def counted_relevant(doc: RelevanceTable, judged: RelevanceTable, lengths: np.ndarray,
                     k: int) -> tuple[RelevanceTable, np.ndarray]:
    """``doc`` (the doc-level table) with every unjudged document among each query's first
    ``k`` at grade 1, and each query's count of them (0 for a query without doc truth, whose
    doc metrics do not count). ``judged``: the table whose judged documents have gain 1
    (metrics.scoring.judged_table); ``lengths``: the distinct documents each query retrieved."""
    n, depth = doc.gains.shape
    within = np.arange(depth)[None, :] < np.minimum(np.asarray(lengths), k)[:, None]
    unjudged = within & (judged.gains == 0) & doc.applicable[:, None]
    count = unjudged.sum(axis=1).astype(np.int64)
    gains = doc.gains + unjudged.astype(doc.gains.dtype)
    n_relevant = doc.n_relevant + count
    width = min(depth, int(n_relevant.max(initial=0)))
    slots = np.arange(max(width, 1))[None, :]
    # the ideal ranking: the judged grades (descending), then the added grade-1 documents,
    # sorted again (a grade below 1 would go after them)
    ones = (slots >= doc.n_relevant[:, None]) & (slots < n_relevant[:, None])
    padded = np.zeros((n, max(width, doc.ideal.shape[1], 1)), dtype=doc.gains.dtype)
    padded[:, :doc.ideal.shape[1]] = doc.ideal
    padded[:, :ones.shape[1]][ones] = 1
    ideal = -np.sort(-padded, axis=1)[:, :width]
    return RelevanceTable(gains, n_relevant, np.ascontiguousarray(ideal)), count


def bound_scores(doc: RelevanceTable, judged: RelevanceTable, lengths: np.ndarray,
                 cutoffs: Sequence[int], depth: int) -> dict[str, np.ndarray]:
    """Per query: ``<metric>_upper`` for every doc metric (NaN where the metric does not
    count) and ``unjudged_hits_at_<k>_doc`` at every :func:`bound_cutoffs` cut-off."""
    by_cutoff: dict[int, list[MetricDef]] = {}
    for metric, k in bounded_metrics(cutoffs, depth):
        by_cutoff.setdefault(k, []).append(metric)
    out: dict[str, np.ndarray] = {}
    counted: dict[str, np.ndarray] = {}
    for k in bound_cutoffs(cutoffs, depth):
        table, count = counted_relevant(doc, judged, lengths, k)
        counted[unjudged_name(k)] = np.where(doc.applicable, count.astype(float), np.nan)
        metrics = by_cutoff.get(k, [])
        table.prepare([m.k for m in metrics if m.k is not None and m.family != "mrr"])
        out.update({upper_name(m.name): m.score(table) for m in metrics})
    return {**out, **counted}


def bounds_block(scores: Mapping[str, np.ndarray], cutoffs: Sequence[int], depth: int
                 ) -> dict[str, dict[str, float]] | None:
    """``aggregate.json``'s ``unjudged_bounds`` block from :func:`bound_scores`' per-query
    arrays: ``upper`` (metric → value with the unjudged documents in its cut-off counted
    relevant, only for the metrics with some unjudged document there) and ``unjudged_hits``
    (the mean per query at each cut-off); None when no query has doc truth."""
    hits = {name: mean_or_none(values) for name, values in scores.items()
            if not name.endswith(UPPER_SUFFIX)}
    if not hits or all(v is None for v in hits.values()):
        return None
    upper: dict[str, float] = {}
    for metric, k in bounded_metrics(cutoffs, depth):
        value = mean_or_none(scores[upper_name(metric.name)])
        if value is not None and hits.get(unjudged_name(k)):
            upper[metric.name] = value
    return {"upper": upper, "unjudged_hits": {n: v for n, v in hits.items() if v is not None}}
