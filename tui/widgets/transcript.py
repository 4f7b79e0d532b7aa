"""A whole rollout as a scrollable transcript: roles styled, long parts folded, tool calls as highlighted JSON.

Drawn with Textual's line API: every message is wrapped to the width once and its lines kept, so a rollout of
any length opens without mounting a widget per message, and only the lines in view are drawn. A message's
reasoning, a system prompt and a long tool result start folded; `tab`/`shift+tab` move between messages,
`enter` folds or unfolds the current one, `e` (the viewer's key) unfolds every message's reasoning.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.highlighter import JSONHighlighter
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui.safe_text import clean, one_line, safe

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


BORDER = "▌ "  # a message's left edge, in its role's colour
FOCUS_BORDER = "█ "  # the message holding the segment being looked at


class Transcript(ScrollView, can_focus=True):
    """Shows one rollout under a fixed header line; `show()` replaces what is shown."""

    COMPONENT_CLASSES = {
        "transcript--head",
        "transcript--current",
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
        height: 1fr;
        & > .transcript--head { background: $panel; }
        & > .transcript--current { background: $boost; }
        &:focus > .transcript--current { background: $primary 15%; }
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
        Binding("enter,space", "toggle", "Fold/unfold", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data: TranscriptData | None = None
        self.blocks: list[MessageBlock] = []
        self.current = 0
        self._head: Text = Text()
        self._rendered: list[list[Strip]] = []  # each block's lines at `_wrap`, without the border
        self._lines: list[tuple[int, int]] = []  # (block, line within it); (-1, 0) separates two blocks
        self._starts: list[int] = []  # each block's first line
        self._wrap = 0
        self._scroll_pending = False  # once laid out, scroll to the current message (the top if none is marked)

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
        self.current = 0
        if data is None:
            self._head = Text("no such rollout", style="italic")
        else:
            self._head = transcript_header(data)
            focus = next((s for s in data.segments if s.segment_id == focus_segment), None)
            for m in data.messages:
                part = focus if focus is not None and focus.message_index == m.message_index else None
                expanded = (expand_reasoning and bool(m.reasoning)) or (part is not None and part.kind == "reasoning")
                self.blocks.append(MessageBlock(m, part, mark, expanded))
            self.current = next((i for i, b in enumerate(self.blocks) if b.focus_part is not None), 0)
        self._rendered = []
        self._scroll_pending = True
        self._layout()

    def set_reasoning(self, expanded: bool) -> None:
        for number, block in enumerate(self.blocks):
            if block.has_reasoning and block.expanded != expanded:
                block.expanded = expanded
                self._render_block(number)
        self._layout()

    # -- moving and folding ----------------------------------------------------------------------------------

    def action_next_message(self) -> None:
        if self.current + 1 < len(self.blocks):
            self._move_to(self.current + 1)
        else:
            self.screen.focus_next()

    def action_previous_message(self) -> None:
        if self.current > 0:
            self._move_to(self.current - 1)
        else:
            self.screen.focus_previous()

    def action_toggle(self) -> None:
        if self.blocks:
            block = self.blocks[self.current]
            block.expanded = not block.expanded
            self._render_block(self.current)
            self._layout()

    def _move_to(self, number: int) -> None:
        self.current = number
        start, end = self._starts[number], self._starts[number] + len(self._rendered[number])
        view = max(1, self.scrollable_content_region.height - 1)
        if start < self.scroll_y or end - start > view:
            self.scroll_to(y=start, animate=False, immediate=True, force=True)
        elif end > self.scroll_y + view:
            self.scroll_to(y=end - view, animate=False, immediate=True, force=True)
        self.refresh()

    # -- layout and drawing ----------------------------------------------------------------------------------

    def on_resize(self, event: events.Resize) -> None:
        if self._text_width() != self._wrap:
            self._rendered = []
            self._layout()

    def _text_width(self) -> int:
        """Lines wrap as if the scrollbar were there: it comes and goes with the length of what is shown."""
        return max(10, self.size.width - self.styles.scrollbar_size_vertical - len(BORDER) - 1)

    def _render_block(self, number: int) -> None:
        if number < len(self._rendered):
            console = self.app.console
            options = console.options.update(width=self._wrap, no_wrap=False, overflow="fold", height=None)
            lines = console.render_lines(self.blocks[number].text(), options, pad=False)
            self._rendered[number] = [Strip(line) for line in lines]

    def _layout(self) -> None:
        """(Re)wrap what is not wrapped at the current width and lay the lines out."""
        if self.size.width == 0:  # not laid out yet: on_resize will
            return
        self._wrap = self._text_width()
        while len(self._rendered) < len(self.blocks):
            self._rendered.append([])
            self._render_block(len(self._rendered) - 1)
        self._lines, self._starts = [], []
        for number, lines in enumerate(self._rendered):
            if number:
                self._lines.append((-1, 0))
            self._starts.append(len(self._lines))
            self._lines.extend((number, i) for i in range(len(lines)))
        self.virtual_size = Size(self._wrap + len(BORDER) + 1, len(self._lines) + 1)
        if self._scroll_pending:
            self._scroll_pending = False
            marked = self.blocks and self.blocks[self.current].focus_part is not None
            self.scroll_to(0, self._starts[self.current] if marked else 0, animate=False, immediate=True, force=True)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        if y == 0:
            style = base + self.get_component_rich_style("transcript--head")
            head = Text(" ", end="", no_wrap=True, overflow="ellipsis").append_text(self._head)
            return Strip(head.render(self.app.console)).adjust_cell_length(width, style).apply_style(style)
        index = round(self.scroll_y) + y - 1
        if index >= len(self._lines) or self._lines[index][0] < 0:
            return Strip.blank(width, base)
        number, line = self._lines[index]
        block = self.blocks[number]
        style = base
        if number == self.current and self.has_focus:
            style += self.get_component_rich_style("transcript--current")
        if block.role in ("system", "tool"):
            style += self.get_component_rich_style("transcript--muted")
        edge = "focus" if block.focus_part is not None else "error" if block.message.is_error else block.role
        border = Segment(FOCUS_BORDER if edge == "focus" else BORDER, self._edge_style(edge))
        strip = Strip.join([Strip([border]), self._rendered[number][line]])
        return strip.adjust_cell_length(width, style).apply_style(style)

    def _edge_style(self, edge: str) -> Style:
        return Style(color=self.get_component_rich_style(f"transcript--{edge}").color)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
