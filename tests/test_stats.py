"""kebab_mlflow.stats: paired bootstrap, sign-flip randomization, Holm (issue 4).

Cross-checked against scipy.stats.bootstrap / permutation_test (independent implementations)
within Monte-Carlo tolerance, and against exact values computed by hand.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sp

from kebab_mlflow.stats import resampling as stats


def _mean_delta(x, y, axis=-1):
    return np.mean(x - y, axis=axis)


def _scipy_ci(delta: np.ndarray) -> tuple[float, float]:
    cand, base = delta, np.zeros_like(delta)
    res = sp.bootstrap((cand, base), _mean_delta, paired=True, vectorized=True,
                       n_resamples=20_000, method="percentile", random_state=7)
    return res.confidence_interval.low, res.confidence_interval.high


def _scipy_p(delta: np.ndarray) -> float:
    res = sp.permutation_test((delta, np.zeros_like(delta)), _mean_delta, vectorized=True,
                              permutation_type="samples", n_resamples=20_000,
                              alternative="two-sided", random_state=7)
    return float(res.pvalue)


RNG = np.random.default_rng(2024)
CASES = {
    # few distinct values: the multinomial / binomial shortcuts
    "hit deltas": RNG.choice([-1.0, 0.0, 1.0], p=[0.15, 0.65, 0.2], size=150),
    "mrr deltas": RNG.choice([0, 1, 1 / 2, 1 / 3, 1 / 5], size=300)
    - RNG.choice([0, 1, 1 / 2, 1 / 4], size=300),
    # continuous: the direct index draws and random-bit sign flips
    "continuous": RNG.normal(0.03, 0.25, size=400),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bootstrap_ci_agrees_with_scipy(name):
    delta = CASES[name]
    (t,) = stats.paired_tests([delta], resamples=20_000, seed=3)
    lo, hi = _scipy_ci(delta)
    # the bootstrap SE of the mean; two independent 2.5% quantiles differ by ~0.04 SE
    se = delta.std() / np.sqrt(delta.size)
    assert t.ci_low == pytest.approx(lo, abs=0.2 * se)
    assert t.ci_high == pytest.approx(hi, abs=0.2 * se)
    assert t.mean == pytest.approx(delta.mean(), abs=1e-12) and t.n == delta.size


@pytest.mark.parametrize("name", list(CASES))
def test_randomization_p_agrees_with_scipy(name):
    delta = CASES[name]
    (t,) = stats.paired_tests([delta], resamples=20_000, seed=3)
    expected = _scipy_p(delta)
    assert 0.001 < expected < 0.9, "pick data whose p is neither tiny nor 1"
    # MC sd of each estimate <= sqrt(.25/20000) = 0.0035
    assert t.p_value == pytest.approx(expected, abs=0.02)


def test_randomization_p_exact_small_case():
    """Five deltas of +1: exactly 2 of the 32 sign patterns reach |sum| = 5 → p = 1/16."""
    p = stats.randomization_p(np.ones(5), resamples=40_000, seed=1)[0]
    assert p == pytest.approx(2 / 32, abs=0.004)
    # and by enumeration for a mixed case: d = (3, 1, -1, 2)
    d = np.array([3.0, 1.0, -1.0, 2.0])
    sums = [abs(np.dot(s, d)) for s in itertools.product((-1, 1), repeat=4)]
    exact = np.mean([s >= abs(d.sum()) - 1e-12 for s in sums])
    assert stats.randomization_p(d, resamples=40_000, seed=1)[0] == pytest.approx(exact,
                                                                                abs=0.01)


def test_p_is_never_zero_and_identical_runs_give_p_one():
    # resampled (many distinct values): the +1 correction keeps p above 0
    wide = np.linspace(-1.0, -0.5, 300)
    assert stats.exact_signflip_states(wide) > stats.EXACT_STATES
    p = stats.randomization_p(wide, resamples=1000, seed=0)[0]
    assert p == pytest.approx(1 / 1001)
    # exact (one magnitude): 2 of the 2^200 sign patterns are as extreme
    assert stats.randomization_p(np.full(200, -1.0), resamples=1000, seed=0)[0] == 2.0**-199
    (t,) = stats.paired_tests([np.zeros(50)], resamples=1000, seed=0)
    assert (t.mean, t.ci_low, t.ci_high, t.p_value) == (0.0, 0.0, 0.0, 1.0)


@pytest.mark.parametrize("name", list(CASES))
def test_shortcuts_match_the_direct_procedures(name, monkeypatch):
    """The per-distinct-value shortcuts draw from the same distributions as index draws and
    coin flips: force each path and compare."""
    delta = CASES[name]
    fast = stats.paired_tests([delta], resamples=20_000, seed=11)[0]
    monkeypatch.setattr(stats, "_MULTINOMIAL_RATIO", 10**9)  # never the shortcut
    monkeypatch.setattr(stats, "_BINOMIAL_RATIO", 10**9)
    direct = stats.paired_tests([delta], resamples=20_000, seed=11)[0]
    se = delta.std() / np.sqrt(delta.size)
    assert fast.ci_low == pytest.approx(direct.ci_low, abs=0.2 * se)
    assert fast.ci_high == pytest.approx(direct.ci_high, abs=0.2 * se)
    assert fast.p_value == pytest.approx(direct.p_value, abs=0.02)


def test_same_seed_same_numbers_other_seed_other_numbers():
    rows = [CASES["continuous"], CASES["hit deltas"]]
    a = stats.paired_tests(rows, resamples=2000, seed=5)
    b = stats.paired_tests(rows, resamples=2000, seed=5)
    c = stats.paired_tests(rows, resamples=2000, seed=6)
    assert a == b
    assert a[0].ci_low != c[0].ci_low


def test_a_rows_numbers_do_not_depend_on_its_position_or_the_other_rows():
    # compare --gate a,b and --gate b,a must give each metric the same interval and p-value
    rng = np.random.default_rng(3)
    wide = [rng.normal(0.02, 0.3, size=400) for _ in range(3)]  # direct draws, shared
    rows = [CASES["hit deltas"], *wide, CASES["mrr deltas"]]
    together = stats.paired_tests(rows, resamples=2000, seed=5)
    for i, row in enumerate(rows):
        assert stats.paired_tests([row], resamples=2000, seed=5)[0] == together[i]
    reversed_ = stats.paired_tests(rows[::-1], resamples=2000, seed=5)
    assert reversed_[::-1] == together


def test_ragged_rows_empty_rows_and_nan():
    out = stats.paired_tests([np.array([]), np.array([1.0, -1.0, 0.5])], resamples=500)
    assert out[0] == stats.PairedTest(n=0, mean=None, ci_low=None, ci_high=None, p_value=None)
    assert out[1].n == 3 and out[1].mean == pytest.approx(0.5 / 3)
    with pytest.raises(ValueError, match="finite"):
        stats.paired_tests([np.array([1.0, np.nan])])


def test_bootstrap_ci_matrix_api_kept():
    m = np.stack([CASES["continuous"], CASES["continuous"] + 1.0])
    lo, hi = stats.bootstrap_ci(m, resamples=5000, seed=0)
    assert lo.shape == hi.shape == (2,)
    assert lo[1] - lo[0] == pytest.approx(1.0, abs=1e-5)  # same draws, shifted data
    assert (lo < m.mean(axis=1)).all() and (m.mean(axis=1) < hi).all()
    assert stats.bootstrap_means(m, 100, 0).shape == (2, 100)


def test_holm_hand_computed():
    # sorted: .005*4=.02, .01*3=.03, .03*2=.06, .04*1=.04 -> running max .06
    adjusted = stats.holm(np.array([0.01, 0.04, 0.03, 0.005]))
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm(np.array([0.5, 0.9])) == pytest.approx([1.0, 1.0])


def test_blocking_does_not_change_the_numbers(monkeypatch):
    """The wide paths split the resamples into blocks of ~BLOCK_CELLS cells (so memory stays
    flat in n); any split draws the same stream, so the same seed gives the same numbers."""
    rng = np.random.default_rng(11)
    rows = [rng.normal(0, 0.2, 2985), rng.normal(0.02, 0.2, 2985)]  # 374 sign bytes a row
    results = []
    for cells in (1 << 19, 2985 * 5, 1):  # 175 rows a block, 5 (4 for signs), 1 (4 for signs)
        monkeypatch.setattr(stats, "BLOCK_CELLS", cells)
        results.append((np.stack(stats.bootstrap_mean_samples(rows, 2000, seed=4)),
                        stats.randomization_p(rows, 2000, seed=4)))
    for boot, p in results[1:]:
        assert np.array_equal(boot, results[0][0])
        assert np.array_equal(p, results[0][1])
