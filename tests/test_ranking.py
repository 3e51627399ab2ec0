"""Leaderboards with ties (issue 31): the best contender, the rows not shown different from it
(paired sign-flip tests, Holm across rows) and seeded bootstrap rank intervals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kebab_mlflow.stats.ranking import rank_rows
from kebab_mlflow.stats.resampling import holm


def _exact_signflip_p(deltas: np.ndarray) -> float:
    """Two-sided sign-flip p by enumerating every sign vector (written here independently)."""
    observed = abs(deltas.sum())
    sums = [abs(np.dot(signs, deltas)) for signs in itertools.product((1, -1),
                                                                      repeat=deltas.size)]
    return float(np.mean(np.array(sums) >= observed - 1e-12))


def test_best_tied_and_worse_rows_with_holm_across_them():
    n = 12
    good = np.ones(n)
    almost = good.copy()
    almost[0] = 0.0  # one query worse: not significant
    bad = np.zeros(n)  # every query worse: significant
    ceiling = np.ones(n)
    scores = {"primary": good, "variant": almost, "floor": bad, "oracle": ceiling}
    ranks = rank_rows(scores, contenders=["primary", "variant"], resamples=2000, seed=3)
    assert ranks["primary"].best and ranks["primary"].tied_with_best
    assert ranks["primary"].p_vs_best is None
    # p against the best, exact for these small cases; Holm over the three other rows
    p = {name: _exact_signflip_p(scores[name] - good) for name in ("variant", "floor", "oracle")}
    assert p["oracle"] == 1.0 and p["variant"] == 1.0 and p["floor"] == pytest.approx(2 / 2**12)
    adjusted = dict(zip(p, holm(np.array(list(p.values()))), strict=True))
    for name in p:
        assert ranks[name].p_vs_best == pytest.approx(p[name])
        assert ranks[name].p_holm == pytest.approx(adjusted[name])
    assert ranks["variant"].tied_with_best and not ranks["floor"].tied_with_best
    assert ranks["oracle"].tied_with_best and not ranks["oracle"].best  # a ceiling never is
    assert [ranks[n].rank for n in scores] == [1, 3, 4, 1]  # 1 + rows strictly better


def test_rank_intervals_are_seeded_and_cover_the_point_rank():
    rng = np.random.default_rng(0)
    base = rng.random(200)
    scores = {"a": base, "b": base - 0.3, "c": base + rng.normal(0, 0.05, 200) - 0.001,
              "failed": None}
    first = rank_rows(scores, contenders=list(scores), resamples=500, seed=1)
    again = rank_rows(scores, contenders=list(scores), resamples=500, seed=1)
    assert first == again
    assert (first["b"].rank_low, first["b"].rank_high) == (3, 3)  # far below both others
    # a and c are within noise of each other: each spends resamples at ranks 1 and 2
    assert (first["a"].rank_low, first["a"].rank_high) == (1, 2)
    assert (first["c"].rank_low, first["c"].rank_high) == (1, 2)
    assert first["failed"].rank is None and not first["failed"].tied_with_best


def test_rank_interval_against_a_direct_loop():
    """The vectorised ranks equal a plain loop over the same resampled indices."""
    from kebab_mlflow.stats import ranking

    rng = np.random.default_rng(5)
    m = rng.random((3, 15))
    m[1, 3] = np.nan  # a query row 1 does not count
    intervals = ranking._rank_intervals(m, 300, 9, 0.9)
    draws = np.random.default_rng([9, 15, 7]).integers(0, 15, size=(300, 15))
    ranks = []
    for idx in draws:
        means = np.array([np.nanmean(row[idx]) for row in m])
        ranks.append([1 + int((means > means[i]).sum()) for i in range(3)])
    ranks = np.array(ranks).T
    expected = [(int(np.quantile(r, 0.05, method="lower")),
                 int(np.quantile(r, 0.95, method="higher"))) for r in ranks]
    assert intervals == expected
