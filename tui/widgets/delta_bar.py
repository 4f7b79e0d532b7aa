"""A small diverging bar for a delta: left of centre when a feature is less common after, right when more."""

from __future__ import annotations

import math

from rich.text import Text

from tui.numbers import pp
from tui.themes import Palette

_LEFT_EIGHTHS = " ▏▎▍▌▋▊▉"  # fills growing rightwards from the centre line


def bar_column_width(terminal_width: int) -> int:
    """The width of a delta column: a shorter bar on narrow terminals leaves room for labels."""
    return 16 if terminal_width >= 100 else 12


def delta_bar(delta: float | None, scale: float, palette: Palette, width: int = 16) -> Text:
    """`delta` (a proportion difference) as a diverging bar, then its value in points, `width` cells in all.

    `scale` is the |delta| that fills one half. The sign is also in the number, so the bar reads without colour.
    """
    half_width = max(1, (width - 8) // 2)
    text = Text(end="", no_wrap=True)
    if delta is None or math.isnan(delta) or scale <= 0:
        text.append(" " * half_width + "│" + " " * half_width, style=palette.muted)
    else:
        eighths = round(min(1.0, abs(delta) / scale) * half_width * 8)
        full, part = divmod(eighths, 8)
        if delta < 0:  # growing leftwards: only a right-half block exists for the partial cell
            bar = ("▐" if part >= 4 else "") + "█" * full
            text.append(" " * (half_width - len(bar)))
            text.append(bar, style=palette.less)
            text.append("│" + " " * half_width, style=palette.muted)
        else:
            bar = "█" * full + (_LEFT_EIGHTHS[part] if part else "")
            text.append(" " * half_width + "│", style=palette.muted)
            text.append(bar, style=palette.more)
            text.append(" " * (half_width - len(bar)))
    text.append(f" {pp(delta):>6}")
    return text
