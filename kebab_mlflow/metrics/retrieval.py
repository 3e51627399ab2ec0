"""Retrieval metrics over a relevance table, vectorised across queries.

A :class:`RelevanceTable` holds, for n queries and a retrieval depth D:

- ``gains`` (n × D): the graded relevance of the item at each rank (0 when not relevant or
  when fewer than D items came back — a short list is a loss, as in trec_eval);
- ``n_relevant`` (n): how many relevant items the query has (0 → the metric is NaN: the query
  is skipped, not counted as 0);
- ``ideal`` (n × W, W ≤ D): the query's relevant grades sorted descending (for nDCG), W =
  the most relevant items any query has, at most D (the rest of an ideal row is zeros anyway:
  a million queries × 100 ranks of mostly zeros cost more in page faults than the metrics).

Linear in the queries: the builders work in blocks of queries, and the metric functions read
the columns up to their cut-off (one matrix-vector product for nDCG, one count for the others)
instead of building n × D cumulative sums.

Doc-level tables rank documents by their first appearance in the hit list: later chunks of a
document already seen are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from kebab_mlflow.metrics.registry import MRR_CUTOFF


@dataclass(frozen=True)
class RelevanceTable:
    gains: np.ndarray
    n_relevant: np.ndarray
    ideal: np.ndarray

    @property
    def depth(self) -> int:
        return self.gains.shape[1]

    @property
    def applicable(self) -> np.ndarray:
        return self.n_relevant > 0

    # Cumulative sums over ranks, computed once per table (every cut-off then reads one
    # column): column k-1 holds the value at cut-off k.
    @cached_property
    def relevant_cumulative(self) -> np.ndarray:
        """(n × depth) number of relevant items within the first r+1 ranks."""
        return np.cumsum(self.gains > 0, axis=1, dtype=np.int64)

    @cached_property
    def found_at(self) -> dict[int, np.ndarray]:
        """Cut-off k → relevant items within the top k, per query (filled as metrics ask)."""
        return {}

    @cached_property
    def dcg_cumulative(self) -> np.ndarray:
        return np.cumsum(self.gains * _discount(self.depth), axis=1)

    @cached_property
    def idcg_cumulative(self) -> np.ndarray:
        ideal = np.zeros_like(self.gains)
        ideal[:, :self.ideal.shape[1]] = self.ideal
        return np.cumsum(ideal * _discount(self.depth), axis=1)

    @classmethod
    def from_rankings(cls, rankings: Sequence[Sequence[str]],
                      relevance: Sequence[Mapping[str, float]], depth: int) -> RelevanceTable:
        """``rankings[i]`` = ids in rank order; ``relevance[i]`` = id → grade (> 0 relevant).

        Each judged id is looked up in the ranking (a C-level scan of at most ``depth`` ids),
        so the cost follows the number of judgments, not depth × queries. An id listed twice
        counts once, at its first rank (the runner refuses duplicate hits anyway)."""
        n = len(rankings)
        gains = np.zeros((n, depth))
        judged_lists = [[(item, g) for item, g in rel.items() if g > 0] for rel in relevance]
        n_relevant = np.array([len(j) for j in judged_lists], dtype=np.int64)
        ideal = np.zeros((n, min(depth, int(n_relevant.max(initial=0)))))
        for i, (ranked, judged) in enumerate(zip(rankings, judged_lists, strict=True)):
            if not judged:
                continue
            top = sorted((g for _, g in judged), reverse=True)[:depth]
            ideal[i, : len(top)] = top
            head = ranked[:depth]
            if not isinstance(head, (list, tuple)):
                head = list(head)
            if len(judged) > 8:  # many judgments: one dict of the ranking beats many scans
                first_rank: dict[str, int] = {}
                for r, item in enumerate(head):
                    first_rank.setdefault(item, r)
                for item, g in judged:
                    r = first_rank.get(item)
                    if r is not None:
                        gains[i, r] = g
                continue
            for item, g in judged:
                try:
                    gains[i, head.index(item)] = g
                except ValueError:
                    pass
        return cls(gains, n_relevant, ideal)

    @classmethod
    def from_codes(cls, ranked: np.ndarray, rel_query: np.ndarray, rel_item: np.ndarray,
                   rel_grade: np.ndarray, depth: int | None = None) -> RelevanceTable:
        """Vectorised builder from integer-coded ids (no Python loop over queries).

        ``ranked`` (n × D ints): item codes in rank order, ``-1`` padding a short list; a row
        must not repeat an item. ``rel_query``/``rel_item``/``rel_grade`` (m each): the
        judgments as (query row, item code, grade) triples, at most one per (query, item);
        grades <= 0 are not relevant. Gives the same table as :meth:`from_rankings`.

        Judgments are sorted by (query, grade descending); the j-th judgment of every query
        is then compared with its query's whole row at once, for j = 0, 1, ...: the work is
        depth × judgments, with a Python loop only as long as the largest judgment list.
        """
        ranked = np.asarray(ranked)
        n, width = ranked.shape
        depth = width if depth is None else depth
        rel_query = np.asarray(rel_query, dtype=np.int64)
        rel_item = np.asarray(rel_item, dtype=np.int64)
        rel_grade = np.asarray(rel_grade, dtype=np.float64)
        keep = rel_grade > 0
        rel_query, rel_item, rel_grade = rel_query[keep], rel_item[keep], rel_grade[keep]
        order = np.lexsort((-rel_grade, rel_query))
        rel_query, rel_item, rel_grade = rel_query[order], rel_item[order], rel_grade[order]
        n_relevant = np.bincount(rel_query, minlength=n).astype(np.int64)
        starts = np.concatenate(([0], np.cumsum(n_relevant)[:-1]))
        slot = np.arange(rel_query.size) - starts[rel_query]
        gains = np.zeros((n, depth))
        ideal = np.zeros((n, min(depth, int(n_relevant.max(initial=0)))))
        inside = slot < depth
        ideal[rel_query[inside], slot[inside]] = rel_grade[inside]
        # Blocks of queries, so the rows compared stay in the CPU cache: the work per block
        # is the same at any n, and the whole build grows linearly with the queries.
        bounds = np.searchsorted(rel_query, np.arange(0, n + _BLOCK, _BLOCK))
        for b, lo in enumerate(range(0, n, _BLOCK)):
            sel = slice(bounds[b], bounds[b + 1])
            _match_block(ranked[lo:lo + _BLOCK, :depth], gains[lo:lo + _BLOCK],
                         rel_query[sel] - lo, rel_item[sel], rel_grade[sel], slot[sel])
        return cls(gains, n_relevant, ideal)


_BLOCK = 8192  # queries per block of from_codes (8192 x 100 int64 codes = 6.5 MB)


def _match_block(cells: np.ndarray, gains: np.ndarray, rel_query: np.ndarray,
                 rel_item: np.ndarray, rel_grade: np.ndarray, slot: np.ndarray) -> None:
    """Fill ``gains`` for one block of queries: the j-th judgment of every query is compared
    with its query's whole row at once, for j = 0, 1, ..."""
    by_slot = np.argsort(slot, kind="stable")
    bounds = np.searchsorted(slot[by_slot], np.arange(int(slot.max(initial=-1)) + 2))
    for j in range(bounds.size - 1):
        sel = by_slot[bounds[j]:bounds[j + 1]]
        rows = rel_query[sel]  # distinct and ascending: one j-th judgment per query
        # every query of the block has a j-th judgment (j = 0, usually): no copy of the rows
        block = cells if rows.size == cells.shape[0] else cells[rows]
        hit_row, hit_rank = np.nonzero(block == rel_item[sel][:, None])
        gains[rows[hit_row], hit_rank] = rel_grade[sel][hit_row]


def first_appearance(ids: Sequence[str]) -> list[str]:
    """Ids in order of first appearance (doc ranking from a chunk hit list)."""
    return list(dict.fromkeys(ids))


def _masked(values: np.ndarray, table: RelevanceTable) -> np.ndarray:
    return np.where(table.applicable, values, np.nan)


def _check_depth(table: RelevanceTable, k: int) -> None:
    if k > table.depth:
        raise ValueError(f"cut-off {k} is deeper than the retrieval depth {table.depth}")


def _discount(depth: int) -> np.ndarray:
    """1 / log2(r + 1) for ranks r = 1..depth."""
    return 1.0 / np.log2(np.arange(2, depth + 2))


def _found(table: RelevanceTable, k: int) -> np.ndarray:
    """Relevant items within the top k, per query."""
    _check_depth(table, k)
    if k <= 0:
        return np.zeros(table.gains.shape[0], dtype=np.int64)
    if "relevant_cumulative" in table.__dict__:  # already built by another metric
        return table.relevant_cumulative[:, k - 1]
    found = table.found_at
    if k not in found:  # hit, precision and recall at k share one count
        found[k] = np.count_nonzero(table.gains[:, :k], axis=1)  # gains are never negative
    return found[k]


def hit_at_k(table: RelevanceTable, k: int) -> np.ndarray:
    return _masked((_found(table, k) > 0).astype(float), table)


def mrr(table: RelevanceTable, cutoff: int = MRR_CUTOFF) -> np.ndarray:
    """1 / rank of the first relevant item if that rank <= cutoff, else 0."""
    _check_depth(table, cutoff)
    relevant = table.gains[:, :cutoff] > 0
    rank = relevant.argmax(axis=1) + 1
    return _masked(np.where(relevant.any(axis=1), 1.0 / rank, 0.0), table)


def first_relevant_rank(table: RelevanceTable) -> np.ndarray:
    """Rank of the first relevant item within the retrieved depth, 0 for a miss, NaN without
    ground truth — not a metric: what ``compare`` classifies queries by at any depth."""
    relevant = table.gains > 0
    rank = np.where(relevant.any(axis=1), relevant.argmax(axis=1) + 1, 0)
    return _masked(rank.astype(float), table)


def precision_at_k(table: RelevanceTable, k: int) -> np.ndarray:
    """Relevant in the top k / k — k even when fewer than k items came back (trec_eval P)."""
    return _masked(_found(table, k) / k, table)


def recall_at_k(table: RelevanceTable, k: int) -> np.ndarray:
    return _masked(_found(table, k) / np.maximum(table.n_relevant, 1), table)


def ndcg_at_k(table: RelevanceTable, k: int) -> np.ndarray:
    """Σ gain_r / log2(r + 1) over r ≤ k, divided by the same over the ideal ordering
    (linear gain = the grade, as trec_eval's ndcg_cut)."""
    _check_depth(table, k)
    dcg = table.gains[:, :k] @ _discount(k)
    width = min(k, table.ideal.shape[1])
    idcg = table.ideal[:, :width] @ _discount(width)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _masked(np.where(idcg > 0, dcg / np.where(idcg > 0, idcg, 1), 0.0), table)


FAMILY_FUNCTIONS = {
    "hit": hit_at_k,
    "precision": precision_at_k,
    "recall": recall_at_k,
    "ndcg": ndcg_at_k,
}


# Rank-wide metrics (no cut-off: they read the whole retrieved depth) and judged_at_k.
# Appended here rather than folded into the table so the table's construction stays as it is.


def average_precision(table: RelevanceTable) -> np.ndarray:
    """Σ over relevant ranks r ≤ depth of P@r, divided by *all* relevant items (trec_eval
    ``map``): a relevant item never retrieved within the depth adds 0."""
    relevant = table.gains > 0
    ranks = np.arange(1, table.depth + 1)
    precision_at_r = table.relevant_cumulative / ranks
    summed = np.where(relevant, precision_at_r, 0.0).sum(axis=1)
    return _masked(summed / np.maximum(table.n_relevant, 1), table)


def r_precision(table: RelevanceTable) -> np.ndarray:
    """Relevant items in the top R / R, where R = the query's number of relevant items
    (trec_eval ``Rprec``); when R exceeds the depth, the ranks past it hold nothing."""
    r = np.minimum(table.n_relevant, table.depth)
    found = np.zeros(table.gains.shape[0])
    reached = r > 0
    found[reached] = table.relevant_cumulative[reached, r[reached] - 1]
    return _masked(found / np.maximum(table.n_relevant, 1), table)


def judged_at_k(judged: RelevanceTable, k: int) -> np.ndarray:
    """Share of the top k that has a judgment (any grade, 0 included) — ``judged`` is a table
    whose every *judged* item has gain 1. Divides by k like ``precision_at_k`` (ir_measures'
    Judged@k, trec_eval P@k at relevance level 0): a short list lowers it."""
    return precision_at_k(judged, k)


RANK_FUNCTIONS = {
    "map": average_precision,
    "r_precision": r_precision,
}
