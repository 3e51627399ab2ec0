"""Leaderboard statistics: which rows are tied with the best, and how sure each rank is.

Pure numpy, no MLflow. Input: every row's per-query scores on the same queries (NaN = the
query does not count for that row; None = the row failed). Higher is better.

* **Best row**: the highest mean among the *contenders* (rows that are neither a floor nor the
  ceiling: a ceiling is best by construction, which would say nothing).
* **Tied with the best**: every other row is tested against the best, paired over the queries
  both count — a two-sided sign-flip test of the mean difference
  (:func:`kebab_mlflow.stats.resampling.paired_tests`), Holm's correction across those rows. A
  row whose Holm-adjusted p is ≥ alpha is in the best's tie group: not shown different (which
  is not shown equal). For a contender that means "not significantly worse"; a ceiling can
  also be significantly *better* than the best contender.
* **Rank interval**: queries are resampled with replacement (``resamples`` times, seeded), the
  same draw for every row; each row's mean over the draw ranks it among all rows with a mean
  (rank 1 = best; a row's rank is 1 + the rows strictly better); the interval is the 2.5th and
  97.5th percentiles of its ranks.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from kebab_mlflow.stats.resampling import holm, paired_tests

ALPHA = 0.05
CONFIDENCE = 0.95
_BLOCK_CELLS = 4_000_000  # rows × queries × resamples gathered at once (~32 MB of float64)


@dataclass(frozen=True, kw_only=True)
class RowRank:
    """One row's place: its mean, point rank, bootstrap rank interval and test against the
    best (``p_vs_best``/``p_holm`` None for the best itself and for rows without a mean)."""

    mean: float | None
    rank: int | None
    rank_low: int | None
    rank_high: int | None
    p_vs_best: float | None
    p_holm: float | None
    tied_with_best: bool
    best: bool


def rank_rows(scores: Mapping[str, np.ndarray | None], *, contenders: Collection[str],
              resamples: int, seed: int, alpha: float = ALPHA,
              confidence: float = CONFIDENCE) -> dict[str, RowRank]:
    """Every row's :class:`RowRank` (rows without a counted query: no rank, not tied)."""
    matrix, names = _matrix(scores)
    means = {n: _mean(matrix[i]) for i, n in enumerate(names)}
    ranked = [n for n in names if not np.isnan(means[n])]
    eligible = [n for n in ranked if n in contenders]
    best = max(eligible, key=lambda n: means[n]) if eligible else None
    tests = _against_best(matrix, names, ranked, best, resamples, seed)
    intervals = _rank_intervals(matrix[[names.index(n) for n in ranked]], resamples, seed,
                                confidence)
    point = {n: 1 + sum(means[m] > means[n] for m in ranked) for n in ranked}
    out = {}
    for n in scores:
        if n not in point:
            out[n] = RowRank(mean=None, rank=None, rank_low=None, rank_high=None,
                             p_vs_best=None, p_holm=None, tied_with_best=False, best=False)
            continue
        low, high = intervals[ranked.index(n)]
        p, p_holm = tests.get(n, (None, None))
        tied = n == best or (p_holm is not None and p_holm >= alpha)
        out[n] = RowRank(mean=means[n], rank=point[n], rank_low=low, rank_high=high,
                         p_vs_best=p, p_holm=p_holm, tied_with_best=tied, best=n == best)
    return out


def _mean(row: np.ndarray) -> float:
    counted = row[~np.isnan(row)]
    return float(counted.mean()) if counted.size else float("nan")


def _matrix(scores: Mapping[str, np.ndarray | None]) -> tuple[np.ndarray, list[str]]:
    """Rows × queries, NaN where a row does not count a query (a failed row: all NaN)."""
    arrays = [None if v is None else np.asarray(v, dtype=np.float64) for v in scores.values()]
    n = max((a.size for a in arrays if a is not None), default=0)
    matrix = np.full((len(arrays), n), np.nan)
    for i, a in enumerate(arrays):
        if a is not None and a.size == n:
            matrix[i] = a
    return matrix, list(scores)


def _against_best(matrix: np.ndarray, names: list[str], ranked: list[str], best: str | None,
                  resamples: int, seed: int
                  ) -> dict[str, tuple[float | None, float]]:
    """name → (p, Holm-adjusted p) for every ranked row but the best."""
    if best is None:
        return {}
    others = [n for n in ranked if n != best]
    b = matrix[names.index(best)]
    deltas = []
    for n in others:
        row = matrix[names.index(n)]
        both = ~np.isnan(row) & ~np.isnan(b)
        deltas.append(row[both] - b[both])
    tests = paired_tests(deltas, resamples, seed) if deltas else []
    p = np.array([1.0 if t.p_value is None else t.p_value for t in tests])
    adjusted = holm(p) if p.size else p
    return {n: (t.p_value, float(a)) for n, t, a in zip(others, tests, adjusted, strict=True)}


def _rank_intervals(matrix: np.ndarray, resamples: int, seed: int, confidence: float
                    ) -> list[tuple[int, int]]:
    """Each row's percentile interval of its rank over joint query resamples."""
    rows, n = matrix.shape
    if rows == 0 or n == 0:
        return []
    counted = ~np.isnan(matrix)
    values = np.where(counted, matrix, 0.0)
    rng = np.random.default_rng([seed, n, 7])  # 7: this module's stream, apart from others'
    block = max(1, _BLOCK_CELLS // (rows * n))
    ranks = np.empty((rows, resamples), dtype=np.int64)
    for start in range(0, resamples, block):
        b = min(block, resamples - start)
        idx = rng.integers(0, n, size=(b, n))
        sums = values[:, idx].sum(axis=2)  # rows × b
        counts = counted[:, idx].sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(counts > 0, sums / np.maximum(counts, 1), -np.inf)
        # rank = 1 + rows strictly better in this resample
        ranks[:, start:start + b] = 1 + (means[None, :, :] > means[:, None, :]).sum(axis=1)
    tail = (1 - confidence) / 2
    low = np.quantile(ranks, tail, axis=1, method="lower")
    high = np.quantile(ranks, 1 - tail, axis=1, method="higher")
    return [(int(lo), int(hi)) for lo, hi in zip(low, high, strict=True)]
