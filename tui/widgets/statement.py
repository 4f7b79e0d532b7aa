"""A hypothesis' statement as a table cell: one clean line, marked when the finding likely restates the one
above it (the same evidence decided most of its positives: `engine.store.queries.shared_evidence`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from engine.safe_text import one_line

if TYPE_CHECKING:
    from engine.store.queries import HypothesisRow

SAME_MARK = "↳ "


def statement_cell(h: HypothesisRow, width: int) -> Text:
    """The statement cut to `width` characters, the restating mark included."""
    if h.same_evidence is None:
        return one_line(h.statement, width)
    text = Text(SAME_MARK, style="dim", end="")
    text.append_text(one_line(h.statement, max(width - len(SAME_MARK), 1)))
    return text
