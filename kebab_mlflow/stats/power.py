"""Power of the paired sign-flip test: the minimum detectable effect and the queries it takes.

The model, for ``n`` paired queries at two-sided level ``alpha``:

- **Noise**: the paired deltas already there (sd ``s``), signs exchangeable — what the sign-flip
  test assumes under the null. Their mean has sd ``s/√n``.
- **Loss**: a true drop ``D`` in the mean over *these* queries, made of per-query losses of
  typical size ``m`` (``loss_size``: ``Σℓ²/Σℓ`` over the per-query losses ``ℓ``, the
  loss-weighted mean loss). It moves the mean by ``D`` and adds ``D·m`` to the deltas' second
  moment: ``m → 0`` is a drop spread thinly over every query, ``m = 1`` on a 0–1 metric is
  whole queries going from a hit to a miss.
- **Test**: the sign-flip test conditions on the deltas' magnitudes; its critical mean is
  ``z₁₋α/₂ · √(Σd²)/n ≈ z₁₋α/₂ · √((s² + D·m)/n)`` (normal approximation of the randomization
  distribution, whose variance is known given the magnitudes: a z, not a t, quantile).

So ``D`` is detected with probability ``power`` when
``D = z₁₋α/₂ · √((s² + D·m)/n) + z_power · s/√n``, a quadratic in ``D`` solved in closed form.
With ``m = 0`` it is the textbook ``(z₁₋α/₂ + z_power) · s/√n``, a lower bound: a drop
concentrated on fewer queries widens the test's null distribution and takes more to detect.
``bench/bench_gate.py`` measures this against the drop a simulation detects 80% of the time on
SciFact, for a drop of a fixed total.

**A loss on a random subset of queries** (each query hit or not by chance: the realistic case,
``bench/bench_mde_shapes.py``) also varies in total from one draw to the next, and the test's
critical value ``√(Σd²)`` grows with the same losses that move ``Σd``: :func:`mde_subset`
models both (the delta method on ``(Σd, Σd²)``) for a given distribution of per-query losses.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike

POWER = 0.8


def _quantiles(alpha: float, power: float) -> tuple[float, float]:
    normal = NormalDist()
    return normal.inv_cdf(1 - alpha / 2), normal.inv_cdf(power)


def delta_sd(values: ArrayLike) -> float | None:
    """Sample standard deviation (ddof 1) of paired deltas or per-query scores; None for n < 2."""
    v = np.asarray(values, dtype=np.float64)
    return float(v.std(ddof=1)) if v.size >= 2 else None


def loss_size(losses: ArrayLike) -> float | None:
    """The typical size ``m = Σℓ²/Σ|ℓ|`` of per-query losses (or changes) ``ℓ``: a mean drop
    ``D`` made of losses like these adds ``D·m`` to the paired deltas' second moment. None
    when every value is 0 (nothing to lose, or nothing changed)."""
    v = np.abs(np.asarray(losses, dtype=np.float64)).ravel()
    total = float(v.sum())
    return float(np.dot(v, v) / total) if total > 0 else None


def mde(sd: float | None, n: int, alpha: float = 0.05, power: float = POWER, *,
        loss: float) -> float | None:
    """The smallest true mean drop over ``n`` paired queries detected with ``power``, when the
    noise has sd ``sd`` and the drop is made of per-query losses of size ``loss``
    (:func:`loss_size`; 0: spread over all queries)."""
    if sd is None or n < 2:
        return None
    za, zp = _quantiles(alpha, power)
    c = zp * sd / math.sqrt(n)
    b = 2 * c + za * za * loss / n
    constant = c * c - za * za * sd * sd / n
    return (b + math.sqrt(b * b - 4 * constant)) / 2  # the root with D ≥ c


def subset_power(drop: float, noise2: float, n: int, moments: tuple[float, float, float, float],
                 alpha: float = 0.05) -> float:
    """The sign-flip test's power against an expected mean drop ``drop`` falling on a random
    subset of ``n`` queries: each query, with probability ``π = drop / E[L]``, loses ``L``
    (``moments``: ``E[L], E[L²], E[L³], E[L⁴]``), on top of exchangeable noise with mean square
    ``noise2``. The test rejects when ``T = Σd / √(Σd²) ≤ −z₁₋α/₂``; ``T``'s mean and variance
    come from the delta method on ``(Σd, Σd²)``, whose moments are exact under the model —
    so the randomness of how many queries lose, and that ``Σd²`` (the critical value) grows
    with the very losses that move ``Σd``, are both accounted for."""
    l1, l2, l3, l4 = moments
    share = min(1.0, drop / l1)
    var_h = share * (1 - share)
    mu1, mu2 = -n * drop, n * (noise2 + share * l2)
    var1 = n * (noise2 + var_h * l2)
    var2 = n * (4 * noise2 * share * l2 + var_h * l4)
    cov = -n * (2 * noise2 * share * l1 + var_h * l3)
    mean_t = mu1 / math.sqrt(mu2)
    var_t = (var1 - mu1 / mu2 * cov + mu1 * mu1 / (4 * mu2 * mu2) * var2) / mu2
    za = NormalDist().inv_cdf(1 - alpha / 2)
    return NormalDist().cdf((-za - mean_t) / math.sqrt(max(var_t, 1e-300)))


def mde_subset(deltas: ArrayLike, losses: ArrayLike, alpha: float = 0.05,
               power: float = POWER) -> float | None:
    """The smallest expected mean drop over these paired queries that the sign-flip test
    detects with ``power`` when it falls on a random subset of them, each query hit losing
    a loss drawn like ``losses`` (:func:`subset_power`); ``deltas`` are the noise. None for
    fewer than 2 queries, no possible loss, or a drop not detectable even if every query lost."""
    d = np.asarray(deltas, dtype=np.float64).ravel()
    loss = np.abs(np.asarray(losses, dtype=np.float64).ravel())
    loss = loss[loss > 0]
    if d.size < 2 or loss.size == 0:
        return None
    moments = (float(loss.mean()), float(np.mean(loss**2)), float(np.mean(loss**3)),
               float(np.mean(loss**4)))
    noise2 = float(np.mean(d * d))
    if subset_power(moments[0], noise2, d.size, moments, alpha) < power:
        return None
    low, high = 0.0, moments[0]
    for _ in range(60):  # power rises with the drop: bisection
        mid = (low + high) / 2
        low, high = (mid, high) if subset_power(mid, noise2, d.size, moments, alpha) < power \
            else (low, mid)
    return high


def queries_needed(sd: float, delta: float, alpha: float = 0.05, power: float = POWER, *,
                   loss: float) -> int:
    """How many paired queries detect a true mean drop of ``delta`` with ``power`` (same model
    as :func:`mde`)."""
    if delta <= 0:
        raise ValueError("delta must be > 0")
    za, zp = _quantiles(alpha, power)
    root_n = (za * math.sqrt(sd * sd + delta * loss) + zp * sd) / delta
    return max(2, math.ceil(root_n * root_n))
