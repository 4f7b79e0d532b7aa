"""The help screen: what each screen is for and every key binding, as remapped by the user's keymap."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.keymap import GROUPS, config_dir, keys_for

ABOUT = (
    "rldiff compares rollouts of two checkpoints, before and after a training step.\n"
    "• 1 Overview: the study, success rates, pipeline stages, top findings.\n"
    "• 2 Deltas: every feature's change, ranked; Enter opens a feature with its evidence.\n"
    "• 3 Clusters: features that change together.\n"
    "• 4 Hypotheses: findings validated on held-out data; triage them here.\n"
    "• 5 Rollouts: read transcripts, side by side across checkpoints.\n"
    "• ctrl+p: jump to a feature, cluster, hypothesis or rollout by name.\n"
    "Bindings are remapped by id in "
)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, keymap: dict[str, str]) -> None:
        super().__init__()
        self.keymap = keymap

    def compose(self) -> ComposeResult:
        table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, 1), expand=True)
        table.add_column("where", no_wrap=True)
        table.add_column("keys", no_wrap=True)
        table.add_column("does")
        table.add_column("binding id", style="dim", no_wrap=True)
        for group, bindings in GROUPS.items():
            for i, b in enumerate(bindings):
                table.add_row(group if i == 0 else "", keys_for(b, self.keymap), b.description, b.id or "")
        about = Text(ABOUT, end="")
        about.append(str(config_dir() / "keymap.toml"), style="italic")
        about.append(".  Esc closes this help.\n")
        with VerticalScroll(classes="dialog tall"):
            yield Static(Group(Text("rldiff keys", style="bold"), about, table))
