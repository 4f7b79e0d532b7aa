"""Split a rollout into the store's rows: every message as context, and the model's output as segments."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from engine.ingest.records import Message, Rollout, ToolCall

# tau-bench agents reason through a `think` tool: its thought is both a tool call and reasoning.
THINK_TOOLS = frozenset({"think"})


@dataclass(frozen=True)
class SegmentRow:
    message_index: int
    part_index: int
    kind: str  # 'reasoning' | 'text' | 'tool_call'
    text: str
    origin: str  # 'content' | 'reasoning_field' | 'think_tool' | 'tool_calls'
    tool_name: str | None = None
    tool_args: str | None = None
    args_valid: bool | None = None

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(f"{self.kind}\0{self.text}".encode()).hexdigest()


def args_json(call: ToolCall) -> str:
    """Arguments as compact JSON text; a raw string that was not valid JSON is kept verbatim."""
    if not call.arguments_valid:
        return str(call.arguments)
    return json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def think_text(call: ToolCall) -> str:
    """The thought carried by a think-tool call."""
    args = call.arguments
    if isinstance(args, dict):
        return "\n".join(str(v) for v in args.values() if isinstance(v, str | int | float)).strip()
    return str(args).strip()


def segment_rollout(rollout: Rollout) -> list[SegmentRow]:
    """The analysable segments of a rollout, in order: per assistant message reasoning, text, tool calls."""
    rows: list[SegmentRow] = []
    for index, message in enumerate(rollout.messages):
        if message.role == "assistant":
            rows.extend(segment_message(index, message))
    return rows


def segment_message(index: int, message: Message) -> list[SegmentRow]:
    rows: list[SegmentRow] = []
    if message.reasoning and message.reasoning.strip():
        rows.append(SegmentRow(index, 0, "reasoning", message.reasoning.strip(), "reasoning_field"))
    for part, call in enumerate(message.tool_calls):
        if call.name in THINK_TOOLS and (thought := think_text(call)):
            rows.append(SegmentRow(index, part, "reasoning", thought, "think_tool"))
    if message.content and message.content.strip():
        rows.append(SegmentRow(index, 0, "text", message.content.strip(), "content"))
    for part, call in enumerate(message.tool_calls):
        arguments = args_json(call)
        rows.append(
            SegmentRow(
                index,
                part,
                "tool_call",
                f"{call.name} {arguments}",
                "tool_calls",
                call.name,
                arguments,
                call.arguments_valid,
            )
        )
    return rows


def message_row(rollout_key: int, index: int, message: Message) -> dict[str, Any]:
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls]
    return {
        "rollout_key": rollout_key,
        "message_index": index,
        "role": message.role,
        "content": message.content,
        "reasoning": message.reasoning,
        "tool_calls": json.dumps(calls, ensure_ascii=False) if calls else None,
        "tool_call_id": message.tool_call_id,
        "name": message.name,
        "is_error": message.is_error,
    }
