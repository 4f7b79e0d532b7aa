"""Status lines: the screen switcher at the top, the store banner under it and the key hints at the bottom."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static

from tui.keymap import keys_for
from tui.session import StoreStatus

SCREENS = (
    ("overview", "Overview"),
    ("deltas", "Deltas"),
    ("clusters", "Clusters"),
    ("hypotheses", "Hypotheses"),
    ("rollouts", "Rollouts"),
)


class NavBar(Static):
    """`rldiff  1 Overview  2 Deltas ...` with the current screen marked; `?` for help."""

    DEFAULT_CSS = """
    NavBar { height: 1; background: $panel; color: $foreground-muted; }
    """

    def __init__(self, current: str, store_name: str) -> None:
        super().__init__()
        self.current = current
        self.store_name = store_name

    def on_mount(self) -> None:
        text = Text(" rldiff ", style="bold", end="", no_wrap=True, overflow="ellipsis")
        for number, (mode, title) in enumerate(SCREENS, start=1):
            style = "bold reverse" if mode == self.current else ""
            text.append(f" {number} {title} ", style=style)
        text.append("  ? help  ")
        text.append(self.store_name, style="italic")
        self.update(text)


class StoreBanner(Static):
    """Says why the store cannot be written or read, when that is so; hidden otherwise."""

    DEFAULT_CSS = """
    StoreBanner { height: auto; max-height: 2; background: $warning 30%; color: $foreground; display: none; }
    StoreBanner.-error { background: $error 40%; }
    """

    def show_status(self, status: StoreStatus) -> None:
        self.display = status.mode != "read-write" and bool(status.message)
        self.set_class(status.mode in ("failed", "locked"), "-error")
        self.update(Text(f" ⚠ {status.message}", end=""))


class KeyBar(Static):
    """The screen's main keys, as remapped by the user's keymap. One line, drawn once: lighter than Textual's
    Footer, which mounts a widget per key on every screen."""

    DEFAULT_CSS = """
    KeyBar { height: 1; dock: bottom; background: $panel; color: $foreground; }
    """

    def __init__(self, bindings: Iterable[Binding], keymap: dict[str, str]) -> None:
        text = Text(end="", no_wrap=True, overflow="ellipsis")
        for binding in bindings:
            if binding.show:
                text.append(f" {keys_for(binding, keymap, first=True)} ", style="bold reverse")
                text.append(f" {binding.description} ")
        text.append(" ^p jump ", style="bold reverse")
        super().__init__(text)
