"""OpenAI Responses API transcripts: JSONL, one rollout a line, its turns as Responses items.

A record is the canonical envelope (`rollout_id`, `task_id`, `reward`, ...) with `input` (a string or items)
and `output` items, or all of them as `items`. Items: `message` (role and `input_text`/`output_text` parts),
`reasoning` (its `summary` texts, else its `content` texts, else '[redacted thinking]' when only
`encrypted_content` is there), `function_call` (`call_id`, `name`, `arguments` JSON text) and
`function_call_output`. Reasoning, messages and calls between two inputs form one assistant turn.
"""

from __future__ import annotations

import json
from typing import Any

from engine.ingest.reasoning import REDACTED, join
from engine.ingest.records import RecordReader, Rollout

ITEM_TYPES = ("message", "reasoning", "function_call", "function_call_output")
_ROLES = {"developer": "system", "system": "system", "user": "user", "assistant": "assistant"}


def is_responses_record(record: Any) -> bool:
    """A record whose turns are Responses items rather than chat messages."""
    if not isinstance(record, dict) or "messages" in record:
        return False
    items = record.get("items", record.get("output"))
    return isinstance(items, list) and any(isinstance(i, dict) and i.get("type") in ITEM_TYPES for i in items)


def rollout(reader: RecordReader, record: Any) -> Rollout:
    """One Responses API record (`items`, or `input` and `output`) as a rollout."""
    if not isinstance(record, dict):
        raise reader.fail("record", f"expected a JSON object, got {type(record).__name__}")
    if "items" in record:
        items = [("items", record["items"])]
    else:
        prompt = record.get("input")
        prompt = [{"type": "message", "role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        items = [("input", prompt or []), ("output", record.get("output"))]
    messages: list[dict[str, Any]] = []
    turn: dict[str, Any] | None = None  # the assistant turn being built
    for key, values in items:
        if not isinstance(values, list):
            raise reader.fail(
                key, "missing" if values is None else f"expected a list of items, got {type(values).__name__}"
            )
        for i, item in enumerate(values):
            at = f"{key}[{i}]"
            if not isinstance(item, dict):
                raise reader.fail(at, f"expected a JSON object, got {type(item).__name__}")
            kind = item.get("type", "message" if "role" in item else None)
            role = _ROLES.get(item.get("role", "assistant")) if kind == "message" else "assistant"
            if kind not in ITEM_TYPES:
                raise reader.fail(f"{at}.type", f"unknown item type {kind!r} (expected one of {', '.join(ITEM_TYPES)})")
            if role is None:
                raise reader.fail(f"{at}.role", f"unknown role {item.get('role')!r}")
            if kind == "function_call_output" or role != "assistant":
                turn = None
                messages.append(
                    _input(item) if kind == "function_call_output" else {"role": role, "content": _text(item)}
                )
                continue
            if turn is None:
                turn = {"role": "assistant", "content": None, "reasoning": None, "tool_calls": []}
                messages.append(turn)
            if kind == "reasoning":
                turn["reasoning"] = join(turn["reasoning"], _reasoning(item))
            elif kind == "function_call":
                turn["tool_calls"].append(
                    {"id": item.get("call_id"), "name": item.get("name"), "arguments": item.get("arguments")}
                )
            else:
                turn["content"] = "\n".join(t for t in (turn["content"], _text(item)) if t) or None
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise reader.fail("metadata", f"expected an object, got {type(metadata).__name__}")
    return reader.rollout(record, messages, metadata={"source_format": "openai-responses", **metadata})


def _input(item: dict[str, Any]) -> dict[str, Any]:
    output = item.get("output")
    return {
        "role": "tool",
        "tool_call_id": item.get("call_id"),
        "content": output if isinstance(output, str) else json.dumps(output),
    }


def _text(item: dict[str, Any]) -> str | None:
    content = item.get("content")
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("text")) or None
    return content if isinstance(content, str) else None


def _reasoning(item: dict[str, Any]) -> str | None:
    for key in ("summary", "content"):
        parts = item.get(key)
        texts = [p.get("text") for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
        if text := join(*(t for t in texts if isinstance(t, str))):
            return text
    return REDACTED if item.get("encrypted_content") else None
