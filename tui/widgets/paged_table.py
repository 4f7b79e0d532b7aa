"""A table filled a page at a time, so tables of any size open at once and scroll smoothly."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from textual.message import Message

from tui.widgets.columns import Columns
from tui.widgets.row_table import Cells, RowTable


class PagedTable(RowTable):
    """Holds the first rows of a result; asks for the next page (`MoreWanted`) when the cursor nears the end."""

    DEFAULT_CSS = """
    PagedTable { height: 1fr; }
    """

    @dataclass
    class MoreWanted(Message):
        table: PagedTable
        offset: int

    def __init__(self, *, margin: int = 40, id: str | None = None) -> None:
        super().__init__(id=id)
        self.total = 0
        self._margin = margin
        self._requested = -1

    @property
    def loaded(self) -> int:
        return self.row_count

    def reset(self, total: int, columns: Columns, width: int) -> int:
        """Forget every row and lay out `columns` for `width` cells: a new result of `total` rows is coming.
        Returns the width of the flexible columns."""
        self.total = total
        self._requested = -1
        return self.set_columns(columns, width)

    def add_page(self, rows: Iterable[tuple[str, Cells]], total: int) -> None:
        """Append `(key, cells)` rows."""
        self.total = total
        self.add_rows(rows)

    def want_more(self) -> None:
        if self.loaded < self.total and self._requested < self.loaded:
            self._requested = self.loaded
            self.post_message(self.MoreWanted(self, self.loaded))

    def on_row_table_row_highlighted(self, event: RowTable.RowHighlighted) -> None:
        if event.cursor_row >= self.loaded - self._margin:
            self.want_more()
