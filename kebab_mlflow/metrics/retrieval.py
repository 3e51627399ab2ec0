"""Retrieval metrics over a relevance table, vectorised across queries.

A :class:`RelevanceTable` holds, for n queries and a retrieval depth D:

- ``gains`` (n × D): the graded relevance of the item at each rank (0 when not relevant or
  when fewer than D items came back — a short list is a loss, as in trec_eval);
- ``n_relevant`` (n): how many relevant items the query has (0 → the metric is NaN: the query
  is skipped, not counted as 0);
- ``ideal`` (n × D): the query's relevant grades sorted descending (for nDCG).

Doc-level tables rank documents by their first appearance in the hit list: later chunks of a
document already seen are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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

    @classmethod
    def from_rankings(cls, rankings: Sequence[Sequence[str]],
                      relevance: Sequence[Mapping[str, float]], depth: int) -> RelevanceTable:
        """``rankings[i]`` = ids in rank order; ``relevance[i]`` = id → grade (> 0 relevant)."""
        n = len(rankings)
        gains = np.zeros((n, depth))
        ideal = np.zeros((n, depth))
        n_relevant = np.zeros(n, dtype=np.int64)
        for i, (ranked, rel) in enumerate(zip(rankings, relevance, strict=True)):
            grades = [g for g in rel.values() if g > 0]
            n_relevant[i] = len(grades)
            if not grades:
                continue
            row = [rel.get(item, 0) for item in ranked[:depth]]
            gains[i, : len(row)] = row
            top = sorted(grades, reverse=True)[:depth]
            ideal[i, : len(top)] = top
        np.maximum(gains, 0, out=gains)
        return cls(gains, n_relevant, ideal)


def first_appearance(ids: Sequence[str]) -> list[str]:
    """Ids in order of first appearance (doc ranking from a chunk hit list)."""
    return list(dict.fromkeys(ids))


def _masked(values: np.ndarray, table: RelevanceTable) -> np.ndarray:
    return np.where(table.applicable, values, np.nan)


def _check_depth(table: RelevanceTable, k: int) -> None:
    if k > table.depth:
        raise ValueError(f"cut-off {k} is deeper than the retrieval depth {table.depth}")


def hit_at_k(table: RelevanceTable, k: int) -> np.ndarray:
    _check_depth(table, k)
    return _masked((table.gains[:, :k] > 0).any(axis=1).astype(float), table)


def first_relevant_rank(table: RelevanceTable) -> np.ndarray:
    """1-based rank of the first relevant item; 0 when none within the depth."""
    relevant = table.gains > 0
    found = relevant.any(axis=1)
    return np.where(found, relevant.argmax(axis=1) + 1, 0)


def mrr(table: RelevanceTable, cutoff: int = MRR_CUTOFF) -> np.ndarray:
    _check_depth(table, cutoff)
    rank = first_relevant_rank(table)
    with np.errstate(divide="ignore"):
        rr = np.where((rank > 0) & (rank <= cutoff), 1.0 / np.maximum(rank, 1), 0.0)
    return _masked(rr, table)


def precision_at_k(table: RelevanceTable, k: int) -> np.ndarray:
    _check_depth(table, k)
    return _masked((table.gains[:, :k] > 0).sum(axis=1) / k, table)


def recall_at_k(table: RelevanceTable, k: int) -> np.ndarray:
    _check_depth(table, k)
    found = (table.gains[:, :k] > 0).sum(axis=1)
    return _masked(found / np.maximum(table.n_relevant, 1), table)


def ndcg_at_k(table: RelevanceTable, k: int) -> np.ndarray:
    """Σ gain_r / log2(r + 1) over r ≤ k, divided by the same over the ideal ordering."""
    _check_depth(table, k)
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = table.gains[:, :k] @ discount
    idcg = table.ideal[:, :k] @ discount
    with np.errstate(invalid="ignore", divide="ignore"):
        return _masked(np.where(idcg > 0, dcg / np.where(idcg > 0, idcg, 1), 0.0), table)


FAMILY_FUNCTIONS = {
    "hit": hit_at_k,
    "precision": precision_at_k,
    "recall": recall_at_k,
    "ndcg": ndcg_at_k,
}
