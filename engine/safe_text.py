"""Untrusted text (rollouts, labels derived from them) made safe to show: the TUI, the CLI, reports, prompts.

Three dangers: terminal control sequences, which a terminal would act on (move the cursor, retitle the window,
write to the clipboard); bidirectional overrides and zero-width characters, which make text read differently
than it is (a tool name that shows as another); and Rich/Textual markup, which would restyle or hyperlink the
text. `clean` strips the first two; `safe` builds a `rich.text.Text`, which never interprets markup; `line`
makes a short one-line label. Every string from the store goes through one of these before it is shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.style import Style
from rich.text import Text

# ESC-introduced sequences: CSI (ESC [ ... final), OSC/DCS/SOS/PM/APC strings (ended by BEL or ST, or
# unterminated to the end), then any other two-character ESC sequence; then 8-bit C1 forms and the rest of
# the C0/C1 controls except tab and newline.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
    # bidi embeddings, overrides and isolates, zero-width and direction marks, the BOM used as a zero-width space
    "|[\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]"
)
# A label (a feature's, a tool's, a checkpoint's) longer than this is cut: one terminal line stays readable.
MAX_LABEL_CHARS = 128


def clean(text: str | None) -> str:
    """`text` without terminal control sequences or control characters (newline and tab kept).

    A lone carriage return becomes a newline so Windows line ends survive.
    """
    if not text:
        return ""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text)


def cut(text: str, max_chars: int | None) -> str:
    """`text` cut to `max_chars` characters, the last one an ellipsis when anything was left out."""
    if max_chars is not None and len(text) > max_chars:
        return text[: max(0, max_chars - 1)] + "…"
    return text


def line(text: str | None, max_chars: int | None = MAX_LABEL_CHARS) -> str:
    """Cleaned text on one line (newlines, tabs and runs of spaces become one space), cut to `max_chars`."""
    return cut(" ".join(clean(text).split()), max_chars)


def safe(text: str | None, style: str | Style = "", *, max_chars: int | None = None) -> Text:
    """A Rich Text of cleaned `text`: markup such as `[bold]` shows literally."""
    return Text(cut(clean(text), max_chars), style=style, end="")


def one_line(text: str | None, max_chars: int = 200) -> Text:
    """Cleaned text on one line (newlines and tabs become spaces), for table cells and list items."""
    return Text(line(text, max_chars), end="")


def safe_spans(text: str | None, spans: Iterable[tuple[int, int, Style | str]], base: str | Style = "") -> Text:
    """Cleaned text with styles over character ranges of the *original* text (e.g. token activations).

    Offsets are mapped through the removal of control sequences, so a highlight stays on its token.
    """
    raw = (text or "").replace("\r\n", " \n").replace("\r", "\n")
    # old offset -> new offset: count characters kept before each position.
    keep = [True] * (len(raw) + 1)
    for match in _CONTROL.finditer(raw):
        for i in range(match.start(), match.end()):
            keep[i] = False
    new_at, kept = [], 0
    for flag in keep:
        new_at.append(kept)
        kept += flag
    out = Text("".join(ch for ch, flag in zip(raw, keep, strict=False) if flag), style=base, end="")
    for start, end, style in spans:
        start, end = max(0, min(start, len(raw))), max(0, min(end, len(raw)))
        if end > start:
            out.stylize(style, new_at[start], new_at[end])
    return out
