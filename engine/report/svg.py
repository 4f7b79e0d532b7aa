"""Small inline SVG plots: no scripts, no external assets."""

from __future__ import annotations

from html import escape

BEFORE_COLOUR = "#4c78a8"
AFTER_COLOUR = "#f58518"


def prevalence_bars(
    before: float | None, after: float | None, ci_low: float | None, ci_high: float | None, width: int = 220
) -> str:
    """Two horizontal bars (before, after prevalence) on a 0..max scale, the after bar with the delta's CI
    drawn around it as a whisker."""
    b, a = before or 0.0, after or 0.0
    lo = a + (ci_low - (a - b)) if ci_low is not None else None
    hi = a + (ci_high - (a - b)) if ci_high is not None else None
    top = max(0.05, b, a, hi or 0.0) * 1.1
    scale = (width - 60) / top

    def x(v: float) -> float:
        return 50 + max(0.0, v) * scale

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="44" role="img" '
        f'aria-label="prevalence before {b:.1%}, after {a:.1%}">',
        f'<text x="0" y="14" font-size="11">before</text><rect x="50" y="5" width="{x(b) - 50:.1f}" height="12" '
        f'fill="{BEFORE_COLOUR}"/><text x="{x(b) + 3:.1f}" y="15" font-size="10">{escape(f"{b:.1%}")}</text>',
        f'<text x="0" y="36" font-size="11">after</text><rect x="50" y="27" width="{x(a) - 50:.1f}" height="12" '
        f'fill="{AFTER_COLOUR}"/><text x="{x(max(a, hi or a)) + 3:.1f}" y="37" font-size="10">'
        f"{escape(f'{a:.1%}')}</text>",
    ]
    if lo is not None and hi is not None:
        parts.append(
            f'<line x1="{x(lo):.1f}" y1="33" x2="{x(hi):.1f}" y2="33" stroke="#222" stroke-width="1.5"/>'
            f'<line x1="{x(lo):.1f}" y1="29" x2="{x(lo):.1f}" y2="37" stroke="#222"/>'
            f'<line x1="{x(hi):.1f}" y1="29" x2="{x(hi):.1f}" y2="37" stroke="#222"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


def delta_dot(delta: float | None, ci_low: float | None, ci_high: float | None, span: float, width: int = 160) -> str:
    """A delta with its CI on a symmetric axis -span..+span (percentage points of prevalence)."""
    if delta is None:
        return ""
    span = max(span, 1e-6)

    def x(v: float) -> float:
        return width / 2 + max(-span, min(span, v)) / span * (width / 2 - 6)

    colour = AFTER_COLOUR if delta > 0 else BEFORE_COLOUR
    whisker = (
        f'<line x1="{x(ci_low):.1f}" y1="8" x2="{x(ci_high):.1f}" y2="8" stroke="#222"/>'
        if ci_low is not None and ci_high is not None
        else ""
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="16" role="img" '
        f'aria-label="delta {delta * 100:+.1f} points">'
        f'<line x1="{width / 2}" y1="1" x2="{width / 2}" y2="15" stroke="#999"/>{whisker}'
        f'<circle cx="{x(delta):.1f}" cy="8" r="4" fill="{colour}"/></svg>'
    )
