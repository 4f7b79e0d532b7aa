"""A whole rollout as a scrollable transcript: roles styled, reasoning folded, tool calls as highlighted JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.highlighter import JSONHighlighter
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Collapsible, Static

from tui.safe_text import clean, one_line, safe

if TYPE_CHECKING:
    from engine.store.queries import MessageRow
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
    r = data.rollout
    text = Text(end="", no_wrap=True, overflow="ellipsis")
    text.append_text(safe(r.checkpoint, "bold", max_chars=24))
    text.append(" · ")
    text.append_text(safe(r.rollout_id, max_chars=40))
    text.append(f" · task {clean(r.task_id)[:30]}")
    if r.trial is not None:
        text.append(f" · trial {r.trial}")
    text.append(f" · reward {'—' if r.reward is None else f'{r.reward:g}'}")
    if r.split:
        text.append(f" · {r.split}", style="dim")
    return text


class Transcript(VerticalScroll):
    """Shows one rollout; `show()` replaces what is shown. Tab moves between folded reasoning blocks."""

    DEFAULT_CSS = """
    Transcript { height: 1fr; }
    Transcript .head { background: $panel; padding: 0 1; height: 1; dock: top; }
    Transcript .msg { padding: 0 1; margin: 0 0 1 0; border-left: wide $panel; height: auto; }
    Transcript .msg-role { text-style: bold; color: $foreground-muted; }
    Transcript .role-user { border-left: wide $secondary; }
    Transcript .role-assistant { border-left: wide $primary; }
    Transcript .role-system { border-left: wide $foreground-muted; color: $foreground-muted; }
    Transcript .role-tool { border-left: wide $accent; color: $foreground-muted; }
    Transcript .is-error { border-left: wide $error; }
    Transcript .focus { background: $boost; border-left: thick $warning; }
    Transcript Collapsible { padding: 0; margin: 0; border: none; background: transparent; }
    Transcript Collapsible Contents { padding: 0 0 0 2; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data: TranscriptData | None = None

    async def show(
        self, data: TranscriptData | None, focus_segment: int | None = None, *, expand_reasoning: bool = False
    ) -> None:
        """Replace the transcript; scroll to (and mark) the segment `focus_segment` when given."""
        self.data = data
        await self.remove_children()
        if data is None:
            await self.mount(Static(Text("no such rollout", style="italic")))
            return
        focus = next((s for s in data.segments if s.segment_id == focus_segment), None)
        widgets: list[Widget] = [Static(transcript_header(data), classes="head")]
        target: Widget | None = None
        for message in data.messages:
            block, marked = self._message(message, focus, expand_reasoning)
            widgets.append(block)
            target = marked or target
        await self.mount_all(widgets)
        if target is not None:
            self.call_after_refresh(self.scroll_to_widget, target, animate=False, top=True)
        else:
            self.scroll_home(animate=False)

    def _message(self, m: MessageRow, focus: Any, expand_reasoning: bool) -> tuple[Widget, Widget | None]:
        role = m.role if m.role in ("system", "user", "assistant", "tool") else "other"
        classes = f"msg role-{role}" + (" is-error" if m.is_error else "")
        title = Text(f"{m.role} #{m.message_index}", end="")
        if m.role == "tool":
            title.append(" result")
            if m.name:
                title.append(" · ")
                title.append_text(safe(m.name, max_chars=40))
            if m.is_error:
                title.append(" · error", style="bold")
        parts: list[Widget] = [Static(title, classes="msg-role")]
        marked: Widget | None = None
        is_focus = focus is not None and focus.message_index == m.message_index
        if m.reasoning:
            body = Static(safe(m.reasoning, "italic"))
            fold = Collapsible(
                body,
                classes="reasoning",
                title=f"reasoning · {len(m.reasoning)} chars",
                collapsed=not (expand_reasoning or (is_focus and focus.kind == "reasoning")),
            )
            parts.append(fold)
            if is_focus and focus.kind == "reasoning":
                fold.add_class("focus")
                marked = fold
        if m.content:
            content = Static(safe(m.content))
            if m.role == "system" or (m.role == "tool" and len(m.content) > FOLD_CHARS):
                title = Text(f"{'system prompt' if m.role == 'system' else 'result'} · {len(m.content)} chars: ")
                title.append_text(one_line(m.content, 48))
                parts.append(Collapsible(content, title=title, collapsed=True))  # type: ignore[arg-type]
            else:
                parts.append(content)
            if is_focus and focus.kind == "text":
                content.add_class("focus")
                marked = content
        for i, call in enumerate(m.tool_calls):
            call_widget = Static(tool_call_text(call))
            parts.append(call_widget)
            if is_focus and focus.kind == "tool_call" and focus.part_index == i:
                call_widget.add_class("focus")
                marked = call_widget
        block = _Block(*parts, classes=classes)
        return block, marked

    def set_reasoning(self, expanded: bool) -> None:
        for fold in self.query("Collapsible.reasoning"):
            fold.collapsed = not expanded


class _Block(Widget):
    DEFAULT_CSS = "_Block { height: auto; }"
