"""Power of a paired comparison: the minimum detectable effect and the queries it takes.

Normal approximation of the two-sided paired test at level ``alpha``: a true mean delta ``δ``
is detected with probability ``power`` when ``|δ| ≥ (z_{1−α/2} + z_{power}) · sd / √n``, where
``sd`` is the standard deviation of the per-query paired deltas. The sign-flip test that
``compare`` runs has the same large-sample behaviour as the paired t-test;
``bench/bench_gate.py`` measures how close the printed MDE is to the drop a simulation detects
80% of the time on SciFact.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

POWER = 0.8


def _z(alpha: float, power: float) -> float:
    normal = NormalDist()
    return normal.inv_cdf(1 - alpha / 2) + normal.inv_cdf(power)


def delta_sd(values) -> float | None:
    """Sample standard deviation (ddof 1) of paired deltas or per-query scores; None for n < 2."""
    v = np.asarray(values, dtype=np.float64)
    return float(v.std(ddof=1)) if v.size >= 2 else None


def mde(sd: float | None, n: int, alpha: float = 0.05, power: float = POWER) -> float | None:
    """The smallest true mean delta detected with ``power`` by ``n`` paired queries."""
    if sd is None or n < 2:
        return None
    return _z(alpha, power) * sd / math.sqrt(n)


def queries_needed(sd: float, delta: float, alpha: float = 0.05,
                   power: float = POWER) -> int:
    """How many paired queries detect a true mean delta of ``delta`` with ``power``."""
    if delta <= 0:
        raise ValueError("delta must be > 0")
    return max(2, math.ceil((_z(alpha, power) * sd / delta) ** 2))
