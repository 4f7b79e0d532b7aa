"""Screen 5: rollouts by task and checkpoint, and the rollout viewer (alone or side by side)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widgets import Input, Static

from engine.kinds import HELDOUT
from engine.safe_text import one_line, safe
from tui import keymap
from tui.messages import HeldoutViewLogged, RolloutPageLoaded, TranscriptLoaded
from tui.screens.base import RldiffScreen
from tui.widgets.paged_table import PagedTable
from tui.widgets.search_box import SearchBox
from tui.widgets.transcript import Transcript

if TYPE_CHECKING:
    import duckdb

    from engine.store.queries import RolloutRow

PAGE = 200
COLUMNS = (
    ("task", None),
    ("checkpoint", 14),
    ("rollout", None),
    ("trial", 5),
    ("reward", 6),
    ("split", 5),
    ("msgs", 4),
    ("segs", 4),
)


class RolloutsScreen(RldiffScreen):
    NAV = "rollouts"
    AUTO_FOCUS = "#rollouts"
    BINDINGS: ClassVar[list[BindingType]] = [*keymap.ROLLOUTS]

    checkpoint: reactive[str | None] = reactive(None, init=False)  # None: every checkpoint
    search: reactive[str] = reactive("", init=False)

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[RolloutRow] = []
        self._width = 12

    def compose_body(self) -> ComposeResult:
        yield Static(id="rollout-filters")
        yield SearchBox(
            placeholder="search task or rollout id (Enter: back to the table, Esc: clear)", id="rollout-search"
        )
        yield PagedTable(id="rollouts")

    def on_mount(self) -> None:
        table = self.query_one(PagedTable)
        self._width = table.reset(0, COLUMNS, self.app.size.width)
        super().on_mount()

    def reload(self) -> None:
        self._load(0)

    def _load(self, offset: int) -> None:
        from engine.store import queries

        checkpoint, search = self.checkpoint, self.search
        self.run_query(
            "rollouts" if offset == 0 else "rollouts-more",
            lambda cur: queries.rollout_page(cur, checkpoint, search, offset, PAGE),
            lambda page: RolloutPageLoaded(page, checkpoint, search),
        )

    def on_rollout_page_loaded(self, message: RolloutPageLoaded) -> None:
        if (message.checkpoint, message.search) != (self.checkpoint, self.search):
            return
        page, table = message.page, self.query_one(PagedTable)
        if page.offset == 0:
            self._rows = []
            self._width = table.reset(page.total, COLUMNS, self.app.size.width)
        elif page.offset != len(self._rows):
            return
        self._rows += page.rows
        table.add_page(((str(r.rollout_key), partial(self._cells, r)) for r in page.rows), page.total)
        self._show_filters()

    def on_paged_table_more_wanted(self, message: PagedTable.MoreWanted) -> None:
        self._load(message.offset)

    def _cells(self, r: RolloutRow) -> list[Text]:
        palette = self.palette
        style = palette.after if r.checkpoint == self.rldiff.compared[1] else palette.before
        return [
            one_line(r.task_id, self._width),
            safe(r.checkpoint, style, max_chars=14),
            one_line(r.rollout_id, self._width),
            Text("" if r.trial is None else str(r.trial)),
            Text("—" if r.reward is None else f"{r.reward:g}"),
            Text((r.split or "")[:4]),
            Text(str(r.n_messages)),
            Text(str(r.n_segments)),
        ]

    def _show_filters(self) -> None:
        text = Text(" ", end="", no_wrap=True, overflow="ellipsis")
        text.append("c", style="bold underline")
        text.append(" checkpoint:")
        text.append_text(safe(self.checkpoint or "all", max_chars=30))
        if self.search:
            text.append(f"  /{self.search}", style="italic")
        table = self.query_one(PagedTable)
        text.append(f"  {table.loaded}/{table.total} rollouts", style="dim")
        self.query_one("#rollout-filters", Static).update(text)

    def restyle(self) -> None:
        table = self.query_one(PagedTable)
        cursor, total = table.cursor_row, table.total
        self._width = table.reset(total, COLUMNS, self.app.size.width)
        table.add_page(((str(r.rollout_key), partial(self._cells, r)) for r in self._rows), total)
        if self._rows:
            table.move_cursor(row=min(cursor, len(self._rows) - 1))

    def watch_checkpoint(self) -> None:
        self.reload()
        self._show_filters()

    def watch_search(self) -> None:
        self.reload()

    def action_cycle_checkpoint(self) -> None:
        options = [None, *self.rldiff.checkpoints]
        self.checkpoint = (
            options[(options.index(self.checkpoint) + 1) % len(options)] if self.checkpoint in options else None
        )

    def action_search(self) -> None:
        self.query_one(SearchBox).open()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.search = event.value.strip()

    def on_row_table_row_selected(self, event: PagedTable.RowSelected) -> None:
        self.action_open_rollout()

    def action_open_rollout(self) -> None:
        table = self.query_one(PagedTable)
        if 0 <= table.cursor_row < len(self._rows):
            self.rldiff.open_rollout(self._rows[table.cursor_row].rollout_key)


def load_transcript(
    rollout_key: int, side_by_side: bool = False
) -> Callable[[duckdb.DuckDBPyConnection], TranscriptLoaded]:
    """A rollout's transcript, the same task's rollouts in the other checkpoints, and the first of those
    (side by side)."""

    def load(cur: duckdb.DuckDBPyConnection) -> TranscriptLoaded:
        from engine.store import queries

        counterparts = queries.counterpart_rollouts(cur, rollout_key)
        other = queries.transcript(cur, counterparts[0].rollout_key) if side_by_side and counterparts else None
        return TranscriptLoaded(queries.transcript(cur, rollout_key), counterparts, other)

    return load


def log_heldout_view(cur: duckdb.DuckDBPyConnection) -> None:
    """Log that the TUI showed a held-out rollout (docs/statistics.md, "No leaks")."""
    from engine.hypotheses.exposure import record_heldout_view

    record_heldout_view(cur, "tui")


class RolloutViewerScreen(RldiffScreen):
    """One rollout's transcript; `o` jumps to the same task in the other checkpoint, `s` shows both."""

    NAV = "rollouts"
    AUTO_FOCUS = "#main-transcript"
    BINDINGS: ClassVar[list[BindingType]] = [*keymap.VIEWER]

    def __init__(self, rollout_key: int, *, segment_id: int | None = None, loaded: TranscriptLoaded | None = None):
        """`loaded`: the transcript when the opener already has it (then the screen opens complete)."""
        super().__init__()
        self.rollout_key = rollout_key
        self.segment_id = segment_id
        self.side_by_side = False
        self.expanded = False
        self.counterparts: list[RolloutRow] = []
        self._loaded = loaded
        self._stale = loaded is None
        self._heldout_logged = False  # one log entry per viewer: the first held-out rollout it shows

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="viewer"):
            yield Transcript(id="main-transcript")
            yield Transcript(id="other-transcript")

    def on_mount(self) -> None:
        self.query_one("#other-transcript").display = False
        super().on_mount()
        if self._loaded is not None:
            self.on_transcript_loaded(self._loaded)

    def reload(self) -> None:
        self.run_query("transcript", load_transcript(self.rollout_key, self.side_by_side), lambda loaded: loaded)

    def show(self, rollout_key: int, segment_id: int | None, loaded: TranscriptLoaded) -> None:
        """Show another rollout in this screen (the app reuses it), alone and with reasoning folded."""
        self.rollout_key, self.segment_id = rollout_key, segment_id
        self.side_by_side = self.expanded = False
        self.on_transcript_loaded(loaded)

    def on_transcript_loaded(self, message: TranscriptLoaded) -> None:
        self.counterparts = message.counterparts
        main = self.query_one("#main-transcript", Transcript)
        other = self.query_one("#other-transcript", Transcript)
        mark = self.palette.highlight_style(0.6)
        main.show(message.transcript, self.segment_id, mark=mark, expand_reasoning=self.expanded)
        other.display = self.side_by_side
        if self.side_by_side:
            other.show(message.other, expand_reasoning=self.expanded)
        main.focus()
        shown = [t.rollout.split for t in (message.transcript, message.other) if t is not None]
        if not self._heldout_logged and HELDOUT in shown:
            self._heldout_logged = True
            self.run_query("save-heldout-view", log_heldout_view, lambda _: HeldoutViewLogged(), write=True)

    def on_heldout_view_logged(self, message: HeldoutViewLogged) -> None:
        self.notify("a held-out rollout: hypotheses written from now on are exploratory (tested, never validated)")

    def action_other_checkpoint(self) -> None:
        """Show the same task's rollout in the other checkpoint (the same trial when there is one)."""
        if not self.counterparts:
            self.notify("no rollout of this task in another checkpoint", severity="warning")
            return
        self.rollout_key, self.segment_id = self.counterparts[0].rollout_key, None
        self.reload()

    def action_side_by_side(self) -> None:
        self.side_by_side = not self.side_by_side
        self.reload()

    def action_toggle_reasoning(self) -> None:
        self.expanded = not self.expanded
        for transcript in self.query(Transcript):
            transcript.set_reasoning(self.expanded)
