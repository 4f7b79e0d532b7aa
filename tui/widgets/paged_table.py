"""A DataTable filled a page at a time, so tables of any size open at once and scroll smoothly."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from tui.widgets.columns import Columns, set_columns


class PagedTable(DataTable[Text]):
    """Holds the first rows of a result; asks for the next page (`MoreWanted`) when the cursor nears the end."""

    DEFAULT_CSS = """
    PagedTable { height: 1fr; }
    """
    BINDINGS = [  # rows matter here, not columns: home/end go to the first/last row loaded
        Binding("home", "scroll_top", "Top", show=False),
        Binding("end", "scroll_bottom", "Bottom", show=False),
    ]

    @dataclass
    class MoreWanted(Message):
        table: PagedTable
        offset: int

    def __init__(self, *, margin: int = 40, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
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
        return set_columns(self, columns, width)

    def add_page(self, rows: Iterable[tuple[str, list[Text]]], total: int) -> None:
        """Append `(key, cells)` rows."""
        self.total = total
        for key, cells in rows:
            self.add_row(*cells, key=key)

    def want_more(self) -> None:
        if self.loaded < self.total and self._requested < self.loaded:
            self._requested = self.loaded
            self.post_message(self.MoreWanted(self, self.loaded))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row >= self.loaded - self._margin:
            self.want_more()
