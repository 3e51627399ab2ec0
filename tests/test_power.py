"""The MDE model (stats/power.py, comparison/sizing.py): hand-computed cases, the defining
equation solved independently, and a simulation of the sign-flip test it predicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as sp

from kebab_mlflow.comparison.records import RunSide
from kebab_mlflow.comparison.sizing import power_report
from kebab_mlflow.evaluation.per_query import PerQueryRow
from kebab_mlflow.stats.power import loss_size, mde, queries_needed
from kebab_mlflow.stats.resampling import randomization_p

ZA, ZP = sp.norm.ppf(0.975), sp.norm.ppf(0.8)


def solve_mde(sd: float, n: int, m: float, za: float = ZA, zp: float = ZP) -> float:
    """The defining equation D = za·√((sd² + D·m)/n) + zp·sd/√n, by root finding."""
    return optimize.brentq(
        lambda d: d - za * math.sqrt((sd * sd + d * m) / n) - zp * sd / math.sqrt(n), 1e-12, 10)


def test_loss_size_is_the_loss_weighted_mean_loss():
    # |ℓ| = 0.5, 0.5, 1, 0: Σℓ² = 1.5, Σ|ℓ| = 2
    assert loss_size([0.5, -0.5, 1.0, 0.0]) == pytest.approx(0.75, rel=1e-12)
    assert loss_size([1.0, 0.0, 1.0]) == 1.0  # hit → miss losses: size 1
    assert loss_size([0.0, 0.0]) is None


def test_mde_without_loss_variance_is_the_textbook_formula():
    # (1.959964 + 0.841621) · 0.1 / √100
    assert mde(0.1, 100, loss=0.0) == pytest.approx(0.0280159, abs=1e-7)
    assert mde(None, 100, loss=0.5) is None and mde(0.1, 1, loss=0.5) is None


def test_mde_solves_the_power_equation_with_the_variance_a_loss_adds():
    # by hand: c = zp·0.01 = 0.0084162, b = 2c + za²·0.5/100 = 0.0360397,
    # C = c² − za²·0.01/100 = −0.00031331, D = (b + √(b² − 4C)) / 2 = 0.043279
    assert mde(0.1, 100, loss=0.5) == pytest.approx(0.043279, abs=2e-6)
    for sd, n, m, alpha in [(0.1, 300, 0.34, 0.05), (0.39, 150, 0.9, 0.05), (0.2, 40, 1.0, 0.01),
                            (0.0, 50, 1.0, 0.05)]:
        za = sp.norm.ppf(1 - alpha / 2)
        assert mde(sd, n, alpha, loss=m) == pytest.approx(solve_mde(sd, n, m, za), rel=1e-9)
    # all deltas 0, loss of size m: D = za²·m/n (the normal approximation of "enough queries")
    assert mde(0.0, 50, loss=1.0) == pytest.approx(ZA**2 / 50, rel=1e-12)


def test_queries_needed_is_the_smallest_n_whose_mde_reaches_the_drop():
    for sd, m, delta in [(0.1, 0.34, 0.02), (0.39, 0.9, 0.05), (0.3, 0.0, 0.01)]:
        n = queries_needed(sd, delta, loss=m)
        assert mde(sd, n, loss=m) <= delta < mde(sd, n - 1, loss=m)
    with pytest.raises(ValueError):
        queries_needed(0.1, 0.0, loss=0.5)


def _power_of_the_sign_flip_test(noise, loss, drop, trials, seed, alpha=0.05):
    """Share of trials where the sign-flip test (exact or 2,000 flips) calls a loss: noise with
    random signs, plus a drop of `drop`·n made of whole per-query losses `loss`."""
    rng = np.random.default_rng(seed)
    n = noise.size
    rows = []
    for _ in range(trials):
        d = noise * rng.choice([-1.0, 1.0], n)
        hit = rng.permutation(n)[:round(drop * n / loss)]
        d[hit] -= loss
        rows.append(d)
    rows = np.array(rows)
    p = randomization_p(list(rows), 2_000, seed)
    return float(np.mean((p < alpha) & (rows.mean(axis=1) < 0)))


def test_the_mde_is_the_drop_the_sign_flip_test_detects_80_percent_of_the_time():
    """200 queries, noise of 40 queries changed by 0.1–0.4, losses of 0.5 on whole queries:
    at the printed MDE the test's simulated power is 0.8 (±3 binomial se over 400 trials),
    while the thinly-spread formula's MDE is detected far less often."""
    rng = np.random.default_rng(7)
    noise = np.zeros(200)
    noise[:40] = rng.uniform(0.1, 0.4, 40)
    loss = 0.5
    sd = float(np.sqrt(np.mean(noise**2)))  # the noise's sd under random signs
    d = mde(sd, 200, loss=loss)
    power = _power_of_the_sign_flip_test(noise, loss, d, 400, seed=3)
    assert abs(power - 0.8) < 3 * math.sqrt(0.8 * 0.2 / 400), power
    thin = _power_of_the_sign_flip_test(noise, loss, mde(sd, 200, loss=0.0), 400, seed=3)
    assert thin < 0.7, thin


def _side(values, metric="ndcg_at_10_doc") -> RunSide:
    rows = [PerQueryRow(id=f"q{i}", query=None, hits=[], answer=None, scores={metric: float(v)},
                        latency_ms=1.0, error=None, first_relevant_rank={"doc": 1})
            for i, v in enumerate(values)]
    return RunSide(run_id="r" * 32, name="run", status="exp", params={}, tags={}, rows=rows,
                   per_query_sha256={})


def test_power_of_one_run_models_a_loss_as_whole_queries_losing_their_score():
    values = np.array([1.0, 0.5, 0.0, 0.5, 1.0, 0.25])
    r = power_report(_side(values), "ndcg_at_10_doc")
    # E[s²]/E[s] = (1 + .25 + 0 + .25 + 1 + .0625) / (1 + .5 + 0 + .5 + 1 + .25) = 2.5625/3.25
    assert r.loss_size == pytest.approx(2.5625 / 3.25, rel=1e-12)
    assert r.sd == pytest.approx(values.std(ddof=1), rel=1e-12) and not r.paired
    assert r.mde == pytest.approx(solve_mde(r.sd, 6, r.loss_size), rel=1e-9)
    assert power_report(_side(values), "ndcg_at_10_doc") == r  # same inputs, same numbers


def test_power_of_a_lower_is_better_rate_loses_towards_1():
    values = np.array([0.0, 0.0, 1.0, 0.0])  # error_rate per query: a loss is 0 → 1
    r = power_report(_side(values, "error_rate"), "error_rate")
    assert r.loss_size == 1.0


def test_power_with_a_second_run_uses_the_paired_changes():
    base = np.array([1.0, 0.5, 0.0, 0.5, 1.0, 0.25])
    cand = np.array([1.0, 0.25, 0.5, 0.5, 0.0, 0.25])  # changes −0.25, +0.5, −1
    r = power_report(_side(base), "ndcg_at_10_doc", paired_with=_side(cand))
    assert r.paired and r.loss_size == pytest.approx((0.0625 + 0.25 + 1) / 1.75, rel=1e-12)
    assert r.sd == pytest.approx((cand - base).std(ddof=1), rel=1e-12)


# --------------------------------------------------------------------------- a loss at random


def test_mde_subset_without_losses_variance_is_the_textbook_formula():
    """A loss thin enough (tiny per-query losses) adds nothing: (za + zp)·√(E[d²]/n)."""
    from kebab_mlflow.stats.power import mde_subset

    noise = np.array([0.1, -0.1] * 50)  # E[d²] = 0.01, n = 100
    d = mde_subset(noise, np.full(100, 1e-9))
    assert d is None  # a loss of 1e-9 per query cannot reach a detectable drop
    tiny = mde_subset(noise, np.full(100, 1e-3))  # every query losing 1e-3 is still < MDE
    assert tiny is None
    small = mde_subset(noise, np.full(100, 0.2))
    assert small > (ZA + ZP) * 0.01  # the loss's own variance widens both distributions


def _subset_power_by_hand(drop, noise2, n, loss):
    """Σ_k P(K = k)·P(reject | k hit), K ~ Binomial(n, π): given k queries losing one constant
    loss L, the delta method on (S1, S2) = (Σd, Σd²) for d = ε·|noise| − L on the k hit,
    written out from the definitions (not from the module)."""
    pi = drop / loss
    total = 0.0
    for k in range(n + 1):
        e1, e2 = -k * loss, n * noise2 + k * loss**2
        v1 = n * noise2  # only the noise's signs vary given k
        v2 = 4 * noise2 * k * loss**2  # Var(Σ −2·ε·|noise|·L) over the k hit
        c12 = -2 * noise2 * k * loss
        # T = S1/√S2 ≈ e1/√e2 + (S1 − e1)/√e2 − e1·(S2 − e2)/(2·e2^1.5)
        g1, g2 = 1 / math.sqrt(e2), -e1 / (2 * e2**1.5)
        var_t = g1 * g1 * v1 + 2 * g1 * g2 * c12 + g2 * g2 * v2
        given_k = sp.norm.cdf((-ZA - e1 / math.sqrt(e2)) / math.sqrt(var_t))
        total += sp.binom.pmf(k, n, pi) * given_k
    return total


def test_mde_subset_solves_the_delta_method_power_equation():
    from kebab_mlflow.stats.power import mde_subset

    rng = np.random.default_rng(11)
    noise = np.zeros(200)
    noise[:40] = rng.uniform(0.1, 0.4, 40)
    noise2 = float(np.mean(noise**2))
    expected = optimize.brentq(lambda x: _subset_power_by_hand(x, noise2, 200, 0.5) - 0.8,
                               1e-6, 0.5)
    assert mde_subset(noise, np.full(200, 0.5)) == pytest.approx(expected, rel=1e-9)


def _power_at_random(noise, loss, drop, trials, seed, alpha=0.05):
    """Share of trials the sign-flip test (2,000 flips) calls a loss: noise with random signs,
    each query hit with probability drop / loss, losing `loss`."""
    rng = np.random.default_rng(seed)
    n = noise.size
    rows = noise * rng.choice([-1.0, 1.0], (trials, n))
    rows -= loss * (rng.random((trials, n)) < drop / loss)
    p = randomization_p(list(rows), 2_000, seed)
    return float(np.mean((p < alpha) & (rows.mean(axis=1) < 0)))


def test_the_subset_mde_is_the_drop_a_random_loss_is_detected_at_80_percent():
    """200 queries, whole-query losses of 0.8 falling at random: at mde_subset's drop the
    simulated power is 0.8 (±3 binomial se over 400 trials); the fixed-total model (mde)
    says a smaller drop, detected less often."""
    from kebab_mlflow.stats.power import mde_subset

    rng = np.random.default_rng(7)
    noise = np.zeros(200)
    noise[:40] = rng.uniform(0.1, 0.4, 40)
    d = mde_subset(noise, np.full(200, 0.8))
    power = _power_at_random(noise, 0.8, d, 400, seed=3)
    assert abs(power - 0.8) < 3 * math.sqrt(0.8 * 0.2 / 400), power
    fixed = mde(float(np.sqrt(np.mean(noise**2))), 200, loss=0.8)
    assert fixed < d and _power_at_random(noise, 0.8, fixed, 400, seed=3) < 0.75


# ------------------------------------------------------------------- few deltas: the lattice


def test_few_equal_losses_need_the_exact_tests_count_not_the_normal_one():
    """No noise, 20 queries, whole-query losses of 1 (a 0–1 metric): k queries losing gives
    |T| = √k, which the normal approximation calls significant from k = 4, but the exact
    sign-flip p is 2·2^-k, below 0.05 only from k = 6. The MDE is then exactly the π with
    P(Binomial(20, π) ≥ 6) = 0.8."""
    from kebab_mlflow.stats.power import mde_subset

    by_hand = optimize.brentq(lambda pi: sp.binom.sf(5, 20, pi) - 0.8, 1e-6, 1 - 1e-6)
    normal_only = optimize.brentq(lambda pi: sp.binom.sf(3, 20, pi) - 0.8, 1e-6, 1 - 1e-6)
    got = mde_subset(np.zeros(20), np.ones(20))
    assert got == pytest.approx(by_hand, rel=1e-9)
    assert normal_only < 0.8 * got  # what the uncorrected figure would have said


def test_the_corrected_mde_is_the_drop_the_exact_test_detects_80_percent_of_the_time():
    """60 queries, 4 noise deltas of ±0.3, whole-query losses of 1 at random: at mde_subset's
    drop the simulated power of the exact sign-flip test (every row here is enumerable) is 0.8
    within 3 binomial se over 2,000 seeded trials."""
    from kebab_mlflow.stats.power import mde_subset

    noise = np.zeros(60)
    noise[:4] = 0.3
    d = mde_subset(noise, np.ones(60))
    power = _power_at_random(noise, 1.0, d, 2_000, seed=5)
    assert abs(power - 0.8) < 3 * math.sqrt(0.8 * 0.2 / 2_000), power


def test_the_discreteness_draws_come_in_blocks_with_the_same_answer(monkeypatch):
    """The hand-computed case above with the 200 draws taken 3 at a time (67 blocks of one
    generator): without noise every draw's threshold is the same, so the MDE must not move."""
    from kebab_mlflow.stats import power

    by_hand = optimize.brentq(lambda pi: sp.binom.sf(5, 20, pi) - 0.8, 1e-6, 1 - 1e-6)
    monkeypatch.setattr(power, "DRAW_BLOCK_ELEMENTS", 20 * 3)
    assert power.mde_subset(np.zeros(20), np.ones(20)) == pytest.approx(by_hand, rel=1e-9)


def test_two_identical_runs_of_many_queries_keep_the_draw_arrays_small():
    """100,000 queries, every delta 0 (two identical runs: one sign state, so the exact
    correction runs): all 200 draws at once would be 160 MB an array; in blocks the traced
    peak stays under 128 MB (one block: ~1.5 GB), and the same seed gives the same MDE."""
    import tracemalloc

    from kebab_mlflow.stats.power import mde_subset

    losses = np.random.default_rng(11).random(100_000)
    tracemalloc.start()
    try:
        first = mde_subset(np.zeros(100_000), losses)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 128 * 2**20, peak
    assert first is not None and mde_subset(np.zeros(100_000), losses) == first



def test_the_compare_path_computes_the_mde_without_importing_scipy_stats():
    """scipy.stats cost compare ~0.4 s of start-up (issue 32); the normal CDF comes from
    scipy.special's ndtr (test_mde_subset_solves_the_delta_method_power_equation checks the
    result against scipy.stats.norm)."""
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "from kebab_mlflow.stats.power import mde_subset\n"
            "rng = np.random.default_rng(3)\n"
            "assert mde_subset(rng.normal(0, 0.1, 400), rng.uniform(0, 1, 400)) > 0\n"
            "print('scipy.stats' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
