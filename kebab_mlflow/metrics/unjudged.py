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

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property

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


def unjudged_mask(doc: RelevanceTable, judged: RelevanceTable, lengths: np.ndarray
                  ) -> np.ndarray:
    """(n × depth) True where a query with doc truth retrieved a document nobody judged.
    ``judged``: the table whose judged documents have gain 1 (metrics.scoring.judged_table);
    ``lengths``: the distinct documents each query retrieved (its doc ranking's length)."""
    n, depth = doc.gains.shape
    mask = np.arange(depth)[None, :] < np.asarray(lengths)[:, None]
    mask &= judged.gains == 0
    mask &= doc.gains == 0  # a relevant document is judged (kept for a table built apart)
    mask &= doc.applicable[:, None]
    return mask


def counted_relevant(doc: RelevanceTable, unjudged: np.ndarray, k: int
                     ) -> tuple[RelevanceTable, np.ndarray]:
    """``doc`` (the doc-level table) with every unjudged document among each query's first
    ``k`` (:func:`unjudged_mask`) at grade 1, and each query's count of them (0 for a query
    without doc truth, whose doc metrics do not count)."""
    n, depth = doc.gains.shape
    head = unjudged[:, :k]
    count = np.count_nonzero(head, axis=1).astype(np.int64)
    gains = doc.gains.copy()
    gains[:, :k] += head.astype(doc.gains.dtype)
    n_relevant = doc.n_relevant + count
    width = min(depth, int(n_relevant.max(initial=0)))
    ideal = np.zeros((n, width), dtype=doc.gains.dtype)
    kept = min(width, doc.ideal.shape[1])
    ideal[:, :kept] = doc.ideal[:, :kept]
    # the added documents come after the judged grades (each >= 1, in descending order): the
    # ideal ranking stays sorted (a grade below 1 is not relevant: golden grades are integers)
    slots = np.arange(width)[None, :]
    ideal[(slots >= doc.n_relevant[:, None]) & (slots < n_relevant[:, None])] = 1
    return RelevanceTable(gains, n_relevant, ideal), count


def bound_scores(doc: RelevanceTable, judged: RelevanceTable, lengths: np.ndarray,
                 cutoffs: Sequence[int], depth: int) -> dict[str, np.ndarray]:
    """Per query: ``<metric>_upper`` for every doc metric (NaN where the metric does not
    count) and ``unjudged_hits_at_<k>_doc`` at every :func:`bound_cutoffs` cut-off.

    The values are those of each metric on :func:`counted_relevant`'s table, obtained from
    ``doc``'s own per-cut-off sums plus cumulative sums of the unjudged mask: a few n × depth
    passes in all, instead of a relevance table per cut-off (3× the run's whole scoring cost
    on a run file). A family without a formula here is scored on that table itself."""
    ks = bound_cutoffs(cutoffs, depth)
    unjudged = unjudged_mask(doc, judged, lengths)
    sums = _Sums.of(doc, unjudged, ks)
    out: dict[str, np.ndarray] = {}
    for metric, k in bounded_metrics(cutoffs, depth):
        formula = _FORMULAS.get(metric.family)
        if formula is not None:
            values = formula(sums, metric.k or k)
        else:
            values = metric.score(counted_relevant(doc, unjudged, k)[0])
        values[~doc.applicable] = np.nan
        out[upper_name(metric.name)] = values
    for k in ks:
        out[unjudged_name(k)] = np.where(doc.applicable, sums.count(k).astype(float), np.nan)
    return out


class _Sums:
    """What the bounds' formulas read: the doc table's per-cut-off sums (found, DCG, ideal
    DCG) and the unjudged mask's cumulative count and DCG by rank."""

    def __init__(self, doc: RelevanceTable, unjudged: np.ndarray, ks: Sequence[int]):
        self.doc = doc.prepare(ks)
        depth = doc.depth
        self.discount = 1.0 / np.log2(np.arange(2, depth + 2))
        self.cum_discount = np.concatenate(([0.0], np.cumsum(self.discount)))
        self.unjudged = unjudged
        self.cum_count = np.cumsum(unjudged, axis=1, dtype=np.int64)
        self.cum_dcg = np.cumsum(unjudged * self.discount, axis=1)

    @classmethod
    def of(cls, doc: RelevanceTable, unjudged: np.ndarray, ks: Sequence[int]) -> _Sums:
        return cls(doc, unjudged, ks)

    def count(self, k: int) -> np.ndarray:
        return np.asarray(self.cum_count[:, k - 1]) if k > 0 else np.zeros(len(self.unjudged))

    def found(self, k: int) -> np.ndarray:
        return np.asarray(self.doc.at_cutoff[k][0] + self.count(k))

    def relevant(self, k: int) -> np.ndarray:
        """The relevant documents of each query with the unjudged ones in the top k added."""
        return np.asarray(self.doc.n_relevant + self.count(k))

    @cached_property
    def relevant_mask(self) -> np.ndarray:
        """(n × depth) True at a relevant document, the unjudged ones counted."""
        return np.asarray((self.doc.gains > 0) | self.unjudged)

    @cached_property
    def relevant_by_rank(self) -> np.ndarray:
        """(n × depth) cumulative count of relevant documents by rank, unjudged ones counted."""
        return np.cumsum(self.relevant_mask, axis=1, dtype=np.int64)


def _hit(s: _Sums, k: int) -> np.ndarray:
    return (s.found(k) > 0).astype(float)


def _precision(s: _Sums, k: int) -> np.ndarray:
    return s.found(k) / k


def _recall(s: _Sums, k: int) -> np.ndarray:
    return np.asarray(s.found(k) / np.maximum(s.relevant(k), 1).astype(float))


def _ndcg(s: _Sums, k: int) -> np.ndarray:
    _, dcg, idcg = s.doc.at_cutoff[k]
    dcg = dcg + s.cum_dcg[:, k - 1]
    # the added documents (grade 1) come right after the judged grades in the ideal order
    before = np.minimum(s.doc.n_relevant, k)
    idcg = idcg + s.cum_discount[np.minimum(s.relevant(k), k)] - s.cum_discount[before]
    return np.asarray(np.divide(dcg, idcg, out=np.zeros(dcg.size), where=idcg > 0))


def _mrr(s: _Sums, k: int) -> np.ndarray:
    first = s.doc.first_rank.astype(float)
    first[first == 0] = np.inf
    head = s.unjudged[:, :k]
    some = head.any(axis=1)
    first[some] = np.minimum(first[some], head[some].argmax(axis=1) + 1)
    return np.asarray(np.divide(1.0, first, out=np.zeros(first.size), where=first <= k))


def _map(s: _Sums, k: int) -> np.ndarray:
    ranks = np.arange(1, s.doc.depth + 1)
    summed = (s.relevant_mask * (s.relevant_by_rank / ranks)).sum(axis=1)
    return np.asarray(summed / np.maximum(s.relevant(k), 1))


def _r_precision(s: _Sums, k: int) -> np.ndarray:
    r = s.relevant(k)
    at = np.clip(np.minimum(r, s.doc.depth) - 1, 0, None)
    found = np.take_along_axis(s.relevant_by_rank, at[:, None], axis=1)[:, 0]
    return np.where(r > 0, found / np.maximum(r, 1), 0.0)


_FORMULAS: Mapping[str, Callable[[_Sums, int], np.ndarray]] = {
    "hit": _hit, "precision": _precision, "recall": _recall, "ndcg": _ndcg, "mrr": _mrr,
    "map": _map, "r_precision": _r_precision}


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
