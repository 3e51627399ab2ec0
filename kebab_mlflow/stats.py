"""Statistics over per-query scores: seeded, vectorised bootstrap and randomization tests.

Every function takes an explicit ``seed``; the same inputs and seed give the same numbers.
Resamples are drawn in blocks so memory stays bounded (block × n counts at a time), and all
metrics share the same resampled query sets (a joint, paired resampling).
"""

from __future__ import annotations

import numpy as np

BLOCK = 256


def _as_matrix(values: np.ndarray) -> np.ndarray:
    m = np.asarray(values, dtype=np.float64)
    return m[None, :] if m.ndim == 1 else m


def bootstrap_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """(metrics × resamples) means of bootstrap resamples of the columns (queries)."""
    data = _as_matrix(values)
    m, n = data.shape
    rng = np.random.default_rng(seed)
    out = np.empty((m, resamples))
    done = 0
    while done < resamples:
        b = min(BLOCK, resamples - done)
        idx = rng.integers(0, n, size=(b, n), dtype=np.int64)
        # counts[r, j] = how often query j is in resample r; means = counts @ data.T / n
        offsets = (np.arange(b, dtype=np.int64) * n)[:, None]
        counts = np.bincount((idx + offsets).ravel(), minlength=b * n).reshape(b, n)
        out[:, done:done + b] = (counts @ data.T).T / n
        done += b
    return out


def percentile_ci(samples: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    alpha = (1 - confidence) / 2
    return (np.quantile(samples, alpha, axis=-1), np.quantile(samples, 1 - alpha, axis=-1))


def bootstrap_ci(values: np.ndarray, resamples: int = 10_000, seed: int = 0,
                 confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI of the mean, per row. Paired deltas: pass candidate − baseline."""
    return percentile_ci(bootstrap_means(values, resamples, seed), confidence)


def randomization_p(deltas: np.ndarray, resamples: int = 10_000, seed: int = 0) -> np.ndarray:
    """Two-sided paired randomization (sign-flip) test of mean delta = 0, per row.

    p = (1 + #{|mean(s·d)| ≥ |mean(d)|}) / (1 + resamples): the +1 counts the observed
    labelling, so p is never 0.
    """
    data = _as_matrix(deltas)
    m, n = data.shape
    observed = np.abs(data.mean(axis=1))
    rng = np.random.default_rng(seed)
    extreme = np.zeros(m, dtype=np.int64)
    done = 0
    tol = 1e-12 * np.maximum(1.0, observed)
    while done < resamples:
        b = min(BLOCK * 4, resamples - done)
        signs = rng.integers(0, 2, size=(b, n), dtype=np.int8).astype(np.float64) * 2 - 1
        means = np.abs(signs @ data.T) / n  # b × m
        extreme += (means >= observed - tol).sum(axis=0)
        done += b
    return (1 + extreme) / (1 + resamples)


def holm(pvalues: np.ndarray) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values (monotone, capped at 1)."""
    p = np.asarray(pvalues, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    k = p.size
    adjusted = np.empty(k)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * p[i]))
        adjusted[i] = running
    return adjusted
