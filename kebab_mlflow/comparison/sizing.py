"""How many queries a golden set needs: the MDE of a run's metric and the n for a given drop.

The model is :mod:`kebab_mlflow.stats.power`'s: noise of sd ``sd``, a drop made of per-query
losses of size ``loss_size``. With a second run (``paired_with``) both come from the real paired
deltas, as in ``compare``: their sd, and a loss made of changes the size of those between the two
runs. One run cannot show the paired deltas, so:

- ``sd`` is the metric's own per-query sd, what the paired deltas have when two systems'
  per-query scores correlate at 0.5 (``sd_Δ = sd·√(2(1 − ρ))``);
- a loss is whole queries losing what they score (down to 0; for a lower-is-better rate, up to
  1): ``loss_size = E[ℓ²]/E[ℓ]`` with ``ℓ`` the per-query score (or ``1 − score``).

``bench/bench_gate.py`` measures both sd's on SciFact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kebab_mlflow import vocabulary as vocab
from kebab_mlflow.comparison.records import DEFAULT_PRIMARY, RunSide
from kebab_mlflow.errors import InputError, Problem
from kebab_mlflow.metrics.registry import parse_metric
from kebab_mlflow.stats.power import POWER, delta_sd, loss_size, mde, queries_needed

DEFAULT_DELTAS = (0.01, 0.02, 0.05)


@dataclass(frozen=True, kw_only=True)
class PowerReport:
    metric: str
    n: int
    sd: float
    paired: bool  # sd of real paired deltas (True) or of one run's scores (False)
    alpha: float
    mde: float | None
    needed: tuple[tuple[float, int], ...]  # (drop, queries needed)
    power: float = POWER
    loss_size: float = 0.0  # per-query loss size the MDE assumes (stats.power.loss_size)


def run_primary(side: RunSide) -> str:
    """The metric compare would decide on for this run's golden set."""
    named = side.tags.get(vocab.PRIMARY_METRIC)
    if named:
        return named
    levels = {lv for r in side.rows for lv, rank in (r.first_relevant_rank or {}).items()
              if rank is not None}
    if "chunk" in levels or any(r.score("mrr") is not None for r in side.rows):
        return DEFAULT_PRIMARY["chunk"]
    if "doc" in levels:
        return DEFAULT_PRIMARY["doc"]
    return DEFAULT_PRIMARY["answer"]


def _values(side: RunSide, metric: str) -> dict[str, float]:
    return {r.id: float(v) for r in side.rows if (v := r.score(metric)) is not None}


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
        size = loss_size(sample)
    else:
        sample = np.array(list(values.values()))
        known = parse_metric(metric)
        lower_is_better = known is not None and not known.higher_is_better
        size = loss_size(1 - sample if lower_is_better else sample)
    sd, size = delta_sd(sample) or 0.0, size or 0.0
    drops = tuple(deltas) or DEFAULT_DELTAS
    bad = [d for d in drops if not d > 0]
    if bad:
        raise InputError("bad --delta", [Problem(f"--delta must be > 0, got {bad[0]}",
                                                 "--delta")])
    needed = tuple((d, queries_needed(sd, d, alpha, loss=size)) for d in drops)
    return PowerReport(metric=metric, n=int(sample.size), sd=sd, paired=paired_with is not None,
                       alpha=alpha,
                       mde=mde(sd, int(sample.size), alpha, loss=size), needed=needed, power=POWER,
                       loss_size=size)
