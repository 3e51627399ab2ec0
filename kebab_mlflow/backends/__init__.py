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
    k = min(k, candidates.size)
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    values = scores[candidates]
    if k < candidates.size:
        kth = np.partition(values, candidates.size - k)[candidates.size - k]
        keep = values >= kth
        candidates, values = candidates[keep], values[keep]
    order = np.lexsort((candidates, -values))[:k]
    return candidates[order]
