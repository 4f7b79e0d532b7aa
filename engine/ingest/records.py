"""The canonical rollout record (DESIGN.md §3) and its validation from any accepted message shape."""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, field
from typing import Any

from engine.errors import RecordError
from engine.ingest.reasoning import block_text, join, of_message, of_raw_response, split_think

log = logging.getLogger(__name__)

ROLES = ("system", "user", "assistant", "tool")
# Longer tool names are cut (with a warning): a name is a label in every table, and real ones are short.
MAX_TOOL_NAME = 128
# `trial` is an INTEGER column of the store.
INT32 = (-(2**31), 2**31 - 1)
_SURROGATE = re.compile("[\ud800-\udfff]")
_ERROR_TEXT = re.compile(r"^\s*(error\b|exception\b|traceback\b|\{\s*\"error\")", re.IGNORECASE)


@dataclass(frozen=True)
class ToolCall:
    id: str | None
    name: str
    arguments: Any  # parsed JSON, or the raw string when it was not valid JSON
    arguments_valid: bool = True


@dataclass(frozen=True)
class Message:
    role: str
    content: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool | None = None


@dataclass(frozen=True)
class Strata:
    """Rollout facts users slice by (the rollouts table's strata columns); None where the input does not say."""

    termination_reason: str | None = None
    error: str | None = None
    timed_out: bool | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    model: str | None = None


STRATA = tuple(Strata.__dataclass_fields__)


def object_member(record: dict[str, Any], key: str) -> dict[str, Any]:
    """`record[key]` when it is a JSON object, else an empty one (optional metadata blocks of the formats)."""
    value = record.get(key)
    return value if isinstance(value, dict) else {}


def list_member(record: dict[str, Any], key: str) -> list[Any]:
    """`record[key]` when it is a JSON array, else an empty one."""
    value = record.get(key)
    return value if isinstance(value, list) else []


@dataclass(frozen=True)
class Rollout:
    rollout_id: str
    task_id: str
    messages: tuple[Message, ...]
    environment_id: str | None = None
    trial: int | None = None
    reward: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    line: int = 0  # physical line of the record in its source file
    warnings: tuple[str, ...] = ()  # recoverable problems, e.g. arguments kept as a raw string
    strata: Strata = Strata()

    def to_json(self) -> dict[str, Any]:
        """The canonical JSON form: what `rldiff ingest --format jsonl` reads back unchanged."""
        messages = []
        for m in self.messages:
            out: dict[str, Any] = {"role": m.role}
            for key in ("content", "reasoning", "tool_call_id", "name", "is_error"):
                if getattr(m, key) is not None:
                    out[key] = getattr(m, key)
            if m.tool_calls:
                out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
            messages.append(out)
        record: dict[str, Any] = {"rollout_id": self.rollout_id, "task_id": self.task_id}
        for key in ("environment_id", "trial", "reward"):
            if getattr(self, key) is not None:
                record[key] = getattr(self, key)
        for key in STRATA:
            if getattr(self.strata, key) is not None:
                record[key] = getattr(self.strata, key)
        record["messages"] = messages
        if self.metadata:
            record["metadata"] = self.metadata
        return record


class RecordReader:
    """Validates one input record, naming the file, line and field of anything wrong."""

    def __init__(self, path: str, line: int) -> None:
        self.path, self.line = path, line
        self.warnings: list[str] = []

    def fail(self, field: str, problem: str) -> RecordError:
        return RecordError(self.path, self.line, field, problem)

    def unexpected(self, exc: Exception) -> RecordError:
        """An exception nobody anticipated while converting this record, as the record's error."""
        if isinstance(exc, RecursionError):
            return self.fail("record", "nested too deeply")
        return self.fail("record", f"cannot convert ({type(exc).__name__}: {_shown(str(exc), 200)})")

    def warn(self, field: str, problem: str) -> None:
        message = f"{self.path}:{self.line}: {field}: {problem}"
        log.warning(message)
        self.warnings.append(message)

    # -- envelope ------------------------------------------------------------------------------------------

    def rollout(self, record: Any, messages: list[Any] | None = None, **overrides: Any) -> Rollout:
        """A `Rollout` from a canonical envelope; adapters pass `overrides` for fields they map themselves."""
        if not isinstance(record, dict):
            raise self.fail("record", f"expected a JSON object, got {type(record).__name__}")
        values = {**record, **overrides}
        rollout_id = self.identifier(values, "rollout_id")
        task_id = self.identifier(values, "task_id")
        raw_messages = values.get("messages") if messages is None else messages
        if raw_messages is None:
            raise self.fail("messages", "missing")
        if not isinstance(raw_messages, list):
            raise self.fail("messages", f"expected a list, got {type(raw_messages).__name__}")
        parsed = [self.message(m, f"messages[{i}]") for i, m in enumerate(raw_messages)]
        if not any(m.role == "assistant" for m in parsed):
            raise self.fail("messages", "no assistant message: nothing the model produced to analyse")
        metadata = values.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise self.fail("metadata", f"expected an object, got {type(metadata).__name__}")
        return Rollout(
            rollout_id=rollout_id,
            task_id=task_id,
            messages=tuple(parsed),
            environment_id=self.optional_str(values, "environment_id"),
            trial=self.optional_int(values, "trial"),
            reward=self.optional_float(values, "reward"),
            metadata=metadata,
            line=self.line,
            warnings=tuple(self.warnings),
            strata=self.strata(values),
        )

    def strata(self, values: dict[str, Any]) -> Strata:
        timed_out = values.get("timed_out")
        if timed_out is not None and not isinstance(timed_out, bool):
            raise self.fail("timed_out", f"expected true or false, got {json.dumps(timed_out)}")
        error = values.get("error") or None  # false, "" and {} mean no error
        if error is not None and not isinstance(error, str):  # harnesses also write error objects or flags
            error = json.dumps(error, ensure_ascii=False, default=str)
        return Strata(
            termination_reason=self.optional_str(values, "termination_reason"),
            error=error,
            timed_out=timed_out,
            tokens=self.optional_int(values, "tokens"),
            cost_usd=self.optional_float(values, "cost_usd"),
            model=self.optional_str(values, "model"),
        )

    def identifier(self, values: dict[str, Any], key: str) -> str:
        value = values.get(key)
        if value is None:
            raise self.fail(key, "missing")
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise self.fail(key, f"expected a string, got {type(value).__name__}")
        if str(value).strip() == "":
            raise self.fail(key, "empty")
        return str(value)

    def optional_str(self, values: dict[str, Any], key: str) -> str | None:
        value = values.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise self.fail(key, f"expected a string, got {type(value).__name__}")
        return str(value)

    def optional_int(self, values: dict[str, Any], key: str) -> int | None:
        value = values.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {_shown(value)}")
        if not INT32[0] <= value <= INT32[1]:
            raise self.fail(key, f"{_shown(value)} is out of range (at most {INT32[1]} in magnitude)")
        return value

    def optional_float(self, values: dict[str, Any], key: str) -> float | None:
        value = values.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"expected a number, got {_shown(value)}")
        number = float(value) if not isinstance(value, int) or abs(value) < 2**1023 else math.inf
        if not math.isfinite(number):
            raise self.fail(key, f"expected a finite number, got {_shown(value)}")
        return number

    # -- messages: canonical, OpenAI and Anthropic shapes ---------------------------------------------------

    def message(self, raw: Any, where: str) -> Message:
        if not isinstance(raw, dict):
            raise self.fail(where, f"expected a JSON object, got {type(raw).__name__}")
        role = raw.get("role")
        if role is None:
            raise self.fail(f"{where}.role", "missing")
        if role not in ROLES:
            raise self.fail(f"{where}.role", f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
        content = raw.get("content")
        reasoning = raw.get("reasoning", raw.get("reasoning_content"))
        if reasoning is not None and not isinstance(reasoning, str):
            raise self.fail(f"{where}.reasoning", f"expected a string, got {type(reasoning).__name__}")
        raw_calls = raw.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise self.fail(f"{where}.tool_calls", f"expected a list, got {type(raw_calls).__name__}")
        calls = [self.tool_call(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(raw_calls)]
        is_error = raw.get("is_error", raw.get("error"))
        tool_call_id = raw.get("tool_call_id")
        if isinstance(content, list):
            text, thinking, block_calls, result = self.blocks(content, f"{where}.content")
            content = text
            reasoning = join(reasoning, thinking)
            calls.extend(block_calls)
            if result is not None:  # an Anthropic user message carrying tool results
                role, tool_call_id, block_error = "tool", result[0], result[1]
                is_error = block_error if is_error is None else is_error
        elif content is not None and not isinstance(content, str):
            raise self.fail(f"{where}.content", f"expected a string or a list of blocks, got {type(content).__name__}")
        if role == "assistant":
            # thinking blocks beside the message, else the provider's raw response (tau2 keeps it in raw_data)
            extra = of_message({"thinking_blocks": raw.get("thinking_blocks")})
            if not reasoning and not extra:
                extra = of_raw_response(raw.get("raw_data"))
            if isinstance(content, str):
                think, content = split_think(content)
                extra = join(extra, think)
            reasoning = join(reasoning, extra)
        if role != "assistant" and calls:
            raise self.fail(f"{where}.tool_calls", f"only assistant messages make tool calls, not {role!r}")
        if role == "tool" and is_error is None and content:
            is_error = bool(_ERROR_TEXT.match(content))
        return Message(
            role=role,
            content=content,
            reasoning=reasoning or None,
            tool_calls=tuple(calls),
            tool_call_id=None if tool_call_id is None else str(tool_call_id),
            name=raw.get("name") if isinstance(raw.get("name"), str) else None,
            is_error=None if is_error is None else bool(is_error),
        )

    def blocks(
        self, blocks: list[Any], where: str
    ) -> tuple[str | None, str | None, list[ToolCall], tuple[str | None, bool | None] | None]:
        """Anthropic blocks -> (text, thinking, tool calls, (tool_use_id, is_error) of a tool result)."""
        texts, thoughts, calls = [], [], []
        result_id: str | None = None
        result_error: bool | None = None
        has_result = False
        for i, block in enumerate(blocks):
            at = f"{where}[{i}]"
            if isinstance(block, str):
                texts.append(block)
                continue
            if not isinstance(block, dict):
                raise self.fail(at, f"expected a content block object, got {type(block).__name__}")
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind in ("thinking", "redacted_thinking"):
                thoughts.append(block_text(block) or "")
            elif kind == "tool_use":
                calls.append(
                    self.tool_call(
                        {
                            "id": block.get("id"),
                            "name": block.get("name"),
                            "arguments": block.get("input", {}),
                        },
                        at,
                    )
                )
            elif kind == "tool_result":
                has_result = True
                result_id = block.get("tool_use_id")
                result_error = block.get("is_error")
                inner = block.get("content")
                if isinstance(inner, list):
                    inner = "\n".join(str(b.get("text", "")) for b in inner if isinstance(b, dict))
                texts.append("" if inner is None else str(inner))
            elif kind in ("image", "document"):
                texts.append(f"[{kind}]")
            else:
                raise self.fail(f"{at}.type", f"unknown content block type {kind!r}")
        text = "\n".join(t for t in texts if t) or None
        return text, "\n\n".join(thoughts) or None, calls, ((result_id, result_error) if has_result else None)

    def tool_call(self, raw: Any, where: str) -> ToolCall:
        if not isinstance(raw, dict):
            raise self.fail(where, f"expected a JSON object, got {type(raw).__name__}")
        function = raw.get("function")
        if isinstance(function, dict):  # OpenAI: {"type": "function", "function": {"name", "arguments"}}
            name, arguments, name_field = (
                function.get("name"),
                function.get("arguments"),
                f"{where}.function.name",
            )
        else:
            name, arguments, name_field = (
                raw.get("name"),
                raw.get("arguments", raw.get("input")),
                f"{where}.name",
            )
        if not isinstance(name, str) or not name.strip():
            raise self.fail(name_field, "missing" if name is None else f"expected a tool name, got {_shown(name)}")
        if len(name) > MAX_TOOL_NAME:
            self.warn(name_field, f"tool name of {len(name)} characters cut to {MAX_TOOL_NAME}")
            name = name[:MAX_TOOL_NAME]
        valid = True
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                valid = False
                self.warn(f"{where}.arguments", f"not valid JSON ({exc.msg}); kept as a raw string")
        elif arguments is None:
            arguments = {}
        call_id = raw.get("id")
        return ToolCall(
            id=None if call_id is None else str(call_id),
            name=name,
            arguments=arguments,
            arguments_valid=valid,
        )


def _shown(value: Any, max_chars: int = 80) -> str:
    """A bad value as JSON in an error message, cut short (it may be huge or hold anything)."""
    try:
        text = json.dumps(value, ensure_ascii=True, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def unpaired_surrogate(value: Any, where: str = "record") -> str | None:
    """The field of the first string in a decoded JSON value holding a lone UTF-16 surrogate (`"\\ud800"`
    decodes to one; it cannot be stored as UTF-8), or None."""
    stack = [(where, value)]
    while stack:
        at, item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                return at
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                if not key.isascii() and _SURROGATE.search(key):
                    return at
                stack.append((key if at == "record" else f"{at}.{key}", child))
        elif isinstance(item, list):
            stack.extend((f"{at}[{i}]", child) for i, child in reversed(list(enumerate(item))))
    return None
