"""`rldiff tui STORE`: keyboard triage of a study over SSH. Start with `run(store_path)`.

This module and everything it imports at start-up stay light: no torch, transformers, sae_lens, hdbscan or
anthropic, and the store package (duckdb, polars, pyarrow) is imported by the worker that opens the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from textual import events
from textual.app import App
from textual.binding import BindingType
from textual.screen import Screen
from textual.worker import get_current_worker

from engine.errors import InputError
from tui import keymap
from tui.commands import JumpProvider
from tui.idle_gc import IDLE_SECONDS, IdleCollector
from tui.jobs import JobRunner
from tui.messages import StoreStatusChanged
from tui.screens.clusters import ClustersScreen
from tui.screens.deltas import DeltasScreen
from tui.screens.feature import FeatureScreen, load_feature
from tui.screens.help import HelpScreen
from tui.screens.hypotheses import HypothesesScreen
from tui.screens.overview import OverviewScreen
from tui.screens.rollouts import RolloutsScreen, RolloutViewerScreen, load_transcript
from tui.session import StoreSession, StoreUnavailable
from tui.themes import DEFAULT_THEME, load_themes, variable_defaults

if TYPE_CHECKING:
    from tui.host import StudyHost

log = logging.getLogger(__name__)
WARM_UP_AFTER_S = 1.0  # after the store opens: the overview's own queries go first
T = TypeVar("T")
S = TypeVar("S", bound=Screen[Any])


class RldiffApp(JobRunner):
    CSS_PATH = Path(__file__).parent / "app.tcss"  # absolute, so subclasses elsewhere find it
    TITLE = "rldiff"
    MODES = {
        "overview": OverviewScreen,
        "deltas": DeltasScreen,
        "clusters": ClustersScreen,
        "hypotheses": HypothesesScreen,
        "rollouts": RolloutsScreen,
    }
    BINDINGS: ClassVar[list[BindingType]] = [*keymap.APP]
    COMMANDS = App.COMMANDS | {JumpProvider}
    COMMAND_PALETTE_BINDING = "ctrl+p"

    def __init__(
        self,
        store_path: str | Path,
        *,
        theme: str | None = None,
        keymap_path: Path | None = None,
        theme_dirs: list[Path] | None = None,
        retry_seconds: float = 3.0,
    ) -> None:
        super().__init__(StoreSession(store_path))
        self.compared: tuple[str | None, str | None] = (None, None)
        self.checkpoints: list[str] = []
        self.keymap_overrides, self._problems = keymap.load_keymap(keymap_path)
        self._theme_name = theme
        self._theme_dirs = theme_dirs
        self._retry_seconds = retry_seconds
        self._collector = IdleCollector()
        self._warmed = False

    # -- start-up ------------------------------------------------------------------------------------------

    def on_mount(self) -> None:
        themes, problems = load_themes(self._theme_dirs)
        for theme in themes:
            self.register_theme(theme)
        self._problems += problems
        wanted = self._theme_name or DEFAULT_THEME
        if wanted in self.available_themes:
            self.theme = wanted
        else:
            self._problems.append(f"no theme named {wanted!r}; have: {', '.join(sorted(self.available_themes))}")
        self.set_keymap(self.keymap_overrides)
        for problem in self._problems:
            log.warning("%s", problem)
            self.notify(problem, title="configuration", severity="warning", timeout=8)
        self.switch_mode("overview")
        self._open_store()
        self.set_interval(self._retry_seconds, self._retry_store)
        self.set_interval(IDLE_SECONDS / 2, self._collector.tick)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            self._collector.input()
        await super().on_event(event)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return variable_defaults(self.current_theme)

    def _open_store(self) -> None:
        def work() -> None:
            status = self.session.open()
            if status.readable:
                from engine.store import queries

                with self.session.cursor() as cur:
                    compared = queries.compared_checkpoints(cur)
                    names = queries.checkpoint_names(cur)
                self.call_from_thread(self._store_opened, compared, names)
            self.post_message(StoreStatusChanged(status))

        self.run_worker(work, thread=True, group="store-open", exclusive=True, exit_on_error=False)

    def _store_opened(self, compared: tuple[str | None, str | None], names: list[str]) -> None:
        self.compared, self.checkpoints = compared, names
        self._collector.start()  # the libraries are loaded now
        if not self._warmed:
            self._warmed = True
            self.set_timer(WARM_UP_AFTER_S, self._warm_up)

    def _warm_up(self) -> None:
        """Once the overview is up, run the other screens' first queries and drop the results: the first
        visit of a screen then reads from DuckDB's warm caches (12 ms, not 30-60 ms cold)."""

        def work() -> None:
            from engine.store import queries

            try:
                with self.session.cursor() as cur:
                    queries.delta_page(cur, queries.DeltaFilter())
                    queries.clusters(cur)
                    queries.hypotheses(cur)
                    queries.rollout_page(cur)
            except StoreUnavailable:
                pass  # nothing to warm; the screens will say why

        self.run_worker(work, thread=True, group="warm-up", exit_on_error=False)

    def _retry_store(self) -> None:
        running = self.hypothesis_test is not None and not self.hypothesis_test.finished
        if self.store_status.retry and not running and not self._closing:
            self._open_store()

    def on_store_status_changed(self, message: StoreStatusChanged) -> None:
        self.store_status = message.status

    # -- navigation ------------------------------------------------------------------------------------------

    def open_feature(self, feature_id: int, kind: str | None = None) -> None:
        self._open_loaded(
            load_feature(feature_id),
            FeatureScreen,
            lambda loaded: FeatureScreen(feature_id, kind, loaded),
            lambda screen, loaded: screen.show(feature_id, kind, loaded),
        )

    def open_rollout(self, rollout_key: int, *, segment_id: int | None = None) -> None:
        self._open_loaded(
            load_transcript(rollout_key),
            RolloutViewerScreen,
            lambda loaded: RolloutViewerScreen(rollout_key, segment_id=segment_id, loaded=loaded),
            lambda screen, loaded: screen.show(rollout_key, segment_id, loaded),
        )

    def _open_loaded(
        self,
        load: Callable[[Any], T],
        kind: type[S],
        new: Callable[[T], S],
        show: Callable[[S, T], None],
    ) -> None:
        """Load a screen's data in a worker, then put it up with the data in place, so it opens complete.

        Each mode keeps one screen of each `kind` installed and shows new data in it (`show`), rather than
        building a screen per item: composing and styling a screen's widgets costs more than the query."""

        def put_up(data: T) -> None:
            name = f"{kind.__name__}:{self.current_mode}"
            screen = self.get_screen(name) if self.is_screen_installed(name) else None
            if screen is None or screen in self.screen_stack:  # new, or deeper in this stack: a screen of its own
                screen = new(data)
                if not self.is_screen_installed(name):
                    self.install_screen(screen, name)
            elif isinstance(screen, kind):
                show(screen, data)
            self.push_screen(screen)

        def work() -> None:
            worker = get_current_worker()
            try:
                with self.session.cursor() as cur:
                    data = load(cur)
            except StoreUnavailable as exc:
                self.call_from_thread(self.notify, str(exc), title="store unavailable", severity="warning")
                return
            except Exception as exc:  # shown to the user; the app keeps running
                log.exception("loading a screen failed")
                self.call_from_thread(self.notify, f"{type(exc).__name__}: {exc}", severity="error")
                return
            if not worker.is_cancelled:
                self.call_from_thread(put_up, data)

        self.run_worker(work, thread=True, group="open-screen", exclusive=True, exit_on_error=False)

    def jump(self, category: str, item_id: int) -> None:
        """Go to a feature, cluster, hypothesis or rollout (the command palette's targets)."""
        if category == "feature":
            self.open_feature(item_id)
        elif category == "rollout":
            self.open_rollout(item_id)
        elif category in ("cluster", "hypothesis"):
            self.call_later(self._select_in_mode, category, item_id)

    async def _select_in_mode(self, category: str, item_id: int) -> None:
        await self.switch_mode("clusters" if category == "cluster" else "hypotheses")
        while len(self.screen_stack) > 1:
            self.pop_screen()
        screen = self.screen
        if isinstance(screen, ClustersScreen):
            screen.select_cluster(item_id)
        elif isinstance(screen, HypothesesScreen):
            screen.select(item_id)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.keymap_overrides))

    def action_next_theme(self) -> None:
        names = sorted(self.available_themes)
        ours = [n for n in names if n.startswith("rldiff-")] or names
        self.theme = ours[(ours.index(self.theme) + 1) % len(ours)] if self.theme in ours else ours[0]
        self.notify(f"theme: {self.theme}", timeout=2)

    # -- shutdown --------------------------------------------------------------------------------------------

    def on_unmount(self) -> None:
        self.stop_jobs()
        self._collector.stop()
        self.session.close()


if TYPE_CHECKING:
    # Screens and the command palette reach this app through the StudyHost protocol (a cast of `self.app`):
    # here `make lint` (mypy) checks that the app has every member the protocol promises.
    _HOST: type[StudyHost] = RldiffApp


def run(store_path: str | Path, *, theme: str | None = None) -> None:
    """Open the TUI on a study store (`rldiff tui STORE [--theme NAME]`). Raises InputError if there is none."""
    path = Path(store_path)
    if not path.is_file():
        raise InputError(f"{path}: no such store (create one with `rldiff ingest` or `rldiff compare`)")
    RldiffApp(path, theme=theme).run()
