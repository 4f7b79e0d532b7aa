"""A segment's text with each token's background showing how strongly a feature fired on it."""

from __future__ import annotations

from rich.text import Text

from engine.safe_text import safe_spans
from tui.themes import Palette


def highlighted_tokens(
    text: str, tokens: list[tuple[int, int, float]], palette: Palette, window: int | None = None
) -> Text:
    """`text` (untrusted) with tokens shaded by activation relative to the strongest token.

    Tokens under 5% of the maximum stay plain, so the evidence stands out. With `window`, only about that
    many characters around the strongest token are shown, with ellipses where text was cut.
    """
    peak = max((a for _, _, a in tokens), default=0.0)
    start, end = 0, len(text)
    if window is not None and len(text) > window:
        centre = max(tokens, key=lambda t: t[2])[0] if peak > 0 else 0
        start = max(0, min(centre - window // 3, len(text) - window))
        end = start + window
    spans = []
    if peak > 0:
        for a, b, activation in tokens:
            if activation / peak >= 0.05 and b > start and a < end:
                spans.append((max(a, start) - start, min(b, end) - start, palette.highlight_style(activation / peak)))
    out = Text("…" if start else "", end="")
    out.append_text(safe_spans(text[start:end], spans))
    if end < len(text):
        out.append("…")
    return out
