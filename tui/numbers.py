"""How numbers read on screen: percentages, percentage points, p/q values, intervals. Always as plain text."""

from __future__ import annotations

import math


def pct(value: float | None, digits: int = 1) -> str:
    """A proportion as a percentage: 0.123 -> '12.3%'."""
    return "—" if value is None or math.isnan(value) else f"{value * 100:.{digits}f}%"


def pp(value: float | None, digits: int = 1) -> str:
    """A difference of proportions in signed percentage points: -0.05 -> '-5.0'."""
    return "—" if value is None or math.isnan(value) else f"{value * 100:+.{digits}f}"


def pvalue(value: float | None) -> str:
    """A p- or q-value in at most 6 characters."""
    if value is None or math.isnan(value):
        return "—"
    if value < 1e-4:
        return "<1e-4"
    return f"{value:.4f}" if value < 0.001 else f"{value:.3f}"


def interval(low: float | None, high: float | None, digits: int = 1) -> str:
    """A CI of a difference in percentage points: '[-8.1, -2.0]'."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return ""
    return f"[{low * 100:+.{digits}f}, {high * 100:+.{digits}f}]"


def signed(value: float | None, digits: int = 2) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:+.{digits}f}"
