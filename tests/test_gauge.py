"""The distinguishing-power gauge: every signal state from synthetic per-query arrays, and the
gap / normalized arithmetic by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kebab_mlflow.stats.gauge import (
    ALIVE,
    DEAD,
    MISSING,
    NA,
    UNCERTAIN,
    GaugeMetric,
    RowStat,
    combine_states,
    floor_state,
    gauge_metric,
    normalized_gap,
    paired_gap_ci,
    row_stat,
    signal_state,
)

ONES = np.ones(40)
ZEROS = np.zeros(40)
HALF = np.array([1.0, 0.0] * 20)


def stat(values) -> RowStat:
    return row_stat(None if values is None else np.asarray(values, dtype=float), 1000, 7)


def test_row_stat_drops_nan_and_counts():
    s = stat([1.0, np.nan, 0.0, 1.0, np.nan, 1.0])
    assert s.mean == pytest.approx(0.75)
    assert s.n == 4
    assert 0.0 <= s.ci_low <= s.mean <= s.ci_high <= 1.0


def test_row_stat_constant_row_has_point_ci():
    s = stat([0.4] * 10)
    assert (s.mean, s.ci_low, s.ci_high, s.n) == pytest.approx((0.4, 0.4, 0.4, 10))


@pytest.mark.parametrize("values", [None, [], [np.nan, np.nan]])
def test_row_stat_missing(values):
    assert stat(values) == MISSING


def test_row_stat_single_query_has_no_ci():
    assert stat([0.3]) == RowStat(mean=0.3, ci_low=None, ci_high=None, n=1)


def test_row_stat_is_seeded():
    values = np.random.default_rng(0).random(50)
    assert row_stat(values, 500, 1) == row_stat(values, 500, 1)
    assert row_stat(values, 500, 1) != row_stat(values, 500, 2)


@pytest.mark.parametrize("primary, floors, expected", [
    # CIs far apart against both floors
    (ONES, {"a": ZEROS, "b": HALF * 0.2}, ALIVE),
    # 0.55 vs 0.50 on 20 binary queries: positive gap, CIs overlap
    ([1.0] * 11 + [0.0] * 9, {"a": [1.0] * 10 + [0.0] * 10}, UNCERTAIN),
    # a floor with one counted query has no CI: cannot be alive
    (ONES, {"a": [0.0]}, UNCERTAIN),
    # alive against one floor, uncertain against the other → uncertain
    (ONES, {"a": ZEROS, "b": [1.0] * 19 + [0.0]}, UNCERTAIN),
    # equal to a floor
    (HALF, {"a": HALF}, DEAD),
    # below one floor, far above the other → dead wins
    (HALF, {"a": ZEROS, "b": ONES}, DEAD),
    # a floor that failed or counted no query
    (ONES, {"a": ZEROS, "b": None}, NA),
    (ONES, {"a": [np.nan] * 5}, NA),
    # no primary
    (None, {"a": ZEROS}, NA),
    # no floor at all
    (ONES, {}, NA),
])
def test_signal_state(primary, floors, expected):
    assert signal_state(stat(primary), {n: stat(v) for n, v in floors.items()}) == expected


def test_floor_state_boundary_is_strict():
    # the primary's lower bound equal to the floor's upper bound is not "above" it
    assert floor_state(RowStat(mean=0.8, ci_low=0.5, ci_high=0.9, n=10),
                       RowStat(mean=0.3, ci_low=0.1, ci_high=0.5, n=10)) == UNCERTAIN
    assert floor_state(RowStat(mean=0.8, ci_low=0.51, ci_high=0.9, n=10),
                       RowStat(mean=0.3, ci_low=0.1, ci_high=0.5, n=10)) == ALIVE


def test_combine_states_worst_first():
    assert combine_states([ALIVE, UNCERTAIN]) == UNCERTAIN
    assert combine_states([ALIVE, NA, UNCERTAIN]) == NA
    assert combine_states([NA, DEAD]) == DEAD
    assert combine_states([ALIVE, ALIVE]) == ALIVE
    assert combine_states([]) == NA


@pytest.mark.parametrize("gap, floor, ceiling, expected", [
    (0.5, 0.25, 1.0, 0.5 / 0.75),
    (0.5, 0.25, 0.75, 1.0),
    (0.0, 0.4, 0.4, None),  # denominator 0
    (0.5, 0.25, None, None),  # ceiling row failed
    (None, 0.25, 1.0, None),
])
def test_normalized_gap(gap, floor, ceiling, expected):
    got = normalized_gap(gap, floor, ceiling)
    assert got == (None if expected is None else pytest.approx(expected))


def test_paired_gap_ci():
    p = np.array([1.0, 0.5, np.nan, 0.7])
    f = np.array([0.8, 0.3, 0.1, np.nan])
    # only queries 0 and 1 count for both: differences 0.2 and 0.2 → a point CI
    assert paired_gap_ci(p, f, 500, 0) == pytest.approx((0.2, 0.2))
    assert paired_gap_ci(p, f[:3], 500, 0) == (None, None)
    assert paired_gap_ci(np.array([1.0]), np.array([0.0]), 500, 0) == (None, None)


def test_gauge_metric_by_hand():
    scores = {
        "primary": np.array([1.0, 1.0, 1.0, 0.0, np.nan]),  # mean 0.75
        "rand": np.array([1.0, 0.0, 0.0, 0.0, np.nan]),  # mean 0.25
        "one": np.array([1.0, 1.0, 0.0, 0.0, np.nan]),  # mean 0.5
        "top": np.array([1.0, 1.0, 1.0, 1.0, np.nan]),  # mean 1.0
        "broken": None,
    }
    block = gauge_metric(scores, "primary", ["rand", "one"], "top", 1000, 0)
    assert block.primary.mean == pytest.approx(0.75)
    assert block.primary.n == 4
    assert block.as_dict()["ceiling"] == {"row": "top", "value": 1.0}
    rand, one = block.floors["rand"], block.floors["one"]
    assert rand.gap == pytest.approx(0.5)
    assert rand.normalized == pytest.approx(0.5 / 0.75)
    assert one.gap == pytest.approx(0.25)
    assert one.normalized == pytest.approx(0.5)
    assert block.rows["broken"] == MISSING
    assert block.signal_state in (UNCERTAIN, ALIVE)
    json.dumps(block.as_dict(), allow_nan=False)  # no NaN anywhere
    assert GaugeMetric.from_dict(json.loads(json.dumps(block.as_dict()))) == block


def test_gauge_metric_without_ceiling_row_uses_one():
    block = gauge_metric({"p": np.array([1.0, 0.5]), "f": np.array([0.0, 0.5])}, "p", ["f"],
                         None, 500, 0)
    assert block.as_dict()["ceiling"] == {"row": None, "value": 1.0}
    assert block.floors["f"].normalized == pytest.approx(0.5 / 0.75)


def test_gauge_metric_failed_floor_and_ceiling():
    block = gauge_metric({"p": ONES, "f": None, "c": None}, "p", ["f"], "c", 500, 0)
    f = block.floors["f"]
    assert (f.gap, f.normalized, f.signal_state) == (None, None, NA)
    assert block.ceiling is None
    assert block.signal_state == NA
    assert not math.isnan(block.primary.mean)
