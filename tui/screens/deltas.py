"""Screen 2: the ranked deltas, filtered and sorted in the store and loaded a page at a time."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, ClassVar, TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.reactive import reactive
from textual.widgets import Input, Static

from engine.kinds import DELTA_KINDS, DIRECTIONS, SENTENCE_SOURCES, SOURCES, DeltaKind, DeltaSort, Direction, Source
from engine.safe_text import one_line
from tui import keymap
from tui.messages import DeltaPageLoaded
from tui.numbers import pct, pvalue
from tui.screens.base import RldiffScreen
from tui.widgets.columns import Columns
from tui.widgets.delta_bar import bar_column_width, delta_bar
from tui.widgets.paged_table import PagedTable
from tui.widgets.search_box import SearchBox

if TYPE_CHECKING:
    from engine.store.queries import DeltaFilter, DeltaRow

KINDS: tuple[DeltaKind | None, ...] = (None, *DELTA_KINDS)
KIND_SHORT = {"reasoning": "reas", "text": "text", "tool_call": "tool", "any": "any"}
DIRECTION_FILTERS: tuple[Direction | None, ...] = (None, *DIRECTIONS)
SOURCE_FILTERS: tuple[Source | None, ...] = (None, *SOURCES)
SOURCE_SHORT = {"sae": "sae", "structural": "str", "concept": "con", "group": "grp"}


def _source_or_family(row: DeltaRow) -> str:
    """The testing family (its q is within it: str, sae, con, lex, rol, lat), or con/grp for sentence features."""
    if row.source in SENTENCE_SOURCES:
        return SOURCE_SHORT[row.source]
    return (row.family or row.source)[:3]


# (label, max_q, tested_only)
Q_FILTERS = (("tested", None, True), ("q≤0.05", 0.05, True), ("q≤0.01", 0.01, True), ("all", None, False))
SORTS: tuple[tuple[str, DeltaSort], ...] = (
    ("q", "q"),
    ("|Δ|", "abs_delta"),
    ("Δ↑", "increase"),
    ("Δ↓", "decrease"),
    ("label", "label"),
)
PAGE = 200


def _all_deltas() -> DeltaFilter:
    """No filter (the store package loads when the screen does, not with the TUI)."""
    from engine.store.queries import DeltaFilter

    return DeltaFilter()


def columns(width: int) -> Columns:
    return (
        ("feature", None),
        ("kind", 4),
        ("fam", 3),
        ("before", 6),
        ("after", 6),
        ("Δ pp", bar_column_width(width)),
        ("q", 6),
    )


C = TypeVar("C")


def _cycle(options: tuple[C, ...], current: C) -> C:
    """The option after `current`, round to the first."""
    return options[(options.index(current) + 1) % len(options)]


class DeltasScreen(RldiffScreen):
    NAV = "deltas"
    AUTO_FOCUS = "#deltas"
    BINDINGS: ClassVar[list[BindingType]] = [*keymap.DELTAS]

    filter: reactive[DeltaFilter] = reactive(_all_deltas, init=False)

    def __init__(self) -> None:
        super().__init__()
        self._q_label = "tested"
        self._scale = 0.1
        self._rows: list[DeltaRow] = []
        self._label_width = 20
        self._loaded = False

    def compose_body(self) -> ComposeResult:
        yield Static(id="delta-filters")
        yield Static(id="delta-length")
        yield SearchBox(placeholder="search labels (Enter: back to the table, Esc: clear)", id="delta-search")
        yield PagedTable(id="deltas")

    def on_mount(self) -> None:
        self._label_width = self.query_one(PagedTable).reset(0, columns(self.app.size.width), self.app.size.width)
        self._show_filters()
        super().on_mount()

    # -- loading ---------------------------------------------------------------------------------------------

    def reload(self) -> None:
        self._load(0)

    def _load(self, offset: int) -> None:
        from engine.store import queries
        from engine.store.queries.deltas import family_summary, length_line

        flt = self.filter
        self.run_query(
            "deltas" if offset == 0 else "deltas-more",
            lambda cur: (
                queries.delta_page(cur, flt, offset, PAGE),
                None if offset else length_line(family_summary(cur)),
            ),
            lambda loaded: DeltaPageLoaded(loaded[0], flt, loaded[1]),
        )

    def on_delta_page_loaded(self, message: DeltaPageLoaded) -> None:
        if message.filter != self.filter:
            return  # a newer filter is loading
        page = message.page
        if message.length is not None:
            self.query_one("#delta-length", Static).update(Text(message.length, style="dim"))
        table = self.query_one(PagedTable)
        if page.offset == 0:
            self._rows = []
            self._label_width = table.reset(page.total, columns(self.app.size.width), self.app.size.width)
            self._scale = max((abs(r.delta or 0.0) for r in page.rows), default=0.0) or 0.1
        elif page.offset != len(self._rows):
            return
        self._rows += page.rows
        self._loaded = True
        table.add_page(((f"{r.feature_id}:{r.kind}", partial(self._cells, r)) for r in page.rows), page.total)
        self._show_filters()

    def on_paged_table_more_wanted(self, message: PagedTable.MoreWanted) -> None:
        self._load(message.offset)

    def _cells(self, row: DeltaRow) -> list[Text]:
        palette = self.palette
        return [
            one_line(row.label, self._label_width),
            Text(KIND_SHORT.get(row.kind, row.kind[:4])),
            Text(_source_or_family(row), style="dim"),
            Text(pct(row.prevalence_before), justify="right"),
            Text(pct(row.prevalence_after), justify="right"),
            delta_bar(row.delta, self._scale, palette, bar_column_width(self.app.size.width)),
            Text(
                pvalue(row.q_value) if row.tested else "untst",
                justify="right",
                style="bold" if (row.q_value or 1) <= 0.05 else "",
            ),
        ]

    def restyle(self) -> None:
        table = self.query_one(PagedTable)
        cursor = table.cursor_row
        total = table.total
        self._label_width = table.reset(total, columns(self.app.size.width), self.app.size.width)
        table.add_page(((f"{r.feature_id}:{r.kind}", partial(self._cells, r)) for r in self._rows), total)
        if self._rows:
            table.move_cursor(row=min(cursor, len(self._rows) - 1))

    def _show_filters(self) -> None:
        f = self.filter
        text = Text(" ", end="", no_wrap=True, overflow="ellipsis")
        for key, name, value in (
            ("f", "kind", f.kind or "all"),
            ("d", "dir", f.direction or "all"),
            ("s", "src", f.source or "all"),
            ("g", "q", self._q_label),
            ("o", "sort", dict((v, k) for k, v in SORTS)[f.sort]),
        ):
            text.append(f"{key}", style="bold underline")
            text.append(f" {name}:{value}  ")
        if f.search:
            text.append(f"/{f.search}  ", style="italic")
        table = self.query_one(PagedTable)
        text.append(f"{table.loaded}/{table.total} rows", style="dim")
        if self._loaded and not table.total:
            text.append("  none: loosen the filters (g shows untested too), or run `rldiff analyze`", style="italic")
        self.query_one("#delta-filters", Static).update(text)

    # -- actions ---------------------------------------------------------------------------------------------

    def watch_filter(self) -> None:
        self._show_filters()
        self.reload()

    def action_cycle_kind(self) -> None:
        self.filter = replace(self.filter, kind=_cycle(KINDS, self.filter.kind))

    def action_cycle_direction(self) -> None:
        self.filter = replace(self.filter, direction=_cycle(DIRECTION_FILTERS, self.filter.direction))

    def action_cycle_source(self) -> None:
        self.filter = replace(self.filter, source=_cycle(SOURCE_FILTERS, self.filter.source))

    def action_cycle_q(self) -> None:
        labels = [q[0] for q in Q_FILTERS]
        label, max_q, tested_only = Q_FILTERS[(labels.index(self._q_label) + 1) % len(Q_FILTERS)]
        self._q_label = label
        self.filter = replace(self.filter, max_q=max_q, tested_only=tested_only)

    def action_cycle_sort(self) -> None:
        keys = [s[1] for s in SORTS]
        self.filter = replace(self.filter, sort=keys[(keys.index(self.filter.sort) + 1) % len(keys)])

    def action_search(self) -> None:
        self.query_one(SearchBox).open()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "delta-search" and event.value.strip() != self.filter.search:
            self.filter = replace(self.filter, search=event.value.strip())

    def on_row_table_row_selected(self, event: PagedTable.RowSelected) -> None:
        self._open(event.cursor_row)

    def action_open_feature(self) -> None:
        self._open(self.query_one(PagedTable).cursor_row)

    def _open(self, index: int) -> None:
        if 0 <= index < len(self._rows):
            row = self._rows[index]
            self.rldiff.open_feature(row.feature_id, row.kind)
