"""The distinguishing-power gauge (DESIGN §8): can a metric tell the primary pipeline from
deliberately broken floors? Pure numpy; no MLflow.

For one metric, every row (sweep configuration) contributes its per-query scores (NaN = the
query does not count for this metric; dropped per row). Then, per floor row:

* ``gap = mean(primary) − mean(floor)``
* ``normalized = gap / (ceiling − mean(floor))`` where ``ceiling`` is the ceiling row's mean,
  1.0 when the sweep has no ceiling row, and ``None`` when the ceiling row failed or the
  denominator is 0;
* ``gap_ci`` — a paired bootstrap CI of the per-query difference (queries counted by both).

Every row's mean gets a percentile-bootstrap 95% CI (seeded, :func:`kebab_mlflow.stats
.bootstrap_ci`); a row with fewer than two counted queries has no CI. The signal state:

* ``alive`` — the primary's CI lower bound is above every floor's CI upper bound;
* ``uncertain`` — the point gap is positive against every floor, but some CIs overlap or a
  CI is missing;
* ``dead`` — the primary is at or below a floor on the point estimate;
* ``n/a`` — a floor (or the primary) is missing: not configured, failed, or no counted query.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kebab_mlflow.stats.resampling import bootstrap_ci

CONFIDENCE = 0.95


class SignalState(enum.StrEnum):
    """Whether a metric tells the primary row from a floor: alive (the gap's CI excludes 0),
    uncertain, dead (the primary is no better than the floor) or n/a (no data)."""

    ALIVE = "alive"
    UNCERTAIN = "uncertain"
    DEAD = "dead"
    NA = "n/a"


ALIVE, UNCERTAIN, DEAD, NA = SignalState  # short names, in the enum's order
# worst first: the overall state of several metrics is the worst of theirs
STATE_ORDER = (DEAD, NA, UNCERTAIN, ALIVE)


@dataclass(frozen=True, kw_only=True)
class RowStat:
    """Mean of one row's counted per-query scores with its bootstrap CI (None when n < 2)."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int

    @property
    def has_ci(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None

    def as_dict(self) -> dict[str, float | int | None]:
        return {"mean": self.mean, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n}


MISSING = RowStat(mean=None, ci_low=None, ci_high=None, n=0)


def row_stat(values: np.ndarray | None, resamples: int, seed: int,
             confidence: float = CONFIDENCE) -> RowStat:
    """Mean and percentile-bootstrap CI of the non-NaN values; ``MISSING`` for None/empty."""
    if values is None:
        return MISSING
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return MISSING
    mean = float(v.mean())
    if v.size < 2:
        return RowStat(mean=mean, ci_low=None, ci_high=None, n=int(v.size))
    lo, hi = bootstrap_ci(v, resamples, seed, confidence)
    return RowStat(mean=mean, ci_low=float(lo[0]), ci_high=float(hi[0]), n=int(v.size))


def paired_gap_ci(primary: np.ndarray, floor: np.ndarray, resamples: int, seed: int,
                  confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """Bootstrap CI of mean(primary − floor) over the queries both rows count."""
    p = np.asarray(primary, dtype=np.float64)
    f = np.asarray(floor, dtype=np.float64)
    if p.shape != f.shape:
        return None, None
    both = ~np.isnan(p) & ~np.isnan(f)
    if both.sum() < 2:
        return None, None
    lo, hi = bootstrap_ci(p[both] - f[both], resamples, seed, confidence)
    return float(lo[0]), float(hi[0])


def floor_state(primary: RowStat, floor: RowStat) -> SignalState:
    """The signal state of the primary against one floor."""
    if primary.mean is None or floor.mean is None:
        return NA
    if primary.mean <= floor.mean:
        return DEAD
    low, high = primary.ci_low, floor.ci_high  # alive: the CIs do not overlap
    if primary.has_ci and floor.has_ci and low is not None and high is not None and low > high:
        return ALIVE
    return UNCERTAIN


def combine_states(states: Sequence[SignalState]) -> SignalState:
    """The worst of several states (``n/a`` for none at all)."""
    if not states:
        return NA
    return min(states, key=STATE_ORDER.index)


def signal_state(primary: RowStat, floors: Mapping[str, RowStat]) -> SignalState:
    """``alive`` only when the primary clears every floor; ``dead`` when any floor matches or
    beats it; ``n/a`` when a floor is missing; ``uncertain`` otherwise."""
    states = [floor_state(primary, f) for f in floors.values()]
    if NA in states or not states:
        return NA
    return combine_states(states)


def normalized_gap(gap: float | None, floor_mean: float | None,
                   ceiling: float | None) -> float | None:
    """gap / (ceiling − floor); None when anything is missing or the denominator is 0."""
    if gap is None or floor_mean is None or ceiling is None:
        return None
    denominator = ceiling - floor_mean
    if denominator == 0:
        return None
    return gap / denominator


@dataclass(frozen=True, kw_only=True)
class FloorGap:
    """The primary against one floor: the floor's own stat, the gap with its paired CI, the
    normalized gap and the state."""

    stat: RowStat
    gap: float | None
    gap_ci_low: float | None
    gap_ci_high: float | None
    normalized: float | None
    signal_state: SignalState

    def as_dict(self) -> dict[str, float | int | str | None]:
        return {**self.stat.as_dict(), "gap": self.gap, "gap_ci_low": self.gap_ci_low,
                "gap_ci_high": self.gap_ci_high, "normalized": self.normalized,
                "signal_state": self.signal_state}


@dataclass(frozen=True, kw_only=True)
class GaugeMetric:
    """The gauge of one metric: the primary row's stat, the ceiling's value, each floor's gap,
    every row's stat and the overall state of the metric."""

    primary_row: str
    primary: RowStat
    ceiling_row: str | None
    ceiling: float | None  # the ceiling row's mean; 1.0 without a ceiling row
    floors: Mapping[str, FloorGap]
    rows: Mapping[str, RowStat]
    signal_state: SignalState

    def as_dict(self) -> dict[str, Any]:
        """The metric's block of ``distinguishing_power.json`` (and ``sweep --json``)."""
        return {
            "primary": {"row": self.primary_row, **self.primary.as_dict()},
            "ceiling": {"row": self.ceiling_row, "value": self.ceiling},
            "floors": {name: f.as_dict() for name, f in self.floors.items()},
            "rows": {name: s.as_dict() for name, s in self.rows.items()},
            "signal_state": self.signal_state,
            "n_queries": self.primary.n,
        }

    @classmethod
    def from_dict(cls, block: Mapping[str, Any]) -> GaugeMetric:
        """A block of ``distinguishing_power.json`` or ``sweep --json`` read back."""
        def stat(d: Mapping[str, Any]) -> RowStat:
            return RowStat(mean=d["mean"], ci_low=d["ci_low"], ci_high=d["ci_high"], n=d["n"])

        floors = {name: FloorGap(stat=stat(f), gap=f["gap"], gap_ci_low=f["gap_ci_low"],
                                 gap_ci_high=f["gap_ci_high"], normalized=f["normalized"],
                                 signal_state=SignalState(f["signal_state"]))
                  for name, f in block["floors"].items()}
        return cls(primary_row=block["primary"]["row"], primary=stat(block["primary"]),
                   ceiling_row=block["ceiling"]["row"],
                   ceiling=block["ceiling"]["value"], floors=floors,
                   rows={name: stat(r) for name, r in block["rows"].items()},
                   signal_state=SignalState(block["signal_state"]))


def gauge_metric(scores: Mapping[str, np.ndarray | None], primary: str, floors: Sequence[str],
                 ceiling: str | None, resamples: int, seed: int) -> GaugeMetric:
    """The gauge of one metric. ``scores`` maps every row name to its per-query array (None
    for a row that failed); all arrays are aligned on the same queries."""
    stats = {name: row_stat(values, resamples, seed) for name, values in scores.items()}
    p = stats.get(primary, MISSING)
    ceiling_value = 1.0 if ceiling is None else stats.get(ceiling, MISSING).mean
    floor_gaps = {}
    for name in floors:
        f = stats.get(name, MISSING)
        gap = None if p.mean is None or f.mean is None else p.mean - f.mean
        p_values, f_values = scores.get(primary), scores.get(name)
        gap_lo, gap_hi = ((None, None) if p_values is None or f_values is None
                          else paired_gap_ci(p_values, f_values, resamples, seed))
        floor_gaps[name] = FloorGap(stat=f, gap=gap, gap_ci_low=gap_lo, gap_ci_high=gap_hi,
                                    normalized=normalized_gap(gap, f.mean, ceiling_value),
                                    signal_state=floor_state(p, f))
    return GaugeMetric(primary_row=primary, primary=p, ceiling_row=ceiling, ceiling=ceiling_value,
                       floors=floor_gaps, rows=stats,
                       signal_state=signal_state(p, {n: stats.get(n, MISSING) for n in floors}))
