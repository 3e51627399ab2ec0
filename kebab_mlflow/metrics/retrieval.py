"""Retrieval metrics over a relevance table, vectorised across queries.

A :class:`RelevanceTable` holds, for n queries and a retrieval depth D:

- ``gains`` (n × D): the graded relevance of the item at each rank (0 when not relevant or
  when fewer than D items came back — a short list is a loss, as in trec_eval);
- ``n_relevant`` (n): how many relevant items the query has (0 → the metric is NaN: the query
  is skipped, not counted as 0);
- ``ideal`` (n × W, W ≤ D): the query's relevant grades sorted descending (for nDCG), W =
  the most relevant items any query has, at most D (the rest of an ideal row is zeros anyway:
  a million queries × 100 ranks of mostly zeros cost more in page faults than the metrics).

Linear in the queries, with temporaries that do not grow with them: gains are int8 when every
grade is a whole number up to 127 (exact; float64 otherwise), the builders work in blocks of
queries, and one ``nonzero`` pass in blocks lists the relevant retrieved items
(:attr:`RelevanceTable.relevant_hits`, a few a query). Every metric is then a ``bincount`` over
that list: :meth:`RelevanceTable.prepare` computes every asked cut-off's relevant count and DCG
at once, shared by hit, precision, recall and nDCG; MRR and the first relevant rank read the
first entry of each query. No BLAS call (its threads spin on a loaded machine).

Doc-level tables rank documents by their first appearance in the hit list: later chunks of a
document already seen are dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

CUTOFFS = (1, 3, 5, 10)  # the standard cut-offs every run of enough depth reports
MRR_CUTOFF = 10


@dataclass(frozen=True)
class RelevanceTable:
    gains: np.ndarray
    n_relevant: np.ndarray
    ideal: np.ndarray

    @property
    def depth(self) -> int:
        return int(self.gains.shape[1])

    @cached_property
    def applicable(self) -> np.ndarray:
        return self.n_relevant > 0

    @cached_property
    def not_applicable(self) -> np.ndarray:
        return np.asarray(np.flatnonzero(self.n_relevant <= 0))

    @cached_property
    def relevant_or_one(self) -> np.ndarray:
        """The recall denominator: the query's relevant items, 1 where it has none."""
        return np.asarray(np.maximum(self.n_relevant, 1), dtype=np.float64)

    @cached_property
    def relevant_hits(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every relevant retrieved item as (query row, 0-based rank, grade, its count among
        its query's relevant items so far), in row-major order.

        One scan of the gains in blocks (:func:`_nonzero_cells`, no n × depth temporary);
        every metric is then a ``bincount`` over these few entries (about 1.5 a
        query in the benchmark), not a pass over n × depth cells."""
        row, rank = np.divmod(_nonzero_cells(self.gains), max(self.depth, 1))
        grade = self.gains[row, rank].astype(np.float64)
        index = np.arange(row.size)
        starts = np.maximum.accumulate(np.where(_row_starts(row), index, 0)) if row.size \
            else index
        return row, rank, grade, index - starts + 1

    @cached_property
    def at_cutoff(self) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Cut-off k → (relevant items in the top k, DCG@k, ideal DCG@k) per query, filled by
        :meth:`prepare` (hit, precision and recall share the count; nDCG both sums)."""
        return {}

    def prepare(self, cutoffs: Iterable[int]) -> RelevanceTable:
        """Compute the per-cut-off sums of ``cutoffs`` (those not yet computed) at once: each
        relevant hit falls in the segment between two consecutive cut-offs; one ``bincount``
        per sum over (query, segment) and a cumulative sum over the few segments give every
        cut-off's count and DCG. Returns the table."""
        ks = sorted({k for k in cutoffs if k not in self.at_cutoff})
        for k in ks:
            _check_depth(self, k)
            if k <= 0:
                raise ValueError(f"cut-off {k} must be >= 1")
        if not ks:
            return self
        n, width = self.gains.shape[0], len(ks)
        row, rank, grade, _ = self.relevant_hits
        segment = np.searchsorted(ks, rank, side="right")  # rank < ks[segment]
        inside = segment < width
        cell = segment[inside] * n + row[inside]  # (cut-off, query): each cut-off contiguous
        found = np.bincount(cell, minlength=width * n).reshape(width, n)
        dcg = np.bincount(cell, weights=grade[inside] * _discount(self.depth)[rank[inside]],
                          minlength=width * n).reshape(width, n)
        np.cumsum(found, axis=0, out=found)
        np.cumsum(dcg, axis=0, out=dcg)
        idcg = self._ideal_dcg(ks)
        for j, k in enumerate(ks):
            self.at_cutoff[k] = (found[j], dcg[j], idcg[j])
        return self

    def _ideal_dcg(self, ks: Sequence[int]) -> np.ndarray:
        """(cut-offs × n) DCG of the ideal ordering at each cut-off, in blocks."""
        n, width = self.ideal.shape[0], min(ks[-1], self.ideal.shape[1])
        out = np.zeros((len(ks), n))
        if width == 0:
            return out
        columns = np.minimum(ks, width) - 1
        discount = _discount(width)
        for lo, hi in _blocks(n):
            out[:, lo:hi] = np.cumsum(self.ideal[lo:hi, :width] * discount, axis=1)[:, columns].T
        return out

    @cached_property
    def first_rank(self) -> np.ndarray:
        """Rank of the first relevant item within the depth per query (0: none)."""
        row, rank, _, _ = self.relevant_hits
        first = _row_starts(row)
        out = np.zeros(self.gains.shape[0], dtype=np.int64)
        out[row[first]] = rank[first] + 1
        return out

    @classmethod
    def from_rankings(cls, rankings: Sequence[Sequence[str]],
                      relevance: Sequence[Mapping[str, float]], depth: int) -> RelevanceTable:
        """``rankings[i]`` = ids in rank order; ``relevance[i]`` = id → grade (> 0 relevant).

        Each judged id is looked up in the ranking (a C-level scan of at most ``depth`` ids),
        so the cost follows the number of judgments, not depth × queries. An id listed twice
        counts once, at its first rank (the runner refuses duplicate hits anyway)."""
        n = len(rankings)
        judged_lists = [[(item, g) for item, g in rel.items() if g > 0] for rel in relevance]
        n_relevant = np.array([len(j) for j in judged_lists], dtype=np.int64)
        dtype = _gain_dtype(np.fromiter((g for j in judged_lists for _, g in j), dtype=float))
        gains: np.ndarray = np.zeros((n, depth), dtype=dtype)
        ideal: np.ndarray = np.zeros((n, min(depth, int(n_relevant.max(initial=0)))), dtype=dtype)
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
                    at = first_rank.get(item)
                    if at is not None:
                        gains[i, at] = g
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
        dtype = _gain_dtype(rel_grade)
        if dtype == np.int8:  # one stable sort of one key; it runs in linear time on the
            # usual input, judgments already in query order (lexsort's two passes do not)
            order = np.argsort(rel_query * 128 + (127 - rel_grade.astype(np.int64)),
                               kind="stable")
        else:
            order = np.lexsort((-rel_grade, rel_query))
        rel_query, rel_item, rel_grade = rel_query[order], rel_item[order], rel_grade[order]
        n_relevant = np.bincount(rel_query, minlength=n).astype(np.int64)
        starts = np.concatenate(([0], np.cumsum(n_relevant)[:-1]))
        slot = np.arange(rel_query.size) - starts[rel_query]
        gains: np.ndarray = np.zeros((n, depth), dtype=dtype)
        ideal: np.ndarray = np.zeros((n, min(depth, int(n_relevant.max(initial=0)))), dtype=dtype)
        inside = slot < depth
        ideal[rel_query[inside], slot[inside]] = rel_grade[inside]
        # Blocks of queries, so the rows compared stay in the CPU cache: the work per block
        # is the same at any n, and the whole build grows linearly with the queries.
        bounds = np.searchsorted(rel_query, np.arange(0, n + _BLOCK, _BLOCK))
        narrow = not rel_item.size or (_INT32.min < rel_item.min() and
                                       rel_item.max() <= _INT32.max)
        for b, lo in enumerate(range(0, n, _BLOCK)):
            sel = slice(bounds[b], bounds[b + 1])
            _match_block(ranked[lo:lo + _BLOCK, :depth], gains[lo:lo + _BLOCK],
                         rel_query[sel] - lo, rel_item[sel], rel_grade[sel], slot[sel], narrow)
        return cls(gains, n_relevant, ideal)


_BLOCK = 2048  # queries per block of from_codes (2048 x 100 int64 codes = 1.6 MB: L2-sized)
GAIN_BLOCK = 2048  # queries per block of the metric passes (2048 x 100 float64 = 1.6 MB)


def _gain_dtype(grades: np.ndarray) -> type:
    """int8 when every relevant grade is a whole number up to 127 — exact, and one byte a
    rank (a million queries × 100 ranks: 100 MB, not 800 MB of float64) — else float64."""
    positive = grades[grades > 0]
    if positive.size == 0 or (positive.max() <= 127 and np.array_equal(positive,
                                                                       np.floor(positive))):
        return np.int8
    return np.float64


CELL_BLOCK = 1 << 18  # gains cells per block of _nonzero_cells (256 KB of int8)
_EIGHT = np.arange(8)


def _nonzero_cells(values: np.ndarray) -> np.ndarray:
    """Flat indices of the non-zero cells of an array, in order, in blocks of CELL_BLOCK cells.

    int8 gains are read eight cells at a time as uint64 words: few words are non-zero (a
    query has a few relevant items among its 100), and only their cells are looked at."""
    flat = np.ascontiguousarray(values).reshape(-1)
    out = [np.zeros(0, dtype=np.int64)]
    for lo in range(0, flat.size, CELL_BLOCK):
        chunk = flat[lo:lo + CELL_BLOCK]
        if chunk.dtype != np.int8:
            out.append(np.flatnonzero(chunk) + lo)
            continue
        whole = chunk.size - chunk.size % 8
        words = np.flatnonzero(chunk[:whole].view(np.uint64))
        cells = (words[:, None] * 8 + _EIGHT).ravel()
        out.append(cells[chunk[cells] != 0] + lo)
        out.append(np.flatnonzero(chunk[whole:]) + (lo + whole))
    return np.concatenate(out)


def _row_starts(row: np.ndarray) -> np.ndarray:
    """Mask of the entries that start a new row in a sorted row array."""
    starts = np.ones(row.size, dtype=bool)
    starts[1:] = row[1:] != row[:-1]
    return starts


def _blocks(n: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, n, GAIN_BLOCK):
        yield lo, min(n, lo + GAIN_BLOCK)


def _match_block(cells: np.ndarray, gains: np.ndarray, rel_query: np.ndarray,
                 rel_item: np.ndarray, rel_grade: np.ndarray, slot: np.ndarray,
                 narrow: bool = False) -> None:
    """Fill ``gains`` for one block of queries: the j-th judgment of every query is compared
    with its query's whole row at once, for j = 0, 1, ...

    When many rows of the block have a j-th judgment, the whole block is compared in place
    (rows without one compare with -2, never a code) into a reused mask: no copy of the rows.
    Otherwise only those rows are gathered (the few queries with many judgments)."""
    top = int(slot.max(initial=-1))
    # small ints sort by radix in linear time
    by_slot = np.argsort(slot.astype(np.int16) if top < 1 << 15 else slot, kind="stable")
    bounds = np.searchsorted(slot[by_slot], np.arange(top + 2))
    if narrow:
        cells = _narrowed(cells)
    items = np.empty(cells.shape[0], dtype=cells.dtype)
    grades = np.zeros(cells.shape[0], dtype=gains.dtype)
    matched = np.empty(cells.shape, dtype=bool)
    for j in range(bounds.size - 1):
        sel = by_slot[bounds[j]:bounds[j + 1]]
        rows = rel_query[sel]  # distinct and ascending: one j-th judgment per query
        if FULL_BLOCK_SHARE * rows.size >= cells.shape[0]:
            items.fill(-2)
            items[rows] = rel_item[sel]
            grades[rows] = rel_grade[sel]
            np.equal(cells, items[:, None], out=matched)
            hit_row, hit_rank = np.divmod(np.flatnonzero(matched), cells.shape[1])  # few
            gains[hit_row, hit_rank] = grades[hit_row]
            continue
        hit_row, hit_rank = np.divmod(np.flatnonzero(cells[rows] == rel_item[sel][:, None]),
                                      cells.shape[1])
        gains[rows[hit_row], hit_rank] = rel_grade[sel][hit_row]


FULL_BLOCK_SHARE = 4  # compare the whole block when at least 1 / this of its rows take part
_INT32 = np.iinfo(np.int32)


def _narrowed(cells: np.ndarray) -> np.ndarray:
    """The block's codes as int32 when they fit (the comparisons read half the bytes); the
    caller passes ``narrow`` only when every judgment's code fits too, so equal stays equal."""
    if cells.dtype.itemsize > 4 and cells.size and _INT32.min < cells.min() \
            and cells.max() <= _INT32.max:
        return cells.astype(np.int32)
    return cells


def first_appearance(ids: Sequence[str]) -> list[str]:
    """Ids in order of first appearance (doc ranking from a chunk hit list)."""
    return list(dict.fromkeys(ids))


def _masked(values: np.ndarray, table: RelevanceTable) -> np.ndarray:
    """``values`` (a fresh float array) with NaN where the query has no ground truth, in place:
    at a million queries every avoided temporary is 8 MB of page faults."""
    values[table.not_applicable] = np.nan
    return values


def _check_depth(table: RelevanceTable, k: int) -> None:
    if k > table.depth:
        raise ValueError(f"cut-off {k} is deeper than the retrieval depth {table.depth}")


def _discount(depth: int) -> np.ndarray:
    """1 / log2(r + 1) for ranks r = 1..depth."""
    return 1.0 / np.log2(np.arange(2, depth + 2))


def _found(table: RelevanceTable, k: int) -> np.ndarray:
    """Relevant items within the top k, per query (shared by hit, precision and recall)."""
    _check_depth(table, k)
    if k <= 0:
        return np.zeros(table.gains.shape[0], dtype=np.int64)
    return table.prepare([k]).at_cutoff[k][0]


def hit_at_k(table: RelevanceTable, k: int) -> np.ndarray:
    return _masked((_found(table, k) > 0).astype(float), table)


def mrr(table: RelevanceTable, cutoff: int = MRR_CUTOFF) -> np.ndarray:
    """1 / rank of the first relevant item if that rank <= cutoff, else 0."""
    _check_depth(table, cutoff)
    first = table.first_rank
    within = (first > 0) & (first <= cutoff)
    return _masked(np.divide(1.0, first, out=np.zeros(first.size), where=within), table)


def first_relevant_rank(table: RelevanceTable) -> np.ndarray:
    """Rank of the first relevant item within the retrieved depth, 0 for a miss, NaN without
    ground truth — not a metric: what ``compare`` classifies queries by at any depth."""
    return _masked(table.first_rank.astype(float), table)


def precision_at_k(table: RelevanceTable, k: int) -> np.ndarray:
    """Relevant in the top k / k — k even when fewer than k items came back (trec_eval P)."""
    return _masked(_found(table, k) / k, table)


def recall_at_k(table: RelevanceTable, k: int) -> np.ndarray:
    return _masked(_found(table, k) / table.relevant_or_one, table)


def ndcg_at_k(table: RelevanceTable, k: int) -> np.ndarray:
    """Σ gain_r / log2(r + 1) over r ≤ k, divided by the same over the ideal ordering
    (linear gain = the grade, as trec_eval's ndcg_cut)."""
    _check_depth(table, k)
    _, dcg, idcg = table.prepare([k]).at_cutoff[k]
    return _masked(np.divide(dcg, idcg, out=np.zeros(dcg.size), where=idcg > 0), table)


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
    row, rank, _, found_so_far = table.relevant_hits
    summed = np.bincount(row, weights=found_so_far / (rank + 1), minlength=table.gains.shape[0])
    return _masked(summed / table.relevant_or_one, table)


def r_precision(table: RelevanceTable) -> np.ndarray:
    """Relevant items in the top R / R, where R = the query's number of relevant items
    (trec_eval ``Rprec``); when R exceeds the depth, the ranks past it hold nothing."""
    row, rank, _, _ = table.relevant_hits
    found = np.bincount(row, weights=rank < table.n_relevant[row],
                        minlength=table.gains.shape[0])
    return _masked(found / table.relevant_or_one, table)


def judged_at_k(judged: RelevanceTable, k: int) -> np.ndarray:
    """Share of the top k that has a judgment (any grade, 0 included) — ``judged`` is a table
    whose every *judged* item has gain 1. Divides by k like ``precision_at_k`` (ir_measures'
    Judged@k, trec_eval P@k at relevance level 0): a short list lowers it."""
    return precision_at_k(judged, k)


RANK_FUNCTIONS = {
    "map": average_precision,
    "r_precision": r_precision,
}
