"""SWE-agent and mini-swe-agent trajectories: one `.traj` JSON document per task instance, one rollout each.

SWE-agent: `trajectory` steps `{thought, action, observation}`: the thought is reasoning, the action a tool call
named by its first word (`{"command": action}`), the observation its result; the problem statement is the first
user message of `history`. mini-swe-agent: `messages` whose assistant content is a thought and one fenced bash
block: the thought is reasoning, the block a `bash` call, the next user message its output. The task is the
instance id (`instance_id`, else the file name up to `.traj`); no reward is in a trajectory (SWE-bench scores
them apart), `info.exit_status` is the termination reason, `info.model_stats` gives tokens and cost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.errors import RecordError
from engine.ingest.jsontext import JsonText, JsonTextError
from engine.ingest.records import RecordReader, Rollout, list_member, object_member

# mini-swe-agent's action: the one fenced shell block of an assistant reply (```bash or ```mswea_bash_command)
_ACTION = re.compile(r"```(?:bash|sh|mswea_bash_command)[ \t]*\n(.*?)\n?```", re.DOTALL)
# exit statuses that mean a limit stopped the run (SWE-agent 'exit_cost', mini 'LimitsExceeded', ...)
_LIMIT_WORDS = ("cost", "context", "limit", "time")


def is_trajectory(record: Any) -> bool:
    """A SWE-agent (`trajectory` steps) or mini-swe-agent (`trajectory_format`) document."""
    if not isinstance(record, dict):
        return False
    if str(record.get("trajectory_format", "")).startswith("mini-swe-agent"):
        return True
    steps = record.get("trajectory")
    keys = {"action", "thought", "observation"}
    return isinstance(steps, list) and any(isinstance(s, dict) and keys & s.keys() for s in steps[:3])


def parse(path: Path, text: str) -> Iterator[Rollout | RecordError]:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        yield RecordError(str(path), exc.lineno, "json", f"{exc.msg} (column {exc.colno})")
        return
    lines: list[int] = []  # the line each trajectory step starts on, for errors
    if isinstance(record, dict) and isinstance(record.get("trajectory"), list):
        doc = JsonText(text)
        try:
            start = doc.member("trajectory")
            lines = [line for line, _ in doc.array_items(start)] if start is not None else []
        except JsonTextError:
            lines = []
    reader = RecordReader(str(path), 1)
    try:
        yield _rollout(reader, path, record, lines)
    except RecordError as exc:
        yield exc


def _rollout(reader: RecordReader, path: Path, record: Any, lines: list[int]) -> Rollout:
    if not isinstance(record, dict):
        raise reader.fail("record", f"expected a JSON object, got {type(record).__name__}")
    info = object_member(record, "info")
    messages: list[Any] | None
    if "trajectory" in record:
        messages = _swe_agent_messages(reader, record, lines)
        source_format = "swe-agent"
    else:
        messages = _mini_messages(record.get("messages"))
        source_format = "mini-swe-agent"
    stats = object_member(info, "model_stats")
    tokens = [stats[k] for k in ("tokens_sent", "tokens_received") if isinstance(stats.get(k), int)]
    status = info.get("exit_status")
    status = status if isinstance(status, str) else None
    instance = record.get("instance_id") or info.get("instance_id") or path.name.split(".traj")[0]
    reader.line = 1  # errors after the steps name the document
    return reader.rollout(
        record,
        messages,
        rollout_id=instance,
        task_id=instance,
        metadata={"source_format": source_format, **({"exit_status": status} if status else {})},
        termination_reason=status,
        error=status if status and "error" in status.lower() else None,
        timed_out=None if status is None else any(w in status.lower() for w in _LIMIT_WORDS),
        tokens=sum(tokens) if tokens else None,
        cost_usd=stats.get("instance_cost"),
        model=_model_name(record, info),
    )


def _swe_agent_messages(reader: RecordReader, record: dict[str, Any], lines: list[int]) -> list[dict[str, Any]]:
    steps = record.get("trajectory")
    if not isinstance(steps, list):
        raise reader.fail("trajectory", f"expected a list of steps, got {type(steps).__name__}")
    history = list_member(record, "history")
    task = next((m for m in history if isinstance(m, dict) and m.get("role") == "user"), None)
    messages: list[dict[str, Any]] = [{"role": "user", "content": _text(task.get("content"))}] if task else []
    for i, step in enumerate(steps):
        reader.line = lines[i] if i < len(lines) else 1
        if not isinstance(step, dict):
            raise reader.fail(f"trajectory[{i}]", f"expected a JSON object, got {type(step).__name__}")
        action = step.get("action")
        if not isinstance(action, str):
            raise reader.fail(f"trajectory[{i}].action", "missing" if action is None else "expected a string")
        words = action.split(None, 1)
        calls = [{"id": f"step{i}", "name": words[0], "arguments": {"command": action}}] if words else []
        messages.append({"role": "assistant", "reasoning": _text(step.get("thought")), "tool_calls": calls})
        if calls:
            messages.append({"role": "tool", "tool_call_id": f"step{i}", "content": _text(step.get("observation"))})
    return messages


def _mini_messages(raw: Any) -> list[Any] | None:
    """mini-swe-agent messages with each assistant reply's bash block as a tool call and its output as result."""
    if not isinstance(raw, list):
        return raw
    messages: list[Any] = []
    pending: str | None = None  # id of the last action, answered by the next user message
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            messages.append(m)  # the record reader names what is wrong with it
            continue
        content = _text(m.get("content"))
        if m.get("role") == "assistant":
            text = content or ""
            match = _ACTION.search(text)
            thought = (text[: match.start()] if match else text).strip()
            thought = re.sub(r"^THOUGHT:\s*", "", thought)
            calls: list[dict[str, Any]] = (
                [{"id": f"step{i}", "name": "bash", "arguments": {"command": match.group(1)}}] if match else []
            )
            messages.append({"role": "assistant", "reasoning": thought or None, "tool_calls": calls})
            pending = calls[0]["id"] if calls else None
        elif m.get("role") == "user" and pending:
            messages.append({"role": "tool", "tool_call_id": pending, "content": content})
            pending = None
        else:
            messages.append({"role": m.get("role"), "content": content})
    return messages


def _text(value: Any) -> str | None:
    """Message content as text: a string, or the text parts of a list of content blocks."""
    if isinstance(value, list):
        return "\n".join(str(b.get("text", "")) for b in value if isinstance(b, dict)) or None
    return value if isinstance(value, str) or value is None else json.dumps(value)


def _model_name(record: dict[str, Any], info: dict[str, Any]) -> str | None:
    """The agent's model: mini-swe-agent's `info.config.model.model_name`, SWE-agent's replay config."""
    config = object_member(info, "config")
    model = object_member(config, "model")
    if isinstance(model.get("model_name"), str):
        return model["model_name"]
    replay = record.get("replay_config")
    try:
        replay = json.loads(replay) if isinstance(replay, str) else replay
    except json.JSONDecodeError:
        return None
    agent = replay.get("agent") if isinstance(replay, dict) else None
    replayed = agent.get("model") if isinstance(agent, dict) else None
    name = replayed.get("name") if isinstance(replayed, dict) else None
    return name if isinstance(name, str) else None
