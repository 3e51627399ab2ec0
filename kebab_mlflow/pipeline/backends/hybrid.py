"""Hybrid retrieval: reciprocal-rank fusion (RRF) of a lexical and a dense backend.

Each backend returns its top-``depth`` chunks for a query; a chunk's fused score is

    score(c) = Σ_{b ∈ backends, c ∈ top_depth(b)} 1 / (rrf_k + rank_b(c))     (rank from 1)

(Cormack, Clarke & Büttcher 2009; ``rrf_k`` = 60 by default). A chunk that only one backend
returns gets only that backend's term. The fused list holds the union of both lists (at most
2·depth chunks), ranked by fused score descending, ties by chunk position ascending.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kebab_mlflow.config import default
from kebab_mlflow.errors import ConfigError
from kebab_mlflow.pipeline.backends import top_k_indices


class HybridBackend:
    def __init__(self, lexical: Any, dense: Any, rrf_k: int | float = default("hybrid.rrf_k"),
                 depth: int = default("hybrid.depth")):
        problems = []
        if not rrf_k >= 0:
            problems.append(f"hybrid.rrf_k must be >= 0, got {rrf_k}")
        if depth < 1:
            problems.append(f"hybrid.depth must be >= 1, got {depth}")
        if problems:
            raise ConfigError("; ".join(problems))
        self.backends = (lexical, dense)
        self.rrf_k = float(rrf_k)
        self.depth = int(depth)

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        ranked_lists = [b.search_batch(queries, self.depth) for b in self.backends]
        return [fuse([lists[q] for lists in ranked_lists], self.rrf_k, k)
                for q in range(len(queries))]


def fuse(ranked_lists: Sequence[Sequence[tuple[int, float]]], rrf_k: float,
         k: int) -> list[tuple[int, float]]:
    """RRF of several ranked ``(chunk_index, score)`` lists; the top ``k`` fused entries."""
    fused: dict[int, float] = {}
    for ranked in ranked_lists:
        for rank, (index, _score) in enumerate(ranked, 1):
            fused[index] = fused.get(index, 0.0) + 1.0 / (rrf_k + rank)
    if not fused:
        return []
    indices = np.fromiter(fused, dtype=np.int64, count=len(fused))
    scores = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
    # top_k_indices breaks ties by position in the array; sort by chunk index first
    order = np.argsort(indices, kind="stable")
    indices, scores = indices[order], scores[order]
    return [(int(indices[i]), float(scores[i])) for i in top_k_indices(scores, k)]
