"""How many queries a golden set needs: the MDE of a run's metric and the n for a given drop.

The sd that matters is that of the *paired deltas* between two systems, which one run cannot
show. From one run it is taken to be the per-query sd of the metric itself, which is what the
paired deltas have when the two systems' per-query scores correlate at 0.5
(``sd_Δ = sd·√(2(1 − ρ))``); with a second run (``paired_with``) the real paired deltas are
used. ``bench/bench_gate.py`` measures both on SciFact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kebab_mlflow.comparison.records import DEFAULT_PRIMARY, RunSide
from kebab_mlflow.errors import InputError, Problem
from kebab_mlflow.stats.power import POWER, delta_sd, mde, queries_needed

DEFAULT_DELTAS = (0.01, 0.02, 0.05)


@dataclass(frozen=True)
class PowerReport:
    metric: str
    n: int
    sd: float
    paired: bool  # sd of real paired deltas (True) or of one run's scores (False)
    alpha: float
    mde: float | None
    needed: tuple[tuple[float, int], ...]  # (drop, queries needed)
    power: float = POWER


def run_primary(side: RunSide) -> str:
    """The metric compare would decide on for this run's golden set."""
    named = side.tags.get("kebab.primary_metric")
    if named:
        return named
    levels = {lv for r in side.rows for lv, rank in (r.first_relevant_rank or {}).items()
              if rank is not None}
    if "chunk" in levels or any(r.scores.get("mrr") is not None for r in side.rows):
        return DEFAULT_PRIMARY["chunk"]
    if "doc" in levels:
        return DEFAULT_PRIMARY["doc"]
    return DEFAULT_PRIMARY["answer"]


def _values(side: RunSide, metric: str) -> dict[str, float]:
    return {r.id: float(r.scores[metric]) for r in side.rows
            if r.scores.get(metric) is not None}


def power_report(side: RunSide, metric: str | None = None, deltas: Sequence[float] = (),
                 alpha: float = 0.05, paired_with: RunSide | None = None) -> PowerReport:
    metric = metric or run_primary(side)
    values = _values(side, metric)
    if len(values) < 2:
        raise InputError("cannot size this metric", [Problem(
            f"run {side.run_id} has {len(values)} query(ies) with a value of {metric!r}; "
            "need at least 2", "--metric")])
    if paired_with is not None:
        other = _values(paired_with, metric)
        shared = sorted(values.keys() & other.keys())
        sample = np.array([other[q] - values[q] for q in shared])
    else:
        sample = np.array(list(values.values()))
    sd = delta_sd(sample) or 0.0
    drops = tuple(deltas) or DEFAULT_DELTAS
    bad = [d for d in drops if not d > 0]
    if bad:
        raise InputError("bad --delta", [Problem(f"--delta must be > 0, got {bad[0]}",
                                                 "--delta")])
    needed = tuple((d, queries_needed(sd, d, alpha)) for d in drops)
    return PowerReport(metric, int(sample.size), sd, paired_with is not None, alpha,
                       mde(sd, int(sample.size), alpha), needed)
