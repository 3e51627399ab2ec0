"""The one number formatter: every table, report and summary renders values through it."""

from __future__ import annotations

from typing import Any

MISSING = "—"


def number(value: Any, digits: int = 4, signed: bool = False) -> str:
    """A float to ``digits`` decimals (``+`` sign when ``signed``), None as an em dash,
    anything else as its ``str``."""
    if value is None:
        return MISSING
    if isinstance(value, float):
        return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    return str(value)
