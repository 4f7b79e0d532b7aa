"""A table of rows drawn with Textual's line API. Each row becomes a strip once and is kept: a table coming back
into view (a screen switch, a pop, focus moving) redraws from those strips, where Textual's DataTable renders
every visible cell again after any style change (100-300 ms for a screen of rows on a small machine).

Cells are one-line Rich `Text`s (their `justify` is honoured), given as they are or as a function that makes
them, called when the row is first drawn (a page of 200 rows shows without building 1,400 Texts). The cursor
and zebra stripes are row styles laid under the cells' own styles when a line is drawn, so moving the cursor
redraws two lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui.widgets.columns import Columns, flexible_width

PADDING = 1  # cells each side of a column
Cells = Sequence[Text] | Callable[[], Sequence[Text]]  # a row's cells, or what makes them when it is drawn


@dataclass(frozen=True)
class Column:
    header: str
    width: int


@dataclass
class RowMessage(Message):
    """About one row of a table: which table, the row's position and its key."""

    table: RowTable
    cursor_row: int
    row_key: str

    @property
    def control(self) -> RowTable:
        return self.table


class RowTable(ScrollView, can_focus=True):
    """Rows of cells under a fixed header, one row under a cursor. Rows are addressed by string keys."""

    COMPONENT_CLASSES = {"row-table--header", "row-table--cursor", "row-table--even-row"}
    DEFAULT_CSS = """
    RowTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        & > .row-table--header { text-style: bold; background: $panel; color: $foreground; }
        &:ansi > .row-table--header { background: ansi_bright_blue; color: ansi_default; }
        & > .row-table--even-row { background: $surface-lighten-1 50%; }
        &:dark > .row-table--even-row { background: $surface-darken-1 40%; }
        & > .row-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus > .row-table--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
    }
    """
    BINDINGS = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first_row", "First row", show=False),
        Binding("end", "last_row", "Last row", show=False),
    ]

    class RowHighlighted(RowMessage):
        """The cursor moved to a row (or the first rows arrived under it)."""

    class RowSelected(RowMessage):
        """Enter on a row."""

    def __init__(self, *, zebra_stripes: bool = True, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.zebra_stripes = zebra_stripes
        self.columns: list[Column] = []
        self._keys: list[str] = []
        self._cells: list[Cells] = []
        self._index: dict[str, int] = {}
        self._strips: dict[int, Strip] = {}
        self._header: Strip | None = None
        self._cursor = 0

    # -- contents --------------------------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._keys)

    @property
    def row_keys(self) -> Sequence[str]:
        return self._keys

    def has_row(self, key: str) -> bool:
        return key in self._index

    def get_row_index(self, key: str) -> int:
        """The row's position; KeyError if no row has this key."""
        return self._index[key]

    def set_columns(self, columns: Columns, total_width: int) -> int:
        """Forget every row and column, lay out `columns` for a terminal `total_width` cells wide; returns the
        width of the flexible columns (`None` widths), which share what the fixed ones leave."""
        flexible = flexible_width(columns, total_width)
        self.columns = [Column(header, width or flexible) for header, width in columns]
        self._header = None
        self.clear()
        return flexible

    def clear(self) -> None:
        """Forget every row (the columns stay)."""
        self._keys, self._cells, self._index, self._strips = [], [], {}, {}
        self._cursor = 0
        self.scroll_to(0, 0, animate=False, immediate=True, force=True)
        self._resized()

    def add_rows(self, rows: Iterable[tuple[str, Cells]]) -> None:
        """Append `(key, cells)` rows; the first rows of an empty table put the cursor on row 0."""
        was_empty = not self._keys
        for key, cells in rows:
            if key in self._index:
                raise ValueError(f"duplicate row key {key!r}")
            self._index[key] = len(self._keys)
            self._keys.append(key)
            self._cells.append(cells)
        self._resized()
        if was_empty and self._keys:
            self._highlighted()

    def add_row(self, *cells: Text, key: str) -> None:
        self.add_rows([(key, cells)])

    def update_row(self, key: str, cells: Cells) -> None:
        """Replace a row's cells (KeyError if there is no such row)."""
        index = self._index[key]
        self._cells[index] = cells
        self._strips.pop(index, None)
        self.refresh_line(index + 1)

    def _resized(self) -> None:
        width = sum(c.width + 2 * PADDING for c in self.columns)
        self.virtual_size = Size(width, len(self._keys) + 1)
        self.refresh()

    # -- the cursor ------------------------------------------------------------------------------------------

    @property
    def cursor_row(self) -> int:
        return self._cursor

    def move_cursor(self, *, row: int) -> None:
        """Put the cursor on `row` (clamped to the rows there are) and scroll it into view."""
        row = max(0, min(row, len(self._keys) - 1))
        if row == self._cursor or not self._keys:
            self._scroll_to_cursor()
            return
        old, self._cursor = self._cursor, row
        self.refresh_line(old + 1)
        self.refresh_line(row + 1)
        self._scroll_to_cursor()
        self._highlighted()

    @property
    def _visible_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _scroll_to_cursor(self) -> None:
        top = round(self.scroll_y)
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, immediate=True, force=True)
        elif self._cursor >= top + self._visible_rows:
            self.scroll_to(y=self._cursor - self._visible_rows + 1, animate=False, immediate=True, force=True)

    def _highlighted(self) -> None:
        self.post_message(self.RowHighlighted(self, self._cursor, self._keys[self._cursor]))

    def action_cursor_up(self) -> None:
        self.move_cursor(row=self._cursor - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(row=self._cursor + 1)

    def action_page_up(self) -> None:
        self.move_cursor(row=self._cursor - self._visible_rows)

    def action_page_down(self) -> None:
        self.move_cursor(row=self._cursor + self._visible_rows)

    def action_first_row(self) -> None:
        self.move_cursor(row=0)

    def action_last_row(self) -> None:
        self.move_cursor(row=len(self._keys) - 1)

    def action_select_cursor(self) -> None:
        if self._keys:
            self.post_message(self.RowSelected(self, self._cursor, self._keys[self._cursor]))

    # -- drawing ---------------------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        """Row strips hold only the cells' own styles, so they stay; the header takes the new header style."""
        super().notify_style_update()
        self._header = None

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = max(self.virtual_size.width, self.size.width)
        if y == 0:
            if self._header is None:
                style = self.get_component_rich_style("row-table--header")
                headers = [Text(c.header) for c in self.columns]
                self._header = self._line(headers).adjust_cell_length(width, style).apply_style(style)
            strip = self._header
        else:
            index = scroll_y + y - 1
            if index >= len(self._keys):
                return Strip.blank(self.size.width, self.rich_style)
            cached = self._strips.get(index)
            if cached is None:
                cells = self._cells[index]
                cached = self._strips[index] = self._line(cells() if callable(cells) else cells)
            strip = cached
            style = self._row_style(index)
            strip = strip.adjust_cell_length(width, style).apply_style(style)
        return strip.crop(scroll_x, scroll_x + self.size.width)

    def _row_style(self, index: int) -> Style:
        if index == self._cursor:
            return self.rich_style + self.get_component_rich_style("row-table--cursor")
        if self.zebra_stripes and index % 2:
            return self.rich_style + self.get_component_rich_style("row-table--even-row")
        return self.rich_style

    def _line(self, cells: Sequence[Text]) -> Strip:
        """One row's cells, each cut or padded to its column, without row styles."""
        line = Text(end="", no_wrap=True)
        pad = " " * PADDING
        for column, cell in zip(self.columns, cells, strict=False):
            piece = cell.split("\n")[0] if "\n" in cell.plain else cell.copy()
            piece.truncate(column.width, overflow="ellipsis")
            piece.align(cell.justify if cell.justify in ("left", "center", "right") else "left", column.width)
            line.append(pad)
            line.append_text(piece)
            line.append(pad)
        return Strip(line.render(self.app.console), line.cell_len)
