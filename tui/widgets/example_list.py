"""A feature's top-activating segments: where each comes from, and its text with tokens shaded by activation.

A block list (`tui/widgets/block_list.py`) with a block per example, edged in its checkpoint's colour; up and
down move between examples, enter selects one (`ExampleList.Selected`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.message import Message

from tui.widgets.block_list import EDGE, BlockList


@dataclass(frozen=True)
class ExampleItem:
    key: str
    text: Text
    edge: Style


class ExampleList(BlockList):
    SEPARATED = False
    BINDINGS = [
        Binding("up", "previous_block", "Previous example", show=False),
        Binding("down", "next_block", "Next example", show=False),
        Binding("enter", "select", "Open", show=False),
    ]

    @dataclass
    class Selected(Message):
        examples: ExampleList
        key: str

        @property
        def control(self) -> ExampleList:
            return self.examples

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.items: Sequence[ExampleItem] = ()

    def show(self, items: Sequence[ExampleItem], *, empty: str = "nothing to show", current: int = 0) -> None:
        """Replace the examples (`empty` says why when there are none); `current` is the one selected."""
        self.items = items
        self.set_blocks(len(items), head=None if items else Text(empty, style="italic"), current=current)

    def action_select(self) -> None:
        if self.items:
            self.post_message(self.Selected(self, self.items[self.current].key))

    def block_text(self, index: int) -> Text:
        return self.items[index].text

    def block_edge(self, index: int) -> tuple[str, Style]:
        return EDGE, self.items[index].edge
