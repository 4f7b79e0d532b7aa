"""What every rldiff screen shares: the top bars, the key bar, and running store work in thread workers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.worker import get_current_worker

from tui import keymap
from tui.messages import QueryFailed
from tui.session import StoreReadOnly, StoreStatus, StoreUnavailable
from tui.themes import Palette
from tui.widgets.banner import KeyBar, NavBar, StoreBanner

if TYPE_CHECKING:
    import duckdb

    from tui.host import StudyHost

log = logging.getLogger(__name__)
T = TypeVar("T")

# StoreWork is mixed into screens and modal screens: the type checker sees the Screen it is part of. At run time
# it stays a plain mixin, because Textual takes a screen's default CSS (and CSS type names) along each class's
# first widget base only: a Screen base here would hide ModalScreen's from `class X(StoreWork, ModalScreen)`.
if TYPE_CHECKING:
    _ScreenBase = Screen[Any]
else:
    _ScreenBase = object


class StoreWork(_ScreenBase):
    """Store queries and writes in thread workers, for screens and modal screens."""

    _stale: bool

    @property
    def rldiff(self) -> StudyHost:
        # Screens run only inside tui.app.RldiffApp, which mypy checks against StudyHost there: the cast names
        # that app by its protocol, so that screens never import it.
        return cast("StudyHost", self.app)

    @property
    def palette(self) -> Palette:
        return Palette.from_variables(self.app.theme_variables)

    def run_query(
        self,
        what: str,
        fn: Callable[[duckdb.DuckDBPyConnection], T],
        done: Callable[[T], Message],
        *,
        write: bool = False,
    ) -> None:
        """Run `fn(cursor)` in a thread worker and post `done(result)` back; a newer call with the same
        `what` supersedes an older one (its result is dropped). Failures come back as `QueryFailed`."""
        session = self.rldiff.session
        post = self.post_message

        def work() -> None:
            worker = get_current_worker()
            try:
                with session.writer() if write else session.cursor() as cur:
                    result = fn(cur)
            except (StoreUnavailable, StoreReadOnly) as exc:
                self._stale = self._stale or not write
                post(QueryFailed(what, str(exc), unavailable=True))
                return
            except Exception as exc:  # shown to the user; the app keeps running
                log.exception("%s failed", what)
                post(QueryFailed(what, f"{type(exc).__name__}: {exc}", unavailable=False))
                return
            if not worker.is_cancelled:
                post(done(result))

        self.run_worker(work, name=what, group=what, thread=True, exclusive=True, exit_on_error=False)

    def on_query_failed(self, message: QueryFailed) -> None:
        if not message.unavailable:
            self.notify(message.error, title=f"{message.what} failed", severity="error")
        elif message.what.startswith("save"):
            self.notify(message.error, title="not saved", severity="warning")


class RldiffScreen(StoreWork, Screen[Any]):
    """A screen over the store. Subclasses compose their body in `compose_body` and load data in `reload`."""

    NAV = "overview"

    def __init__(self) -> None:
        super().__init__()
        self._stale = True
        self._width = 0
        # Textual re-parses every stylesheet and restyles the whole app (twice, 40 ms here) the first time it
        # shows a screen whose CSS generation differs from the app's, which a new screen's always does. A new
        # screen's widgets are styled as they mount, so it starts at the app's generation; a theme change
        # after this still makes it differ, and still restyles it when it comes back.
        self._css_update_count = self.app._css_update_count

    def compose(self) -> ComposeResult:
        yield NavBar(self.NAV, self.rldiff.session.path.name)
        yield StoreBanner()
        yield from self.compose_body()
        shown = [b for b in [*self.BINDINGS, *keymap.APP] if isinstance(b, Binding)]
        yield KeyBar(shown, self.rldiff.keymap_overrides)

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.watch(self.app, "store_status", self._store_status_changed)
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.restyle())

    def _store_status_changed(self, status: StoreStatus) -> None:
        self.query_one(StoreBanner).show_status(status)
        if status.readable and self._stale:
            self._stale = False
            self.reload()

    def on_resize(self, event: events.Resize) -> None:
        """Tables size their columns to the terminal: lay them out again when its width changes (a screen
        coming back into view gets a resize too, and must not redraw everything for it)."""
        if event.size.width != self._width:
            self._width = event.size.width
            self.restyle()

    def reload(self) -> None:
        """Load (again) everything the screen shows."""

    def restyle(self) -> None:
        """Redraw what carries theme colours in Rich text (the theme changed)."""
