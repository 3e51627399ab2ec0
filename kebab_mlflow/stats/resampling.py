"""Statistics over per-query scores: seeded, vectorised bootstrap and randomization tests.

Every function takes an explicit ``seed``; the same inputs and seed give the same numbers.

Two exact shortcuts make 10,000 resamples of 10,000 queries cheap (same distributions as the
textbook procedures, fewer random draws):

* **Bootstrap of a mean.** A resample's mean depends only on how often each *distinct* value
  is drawn, and those counts are ``Multinomial(n, counts / n)``. Retrieval deltas take few
  distinct values (hit: −1/0/1; mrr: differences of 1/r), so one multinomial draw over ``u``
  values replaces ``n`` index draws. Rows with many distinct values (``32·u > n``) draw
  indices instead (shared by rows of the same length) and gather.
* **Sign-flip randomization.** Flipping the signs of the deltas that share an absolute value
  ``a`` (``c`` of them) adds ``a·(2·Binomial(c, ½) − c)`` to the sum, so one binomial per
  distinct ``|d|`` replaces ``c`` coin flips. Rows with many distinct ``|d|`` take their signs
  from raw random bytes (8 signs per byte) and one float32 matrix product per block.

Conventions: percentile intervals use numpy's linear interpolation (as
``scipy.stats.bootstrap(method='percentile')``); the randomization p-value is two-sided,
``p = (1 + #{|Σ s·d| ≥ |Σ d|}) / (1 + resamples)`` — the observed labelling is counted, so p is
never 0; sums within a relative 1e-9 (1e-5 in the float32 path) of the observed one count as
ties, i.e. as extreme (floating-point rounding must not hide the exact ties of discrete
deltas).

**Exact p for few discordant values.** When the enumeration of the sign-flip distribution is
small — ``∏ (c_a + 1) ≤ EXACT_STATES`` over the distinct non-zero ``|d| = a`` with ``c_a`` of
each, e.g. a hit metric's ±1 deltas, or a change that touched a handful of queries — the
p-value is computed exactly, ``P(|Σ a·(2·H_a − c_a)| ≥ |Σ d|)`` with independent
``H_a ~ Binomial(c_a, ½)``, instead of by resampling: no Monte-Carlo error and no ``+1``
(``k`` concordant flips give exactly ``2^(1−k)``).

A row of ``n`` values draws from the streams ``SeedSequence(seed, spawn_key=(n, purpose,
slice))``: its numbers depend on its values and the seed only, never on its position
or on the other rows of the call (``compare --gate`` in another order gives the same p-values);
rows of one length share their draws, as a paired design would. The wide-data paths split the
resamples into ``CHUNKS`` fixed slices run in threads — the result does not depend on the
thread count.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import ArrayLike

T = TypeVar("T")

BLOCK = 256  # resamples per block at most (fewer for long rows: see _rows_per_block)
# Cells (resamples × queries) per block: the index/sign matrices of a block stay a few MB at any
# n, so the work grows linearly with the queries (a fixed BLOCK rows of 400,000 queries was
# 800 MB of indices a block: page faults and cache misses made 4x the queries cost 7x the time).
BLOCK_CELLS = 1 << 19
CHUNKS = 4  # fixed slices of the resamples, each with its own stream (see _in_chunks)
# Above this many distinct values per query the per-value shortcuts cost more than direct draws
# (a binomial draw costs ~50-70 ns, an index draw + gather ~2 ns per query).
_MULTINOMIAL_RATIO = 32
_BINOMIAL_RATIO = 100
# Exact enumeration up to this many (sum, probability) states (∏ (c_a + 1) over distinct |d|).
EXACT_STATES = 1 << 16


@dataclass(frozen=True, kw_only=True)
class PairedTest:
    """Paired comparison of one metric: ``mean`` of candidate − baseline over ``n`` queries.

    ``ci_low``/``ci_high``: percentile bootstrap interval; ``p_value``: two-sided sign-flip
    randomization test (``p_exact``: by enumeration). All ``None`` when ``n == 0``.
    """

    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_exact: bool = False


def _stream(seed: int, n: int, purpose: int, chunk: int = 0) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(n, purpose, chunk)))


def _in_chunks(work: Callable[[int, int, int], T], resamples: int) -> list[T]:
    """Run ``work(c, start, stop)`` over CHUNKS fixed slices of the resamples, in threads.

    Each slice has its own random stream, so the numbers do not depend on how many threads
    ran them; numpy releases the GIL in the draws, gathers and products.
    """
    bounds = np.linspace(0, resamples, CHUNKS + 1).astype(int)
    jobs = [(c, int(bounds[c]), int(bounds[c + 1])) for c in range(CHUNKS)]
    workers = min(CHUNKS, os.cpu_count() or 1)
    if workers == 1 or resamples < CHUNKS * BLOCK:
        return [work(*job) for job in jobs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: work(*job), jobs))


def _rows_per_block(n: int, most: int, multiple: int = 1) -> int:
    """Resamples per block for rows of ``n`` queries: at most ``most``, about BLOCK_CELLS
    cells, a multiple of ``multiple`` (at least one multiple). The draws are sequential in the
    stream, so how they are split into blocks does not change the numbers."""
    rows = max(1, min(most, BLOCK_CELLS // max(n, 1)))
    return max(multiple, rows - rows % multiple)


def _rows(values: np.ndarray | Sequence[ArrayLike]) -> list[np.ndarray]:
    if isinstance(values, np.ndarray):
        m = np.asarray(values, dtype=np.float64)
        rows = [m] if m.ndim == 1 else list(m)
    else:
        rows = [np.asarray(v, dtype=np.float64).ravel() for v in values]
    for r in rows:
        if not np.all(np.isfinite(r)):
            raise ValueError("statistics need finite values; drop the null scores first")
    return rows


# ---------------------------------------------------------------------------------------------
# bootstrap


def bootstrap_mean_samples(values: np.ndarray | Sequence[ArrayLike], resamples: int = 10_000,
                           seed: int = 0) -> list[np.ndarray]:
    """For each row: ``resamples`` means of bootstrap resamples (with replacement, size n)."""
    rows = _rows(values)
    out: list[np.ndarray] = [np.empty(0)] * len(rows)
    direct: dict[int, list[int]] = {}  # n -> rows that draw indices (sharing the draws)
    for i, row in enumerate(rows):
        n = row.size
        if n == 0:
            continue
        uniq, counts = np.unique(row, return_counts=True)
        if uniq.size * _MULTINOMIAL_RATIO <= n or uniq.size == 1:
            draws = _stream(seed, n, 0).multinomial(n, counts / n, size=resamples)
            out[i] = (draws @ uniq) / n
        else:
            direct.setdefault(n, []).append(i)
    for n, members in direct.items():
        # float32 gathers and sums: half the memory traffic; their relative error (~1e-6) is
        # far below the Monte-Carlo error (~1/sqrt(resamples))
        data = [rows[i].astype(np.float32) for i in members]

        def chunk(c: int, start: int, stop: int, n: int = n,
                  data: list[np.ndarray] = data) -> np.ndarray:
            rng = _stream(seed, n, 0, c)
            means = np.empty((len(data), stop - start))
            step = _rows_per_block(n, BLOCK)
            for lo in range(0, stop - start, step):
                b = min(step, stop - start - lo)
                idx = rng.integers(0, n, size=(b, n), dtype=np.intp)  # take() wants intp
                for j, row in enumerate(data):
                    means[j, lo:lo + b] = row.take(idx).sum(axis=1) / n
            return means

        means = np.concatenate(_in_chunks(chunk, resamples), axis=1)
        for j, i in enumerate(members):
            out[i] = means[j]
    return out


def bootstrap_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """(rows × resamples) bootstrap means of a matrix's rows (queries in columns)."""
    return np.stack(bootstrap_mean_samples(np.asarray(values, dtype=np.float64), resamples, seed))


def percentile_ci(samples: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    alpha = (1 - confidence) / 2
    return (np.quantile(samples, alpha, axis=-1), np.quantile(samples, 1 - alpha, axis=-1))


def bootstrap_ci(values: np.ndarray, resamples: int = 10_000, seed: int = 0,
                 confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI of the mean, per row. Paired deltas: pass candidate − baseline."""
    return percentile_ci(bootstrap_means(values, resamples, seed), confidence)


# ---------------------------------------------------------------------------------------------
# randomization


def _signflip_sums_grouped(row: np.ndarray, resamples: int, rng: np.random.Generator
                           ) -> np.ndarray:
    mags, counts = np.unique(np.abs(row[row != 0]), return_counts=True)
    if mags.size == 0:
        return np.zeros(resamples)
    heads = rng.binomial(counts, 0.5, size=(resamples, mags.size))
    sums: np.ndarray = (2.0 * heads - counts) @ mags
    return sums


def exact_signflip_states(row: np.ndarray) -> int:
    """How many states enumerating the row's sign-flip distribution takes (∏ (c_a + 1))."""
    _, counts = np.unique(np.abs(row[row != 0]), return_counts=True)
    states = 1
    for c in counts:
        states *= int(c) + 1
        if states > EXACT_STATES:
            break
    return states


def exact_signflip_p(row: np.ndarray) -> float:
    """The exact two-sided sign-flip p of one row, by enumerating the sums of the distinct
    magnitudes' binomial counts (ties within a relative 1e-9 count as extreme)."""
    mags, counts = np.unique(np.abs(row[row != 0]), return_counts=True)
    sums, probs = np.zeros(1), np.ones(1)
    for a, c in zip(mags, counts, strict=True):
        c = int(c)
        heads = np.arange(c + 1)
        pmf = np.array([math.comb(c, h) / 2**c for h in range(c + 1)])
        sums = (sums[:, None] + a * (2.0 * heads - c)[None, :]).ravel()
        probs = (probs[:, None] * pmf[None, :]).ravel()
    tol = 1e-9 * max(1.0, float(np.abs(row).sum()))
    return min(1.0, float(probs[np.abs(sums) >= abs(row.sum()) - tol].sum()))


def randomization_p(deltas: np.ndarray | Sequence[ArrayLike], resamples: int = 10_000,
                    seed: int = 0) -> np.ndarray:
    """Two-sided paired randomization (sign-flip) test of mean delta = 0, per row.

    Exact (:func:`exact_signflip_p`) when the enumeration is small, else
    p = (1 + #{|Σ s·d| ≥ |Σ d|}) / (1 + resamples). An empty row gives NaN.
    """
    rows = _rows(deltas)
    p = np.full(len(rows), np.nan)
    direct: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        n = row.size
        if n == 0:
            continue
        if exact_signflip_states(row) <= EXACT_STATES:
            p[i] = exact_signflip_p(row)
            continue
        distinct = np.unique(np.abs(row[row != 0])).size
        if distinct * _BINOMIAL_RATIO <= n or distinct <= 1:
            sums = _signflip_sums_grouped(row, resamples, _stream(seed, n, 1))
            observed = abs(row.sum())
            tol = 1e-9 * max(1.0, float(np.abs(row).sum()))
            p[i] = (1 + np.count_nonzero(np.abs(sums) >= observed - tol)) / (1 + resamples)
        else:
            direct.setdefault(n, []).append(i)
    for n, members in direct.items():
        data = np.stack([rows[i] for i in members])  # m × n
        totals = data.sum(axis=1)
        observed = np.abs(totals)
        # float32 products: allow for their rounding; a near-tie counts as extreme (conservative)
        tol = 1e-5 * np.abs(data).sum(axis=1)
        data32 = np.ascontiguousarray(data.T, dtype=np.float32)  # n × m

        def chunk(c: int, start: int, stop: int, n: int = n, data32: np.ndarray = data32,
                  totals: np.ndarray = totals, observed: np.ndarray = observed,
                  tol: np.ndarray = tol) -> np.ndarray:
            rng = _stream(seed, n, 1, c)
            extreme = np.zeros(data32.shape[1], dtype=np.int64)
            # a multiple of 4 rows: every block but the last takes whole 4-byte words of the
            # stream (rng.bytes drops a word's unused bytes), so the signs match any blocking
            step = _rows_per_block(n, 4 * BLOCK, 4)
            for lo in range(0, stop - start, step):
                b = min(step, stop - start - lo)
                raw = np.frombuffer(rng.bytes(b * ((n + 7) // 8)), dtype=np.uint8)
                bits = np.unpackbits(raw.reshape(b, -1), axis=1, count=n)  # 1 keep, 0 flip
                # Σ s·d with s = 2·bit − 1  ==  2·(bits @ d) − Σ d
                sums = 2.0 * (bits.astype(np.float32) @ data32) - totals
                extreme += np.count_nonzero(np.abs(sums) >= observed - tol, axis=0)
            return extreme

        extreme = np.sum(_in_chunks(chunk, resamples), axis=0)
        for j, i in enumerate(members):
            p[i] = (1 + extreme[j]) / (1 + resamples)
    return p


# ---------------------------------------------------------------------------------------------
# both, and the multiple-comparison correction


def paired_tests(deltas: Sequence[np.ndarray], resamples: int = 10_000, seed: int = 0,
                 confidence: float = 0.95) -> list[PairedTest]:
    """Mean, bootstrap CI and randomization p for each row of (possibly ragged) deltas."""
    rows = _rows(deltas)
    samples = bootstrap_mean_samples(rows, resamples, seed)
    pvalues = randomization_p(rows, resamples, seed)
    alpha = (1 - confidence) / 2
    out = []
    for row, boot, p in zip(rows, samples, pvalues, strict=True):
        if row.size == 0:
            out.append(PairedTest(n=0, mean=None, ci_low=None, ci_high=None, p_value=None))
            continue
        lo, hi = np.quantile(boot, [alpha, 1 - alpha])
        out.append(PairedTest(n=int(row.size), mean=float(row.mean()), ci_low=float(lo),
                              ci_high=float(hi), p_value=float(p),
                              p_exact=exact_signflip_states(row) <= EXACT_STATES))
    return out


def one_sided_p(p_two_sided: float, toward: bool, exact: bool, resamples: int) -> float:
    """The one-sided sign-flip p for the alternative "the mean moved this way", from the
    two-sided p of the same deltas; ``toward``: the observed mean lies in that direction.

    The sign-flip distribution of Σ s·d is symmetric, so for a non-zero observed sum
    ``P(S ≥ |Σd|) = P(|S| ≥ |Σd|) / 2``: exactly half the two-sided p when enumerated; by
    resampling, ``(1 + k/2) / (1 + R)`` with ``k`` the two-sided extreme count (the +1 kept
    for the one-sided count). A mean the other way gets the complement (never significant).
    """
    half = min(1.0, p_two_sided / 2 if exact else (p_two_sided + 1 / (1 + resamples)) / 2)
    return half if toward else max(half, 1.0 - half)


def holm(pvalues: np.ndarray) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values (monotone, capped at 1).

    ``p_adj[(i)] = max_{j ≤ i} min(1, (k − j + 1) · p[(j)])`` over the sorted p-values.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    k = p.size
    adjusted = np.empty(k)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * p[i]))
        adjusted[i] = running
    return adjusted
