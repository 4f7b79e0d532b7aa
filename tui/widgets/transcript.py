"""A whole rollout as a scrollable transcript: roles styled, long parts folded, tool calls as highlighted JSON.

One widget per message (not one per part): a long rollout mounts in a few dozen widgets, so it opens fast.
A message's reasoning, a system prompt and a long tool result start folded; Enter on a focused message
(Tab moves between messages) unfolds them, `e` unfolds every message's reasoning.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.highlighter import JSONHighlighter
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

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


class MessageBlock(Static, can_focus=True):
    """One message of a transcript. The segment being looked at (if it is in this message) is marked."""

    BINDINGS = [Binding("enter,space", "toggle", "Fold/unfold", show=False)]

    expanded: reactive[bool] = reactive(False)

    def __init__(self, message: MessageRow, focus: SegmentRow | None, mark: str, expanded: bool = False) -> None:
        role = message.role if message.role in ("system", "user", "assistant", "tool") else "other"
        super().__init__(classes=f"msg role-{role}" + (" is-error" if message.is_error else ""))
        self.message = message
        self.focus_part = focus
        self.mark = mark
        if focus is not None:
            self.add_class("focus")
        self.set_reactive(MessageBlock.expanded, expanded or (focus is not None and focus.kind == "reasoning"))
        self.update(self._text())

    @property
    def has_reasoning(self) -> bool:
        return bool(self.message.reasoning)

    def watch_expanded(self) -> None:
        self.update(self._text())

    def action_toggle(self) -> None:
        self.expanded = not self.expanded

    def _marked(self, text: Text, kind: str, part: int = 0) -> Text:
        focus = self.focus_part
        if focus is not None and focus.kind == kind and focus.part_index == part:
            text.stylize(self.mark)
        return text

    def _text(self) -> Text:
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
                parts.append(self._marked(safe(m.content), "text"))
        for i, call in enumerate(m.tool_calls):
            parts.append(self._marked(tool_call_text(call), "tool_call", i))
        for part in parts:
            text.append("\n")
            text.append_text(part)
        return text


class Transcript(VerticalScroll):
    """Shows one rollout; `show()` replaces what is shown."""

    DEFAULT_CSS = """
    Transcript { height: 1fr; }
    Transcript .head { background: $panel; padding: 0 1; height: 1; dock: top; }
    Transcript .msg { padding: 0 1; margin: 0 0 1 0; border-left: wide $panel; height: auto; }
    Transcript .msg:focus { background: $boost; }
    Transcript .role-user { border-left: wide $secondary; }
    Transcript .role-assistant { border-left: wide $primary; }
    Transcript .role-system { border-left: wide $foreground-muted; color: $foreground-muted; }
    Transcript .role-tool { border-left: wide $accent; color: $foreground-muted; }
    Transcript .is-error { border-left: wide $error; }
    Transcript .focus { border-left: thick $warning; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data: TranscriptData | None = None

    async def show(
        self,
        data: TranscriptData | None,
        focus_segment: int | None = None,
        *,
        mark: str = "reverse",
        expand_reasoning: bool = False,
    ) -> None:
        """Replace the transcript; scroll to the segment `focus_segment` (styled with `mark`) when given.
        `data` is set once the new transcript is mounted."""
        self.data = None
        await self.remove_children()
        if data is None:
            await self.mount(Static(Text("no such rollout", style="italic")))
            return
        focus = next((s for s in data.segments if s.segment_id == focus_segment), None)
        blocks = [
            MessageBlock(
                m,
                focus if focus is not None and focus.message_index == m.message_index else None,
                mark,
                expanded=expand_reasoning and bool(m.reasoning),
            )
            for m in data.messages
        ]
        await self.mount_all([Static(transcript_header(data), classes="head"), *blocks])
        self.data = data
        target = next((b for b in blocks if b.focus_part is not None), None)
        if target is not None:
            self.call_after_refresh(self.scroll_to_widget, target, animate=False, top=True)
        else:
            self.scroll_home(animate=False)

    def set_reasoning(self, expanded: bool) -> None:
        for block in self.query(MessageBlock):
            if block.has_reasoning:
                block.expanded = expanded
