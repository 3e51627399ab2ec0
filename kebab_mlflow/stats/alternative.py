"""The alternative hypothesis of the gate's paired test (light: the CLI's --help imports it)."""

from __future__ import annotations

import enum


class Alternative(enum.StrEnum):
    """``two-sided``: Regressed needs p < alpha and a worse mean, i.e. a one-sided test at
    alpha/2 (Better the mirror image); ``less``: the whole alpha on the worse side (one-sided
    p < alpha), and Better is never concluded."""

    TWO_SIDED = "two-sided"
    LESS = "less"
