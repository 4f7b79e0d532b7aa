"""A search line above a table, hidden until asked for: Enter goes back to the table, Escape clears it."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input

from tui.widgets.paged_table import PagedTable


class SearchBox(Input):
    """Typing filters as you go (the screen handles `Input.Changed`)."""

    DEFAULT_CSS = "SearchBox { height: 3; display: none; }"
    BINDINGS = [Binding("escape", "close", "Clear search", show=False)]

    def open(self) -> None:
        self.display = True
        self.focus()

    def action_close(self) -> None:
        self.value = ""
        self.display = False
        self.screen.query_one(PagedTable).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.screen.query_one(PagedTable).focus()
