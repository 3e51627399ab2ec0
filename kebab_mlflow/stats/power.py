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
models both for a given distribution of per-query losses — the number of queries hit summed
over exactly (Binomial), the test's power given that number by the delta method on
``(Σd, Σd²)`` (:func:`hit_power`), and, when the deltas are few enough to enumerate, the
exact test's discreteness (:func:`discreteness_correction`: a seeded Monte-Carlo difference
between the exact test and its normal approximation on common draws). Few non-zero deltas of
similar size (a 0–1 metric; a set scoring near 1, XQuAD at 100 queries) make the
randomization distribution a coarse lattice that the normal approximation calls significant
too early: without these two corrections the figure was 14% optimistic there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike

POWER = 0.8
DISCRETE_SEED = 0
DISCRETE_SAMPLES = 200
# rows whose exact sign-flip distribution has more states than this are near-continuous: the
# normal approximation holds for them (and enumerating them would cost more than compare has)
DISCRETE_STATES = 1 << 10
# values in each of the discreteness correction's draw arrays at a time (8 MB of float64)
DRAW_BLOCK_ELEMENTS = 1 << 20


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


def hit_power(noise2: float, n: int, moments: tuple[float, float, float, float],
              alpha: float = 0.05) -> np.ndarray:
    """The sign-flip test's power when exactly ``k`` of ``n`` queries lose (``k = 0..n``), each
    a loss ``L`` (``moments``: ``E[L], E[L²], E[L³], E[L⁴]``), on top of exchangeable noise
    with mean square ``noise2``. The test rejects when ``T = Σd / √(Σd²) ≤ −z₁₋α/₂``; ``T``'s
    mean and variance given ``k`` come from the delta method on ``(Σd, Σd²)``, whose moments
    are exact under the model — so that ``Σd²`` (the critical value) grows with the very
    losses that move ``Σd`` is accounted for."""
    l1, l2, l3, l4 = moments
    k = np.arange(n + 1, dtype=np.float64)
    mu1, mu2 = -k * l1, np.maximum(n * noise2 + k * l2, 1e-300)
    var1 = n * noise2 + k * (l2 - l1 * l1)
    var2 = k * (4 * noise2 * l2 + l4 - l2 * l2)
    cov = -k * (2 * noise2 * l1 + l3 - l1 * l2)
    ratio = mu1 / mu2
    mean_t = mu1 / np.sqrt(mu2)
    var_t = (var1 - ratio * cov + ratio * ratio / 4 * var2) / mu2
    za = NormalDist().inv_cdf(1 - alpha / 2)
    # scipy.special's ndtr is what scipy.stats.norm.cdf calls (the same bits), without
    # importing scipy.stats (~0.4 s of compare's start-up)
    from scipy.special import ndtr

    power: np.ndarray = ndtr((-za - mean_t) / np.sqrt(np.maximum(var_t, 1e-300)))
    return power


def hits_pmf(n: int, share: float) -> np.ndarray:
    """P(K = k), k = 0..n, for K ~ Binomial(n, share): how many queries a random loss hits."""
    k = np.arange(n + 1, dtype=np.float64)
    if share <= 0 or share >= 1:
        point: np.ndarray = (k == (n if share >= 1 else 0)).astype(np.float64)
        return point
    pmf: np.ndarray = np.exp(_log_binomial(n) + k * math.log(share)
                             + (n - k) * math.log1p(-share))
    return pmf


@lru_cache(maxsize=64)
def _log_binomial(n: int) -> np.ndarray:
    """log C(n, k), k = 0..n."""
    from scipy.special import gammaln

    k = np.arange(n + 1, dtype=np.float64)
    out: np.ndarray = gammaln(n + 1.0) - gammaln(k + 1) - gammaln(n - k + 1)
    return out


def subset_power(drop: float, noise2: float, n: int, moments: tuple[float, float, float, float],
                 alpha: float = 0.05) -> float:
    """The sign-flip test's power (normal approximation) against an expected mean drop
    ``drop`` falling on a random subset of ``n`` queries: each query, with probability
    ``π = drop / E[L]``, loses ``L``; the number hit is summed over exactly (Binomial(n, π))
    on :func:`hit_power`."""
    return float(np.dot(hits_pmf(n, drop / moments[0]), hit_power(noise2, n, moments, alpha)))


def mde_subset(deltas: ArrayLike, losses: ArrayLike, alpha: float = 0.05,
               power: float = POWER, *, seed: int = DISCRETE_SEED) -> float | None:
    """The smallest expected mean drop over these paired queries that the sign-flip test
    detects with ``power`` when it falls on a random subset of them, each query hit losing
    a loss drawn like ``losses`` (:func:`subset_power`, corrected for the test's
    discreteness: :func:`discreteness_correction`, seeded by ``seed``); ``deltas`` are the
    noise. None for fewer than 2 queries, no possible loss, or a drop not detectable even if
    every query lost."""
    d = np.asarray(deltas, dtype=np.float64).ravel()
    loss = np.abs(np.asarray(losses, dtype=np.float64).ravel())
    loss = loss[loss > 0]
    if d.size < 2 or loss.size == 0:
        return None
    moments = (float(loss.mean()), float(np.mean(loss**2)), float(np.mean(loss**3)),
               float(np.mean(loss**4)))
    given_k = (hit_power(float(np.mean(d * d)), d.size, moments, alpha)
               + discreteness_correction(d, loss, alpha, seed))

    def achieved(drop: float) -> float:
        return float(np.dot(hits_pmf(d.size, drop / moments[0]), given_k))

    if achieved(moments[0]) < power:
        return None
    low, high = 0.0, moments[0]
    for _ in range(50):  # power rises with the drop: bisection (to 2^-50 of E[L])
        mid = (low + high) / 2
        low, high = (mid, high) if achieved(mid) < power else (low, mid)
    return high


# ---------------------------------------------------------------------------------------------
# the sign-flip test's discreteness: few non-zero deltas


def discreteness_correction(deltas: np.ndarray, losses: np.ndarray, alpha: float,
                            seed: int = DISCRETE_SEED) -> np.ndarray:
    """What the sign-flip test's discreteness changes in :func:`hit_power`, for ``k = 0..n``
    queries hit: P(exact test rejects | k) − P(its normal approximation rejects | k), estimated
    on ``DISCRETE_SAMPLES`` seeded draws common to both terms (so the difference has little
    Monte-Carlo noise; it is exactly 0 where the two agree on every draw, as they do once the
    deltas are many and varied).

    Each draw signs the noise at random and lets queries lose, in a random order, losses drawn
    from ``losses``: with ``k`` hit, the draw's first ``k`` are. Its threshold is the ``k``
    from which the test rejects: from the normal approximation (``|Σd|/√Σd² ≥ z``, the mean
    negative), then moved to where the exact enumeration (what compare's gate computes for
    such rows) first rejects, when the row is small enough to enumerate
    (``DISCRETE_STATES``). With few non-zero deltas of similar size (a 0–1 metric, a set
    scoring near 1) the randomization distribution is a coarse lattice: e.g. 5 equal losses
    give ``|T| = √5 > 1.96``, yet ``p = 2/32 > 0.05``."""
    n = deltas.size
    if _states(deltas) > DISCRETE_STATES:  # so are the rows with hits (bar hits on noise)
        return np.zeros(n + 1)
    normal, exact = _thresholds(deltas, losses, alpha, seed)
    counts = (np.bincount(exact, minlength=n + 2) - np.bincount(normal, minlength=n + 2))
    correction: np.ndarray = np.cumsum(counts[:n + 1]) / normal.size
    return correction


def _thresholds(deltas: np.ndarray, losses: np.ndarray, alpha: float,
                seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per draw: the number of hit queries from which the normal approximation rejects, and
    from which the exact test does (``n + 1``: never). The draws come from one seeded
    generator a block at a time (``DRAW_BLOCK_ELEMENTS`` values an array): all
    ``DISCRETE_SAMPLES`` in one block up to 5,242 queries, fewer beyond, so two identical
    runs of 1,000,000 queries (every delta 0: few sign states) need 8 MB arrays, not 1.6 GB."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(deltas.size,)))
    n, samples = deltas.size, DISCRETE_SAMPLES
    block = max(1, min(samples, DRAW_BLOCK_ELEMENTS // max(n, 1)))
    parts = [_block_thresholds(deltas, losses, alpha, rng, min(block, samples - start))
             for start in range(0, samples, block)]
    return (np.concatenate([normal for normal, _ in parts]),
            np.concatenate([exact for _, exact in parts]))


def _block_thresholds(deltas: np.ndarray, losses: np.ndarray, alpha: float,
                      rng: np.random.Generator, samples: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_thresholds` of the next ``samples`` draws of ``rng``."""
    n = deltas.size
    noise = np.abs(deltas) * rng.choice([-1.0, 1.0], size=(samples, n))
    order = np.argsort(rng.random((samples, n)), axis=1)  # the order queries get hit in
    hit_loss = losses[rng.integers(0, losses.size, size=(samples, n))]
    before = np.take_along_axis(noise, order, axis=1)
    after = before - hit_loss
    # after k hits (k = 0..n): Σd and Σd²
    sums = noise.sum(axis=1, keepdims=True) - np.cumsum(hit_loss, axis=1)
    squares = (np.sum(noise * noise, axis=1, keepdims=True)
               + np.cumsum(after * after - before * before, axis=1))
    sums = np.concatenate([noise.sum(axis=1, keepdims=True), sums], axis=1)
    squares = np.concatenate([np.sum(noise * noise, axis=1, keepdims=True), squares], axis=1)
    za = NormalDist().inv_cdf(1 - alpha / 2)
    rejects = (sums < 0) & (sums * sums >= za * za * np.maximum(squares, 1e-300))
    normal = np.where(rejects.any(axis=1), rejects.argmax(axis=1), n + 1)
    exact = normal.copy()
    for r in range(samples):
        def row(k: int, r: int = r) -> np.ndarray:
            out: np.ndarray = noise[r].copy()
            out[order[r, :k]] = after[r, :k]
            return out

        exact[r] = _exact_threshold(row, int(normal[r]), n, alpha)
    return normal, exact


def _exact_threshold(row: Callable[[int], np.ndarray], start: int, n: int,
                     alpha: float) -> int:
    """From the normal approximation's threshold ``start``, the K from which the exact test
    rejects: down while it still rejects, else up until it does (the normal decision where a
    row is too large to enumerate)."""
    k = min(start, n)
    first = _exact_rejects(row(k), alpha)
    if first is None:
        return start
    if first:
        while k > 0 and _exact_rejects(row(k - 1), alpha):
            k -= 1
        return k
    while k < n:
        k += 1
        step = _exact_rejects(row(k), alpha)
        if step is None or step:
            return k
    return n + 1


@lru_cache(maxsize=512)
def _half_binomial(c: int) -> np.ndarray:
    return np.array([math.comb(c, h) for h in range(c + 1)], dtype=np.float64) / 2.0**c


def _states(d: np.ndarray) -> int:
    """How many states enumerating a row's sign-flip distribution takes: ∏ (c_a + 1) over its
    distinct non-zero magnitudes ``a`` seen ``c_a`` times."""
    _, counts = np.unique(np.abs(d[d != 0]), return_counts=True)
    return math.prod(int(c) + 1 for c in counts)


@lru_cache(maxsize=32)
def _sign_patterns(count: int) -> np.ndarray:
    """Every ± pattern of ``count`` signs (2^count × count)."""
    bits = (np.arange(1 << count)[:, None] >> np.arange(count)[None, :]) & 1
    signs: np.ndarray = 2.0 * bits - 1.0
    return signs


def _exact_rejects(d: np.ndarray, alpha: float) -> bool | None:
    """Whether the exact two-sided sign-flip test (the enumeration of
    :func:`~kebab_mlflow.stats.resampling.exact_signflip_p`) calls this row a loss at
    ``alpha``; None when it has more than ``DISCRETE_STATES`` states."""
    total = float(d.sum())
    if total >= 0:
        return False
    mags, counts = np.unique(np.abs(d[d != 0]), return_counts=True)
    if math.prod(int(c) + 1 for c in counts) > DISCRETE_STATES:
        return None
    single = counts == 1  # magnitudes seen once: every sign pattern at once
    sums = _sign_patterns(int(single.sum())) @ mags[single]
    probs = np.full(sums.size, 1.0 / sums.size)
    for a, c in zip(mags[~single].tolist(), counts[~single].tolist(), strict=True):
        sums = (sums[:, None] + a * (2.0 * np.arange(c + 1) - c)[None, :]).ravel()
        probs = (probs[:, None] * _half_binomial(c)[None, :]).ravel()
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))
    return float(probs[np.abs(sums) >= -total - tol].sum()) < alpha


def queries_needed(sd: float, delta: float, alpha: float = 0.05, power: float = POWER, *,
                   loss: float) -> int:
    """How many paired queries detect a true mean drop of ``delta`` with ``power`` (same model
    as :func:`mde`)."""
    if delta <= 0:
        raise ValueError("delta must be > 0")
    za, zp = _quantiles(alpha, power)
    root_n = (za * math.sqrt(sd * sd + delta * loss) + zp * sd) / delta
    return max(2, math.ceil(root_n * root_n))
