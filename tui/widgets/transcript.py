"""A whole rollout as a scrollable transcript: roles styled, long parts folded, tool calls as highlighted JSON.

A block list (`tui/widgets/block_list.py`) with a block per message: a rollout of any length opens without
mounting a widget per message. A message's reasoning, a system prompt and a long tool result start folded;
`tab`/`shift+tab` move between messages, `enter` folds or unfolds the current one, `e` (the viewer's key)
unfolds every message's reasoning.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.highlighter import JSONHighlighter
from rich.style import Style
from rich.text import Text
from textual.binding import Binding

from engine.safe_text import clean, one_line, safe
from tui.widgets.block_list import EDGE, MARKED_EDGE, BlockList

if TYPE_CHECKING:
    from engine.store.queries import MessageRow, SegmentRow
    from engine.store.queries import Transcript as TranscriptData

_JSON = JSONHighlighter()
FOLD_CHARS = 600  # tool results longer than this start folded, as system prompts and reasoning do


def tool_call_text(call: dict[str, Any]) -> Text:
    """`name(arguments)` with the arguments as indented, highlighted JSON (cleaned of control sequences)."""
    args = call.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            pass
    body = json.dumps(args, indent=2, ensure_ascii=False) if not isinstance(args, str) else args
    text = Text("→ ", style="bold", end="")
    text.append_text(safe(str(call.get("name") or "?"), "bold"))
    text.append(" ")
    text.append_text(_JSON(Text(clean(body), end="")))
    return text


def transcript_header(data: TranscriptData) -> Text:
    """checkpoint · task · trial · reward · split · rollout id (ids can be long UUIDs: last)."""
    r = data.rollout
    text = Text(end="", no_wrap=True, overflow="ellipsis")
    text.append_text(safe(r.checkpoint, "bold", max_chars=24))
    text.append(f" · task {clean(r.task_id)[:30]}")
    if r.trial is not None:
        text.append(f" · trial {r.trial}")
    text.append(f" · reward {'—' if r.reward is None else f'{r.reward:g}'}")
    if r.split:
        text.append(f" · {r.split}", style="dim")
    text.append(" · ")
    text.append_text(safe(r.rollout_id, "dim", max_chars=40))
    return text


def _fold(title: str, body: str, expanded: bool, preview: bool = False) -> Text:
    """A foldable part: '▶ title' (with the start of `body` when `preview`) or '▼ title' and the body."""
    text = Text(f"{'▼' if expanded else '▶'} {title} · {len(body)} chars", style="dim", end="")
    if expanded:
        text.append("\n")
        text.append_text(safe(body))
    elif preview:
        text.append(": ", style="dim")
        text.append_text(one_line(body, 48))
    return text


@dataclass
class MessageBlock:
    """One message of a transcript, and the segment being looked at when it is in this message."""

    message: MessageRow
    focus_part: SegmentRow | None
    mark: str
    expanded: bool = False

    @property
    def has_reasoning(self) -> bool:
        return bool(self.message.reasoning)

    @property
    def role(self) -> str:
        return self.message.role if self.message.role in ("system", "user", "assistant", "tool") else "other"

    def _marked(self, text: Text, kind: str, part: int = 0) -> Text:
        focus = self.focus_part
        if focus is not None and focus.kind == kind and focus.part_index == part:
            text.stylize(self.mark)
        return text

    def text(self) -> Text:
        m = self.message
        text = Text(f"{m.role} #{m.message_index}", style="bold", end="")
        if m.role == "tool":
            text.append(" result")
            if m.name:
                text.append(" · ")
                text.append_text(safe(m.name, max_chars=40))
            if m.is_error:
                text.append(" · error", style="bold")
        parts: list[Text] = []
        if m.reasoning:
            parts.append(self._marked(_fold("reasoning", m.reasoning, self.expanded), "reasoning"))
        if m.content:
            if m.role == "system" or (m.role == "tool" and len(m.content) > FOLD_CHARS):
                title = "system prompt" if m.role == "system" else "result"
                parts.append(_fold(title, m.content, self.expanded, preview=True))
            else:
                parts.append(self._marked(safe(m.content.strip("\n")), "text"))
        for i, call in enumerate(m.tool_calls):
            parts.append(self._marked(tool_call_text(call), "tool_call", i))
        for part in parts:
            text.append("\n")
            text.append_text(part)
        return text


class Transcript(BlockList):
    """Shows one rollout, a message per block, under a fixed header line; `show()` replaces what is shown."""

    COMPONENT_CLASSES = {
        "transcript--muted",
        "transcript--user",
        "transcript--assistant",
        "transcript--system",
        "transcript--tool",
        "transcript--other",
        "transcript--error",
        "transcript--focus",
    }
    DEFAULT_CSS = """
    Transcript {
        & > .transcript--muted { color: $foreground-muted; }
        & > .transcript--user { color: $secondary; }
        & > .transcript--assistant { color: $primary; }
        & > .transcript--system { color: $foreground-muted; }
        & > .transcript--tool { color: $accent; }
        & > .transcript--other { color: $panel-lighten-2; }
        & > .transcript--error { color: $error; }
        & > .transcript--focus { color: $warning; }
    }
    """
    BINDINGS = [
        Binding("tab", "next_message", "Next message", show=False),
        Binding("shift+tab", "previous_message", "Previous message", show=False),
        Binding("enter,space", "fold", "Fold/unfold", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data: TranscriptData | None = None
        self.blocks: list[MessageBlock] = []

    def show(
        self,
        data: TranscriptData | None,
        focus_segment: int | None = None,
        *,
        mark: str = "reverse",
        expand_reasoning: bool = False,
    ) -> None:
        """Replace the transcript; scroll to the segment `focus_segment` (styled with `mark`) when given."""
        self.data = data
        self.blocks = []
        if data is None:
            self.set_blocks(0, head=Text("no such rollout", style="italic"))
            return
        focus = next((s for s in data.segments if s.segment_id == focus_segment), None)
        for m in data.messages:
            part = focus if focus is not None and focus.message_index == m.message_index else None
            expanded = (expand_reasoning and bool(m.reasoning)) or (part is not None and part.kind == "reasoning")
            self.blocks.append(MessageBlock(m, part, mark, expanded))
        marked = next((i for i, b in enumerate(self.blocks) if b.focus_part is not None), None)
        self.set_blocks(
            len(self.blocks), head=transcript_header(data), current=marked or 0, scroll_to=marked is not None
        )

    def set_reasoning(self, expanded: bool) -> None:
        changed = [i for i, b in enumerate(self.blocks) if b.has_reasoning and b.expanded != expanded]
        for i in changed:
            self.blocks[i].expanded = expanded
        self.rewrap(*changed)

    def action_next_message(self) -> None:
        if self.current + 1 < len(self.blocks):
            self.move_to(self.current + 1)
        else:
            self.screen.focus_next()

    def action_previous_message(self) -> None:
        if self.current > 0:
            self.move_to(self.current - 1)
        else:
            self.screen.focus_previous()

    def action_fold(self) -> None:
        if self.blocks:
            block = self.blocks[self.current]
            block.expanded = not block.expanded
            self.rewrap(self.current)

    def block_text(self, index: int) -> Text:
        return self.blocks[index].text()

    def block_edge(self, index: int) -> tuple[str, Style]:
        block = self.blocks[index]
        edge = "focus" if block.focus_part is not None else "error" if block.message.is_error else block.role
        return (MARKED_EDGE if edge == "focus" else EDGE), Style(
            color=self.get_component_rich_style(f"transcript--{edge}").color
        )

    def block_style(self, index: int) -> Style:
        muted = self.blocks[index].role in ("system", "tool")
        return self.get_component_rich_style("transcript--muted") if muted else Style()
