"""Retrieval backends of the reference pipeline. Each ranks the chunk list of one index.

A backend has ``search_batch(queries, k) -> list[list[(chunk_index, score)]]``; ranking is by
score descending, ties broken by chunk position in the corpus (ascending), so results are
deterministic.
"""

from __future__ import annotations

import numpy as np


def top_k_indices(scores: np.ndarray, k: int, *, positive_only: bool = False) -> np.ndarray:
    """Indices of the k best scores without a full sort; ties by ascending index."""
    n = scores.shape[0]
    candidates = np.flatnonzero(scores > 0) if positive_only else np.arange(n)
    return np.asarray(candidates[top_k_positions(candidates, scores[candidates], k)])


def top_k_positions(candidates: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """Positions (into ``candidates``/``values``) of the k best values, best first, ties by
    ascending candidate index; ``candidates`` need not be sorted (e.g. the stored columns of
    one sparse row)."""
    n = candidates.size
    k = min(k, n)
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    positions = np.arange(n)
    if k < n:
        kth = np.partition(values, n - k)[n - k]
        positions = np.flatnonzero(values >= kth)
    order = np.lexsort((candidates[positions], -values[positions]))[:k]
    return positions[order]
