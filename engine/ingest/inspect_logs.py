"""Inspect AI logs (`.eval` and `.json`), read with inspect_ai's own reader one sample at a time.

A sample is a rollout: `rollout_id` is 'ID:epochN', `task_id` the sample id, `trial` the epoch. Assistant
`ContentReasoning` becomes reasoning (a redacted one is recorded as '[redacted thinking]', or its summary when
it has one), `ContentText` text, `ToolCall`s tool calls; a `ChatMessageTool` with an `error` is an error
result. The reward is the score named by `--score` (default: the sample's first), converted by inspect_ai's
own `value_to_float`: 'C' 1, 'I' 0, 'P' 0.5, 'N' 0, yes/true 1, no/false 0, numbers as they are.
The position of a sample in the log (1-based) stands for the line in errors and `rollouts.source_line`.
inspect_ai is an optional dependency: `pip install 'rldiff[inspect]'`.
"""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Iterator
from typing import Any

from engine.errors import InputError, RecordError
from engine.ingest.jsontext import JsonText, JsonTextError
from engine.ingest.reasoning import REDACTED, join
from engine.ingest.records import RecordReader, Rollout
from engine.safe_text import clean

log = logging.getLogger(__name__)

MISSING = "reading Inspect logs needs inspect_ai: pip install 'rldiff[inspect]' (or pip install inspect_ai)"
# What the reader leaves out of each sample: rldiff reads messages, scores and usage, never the event log.
_EXCLUDE = {"events", "store", "timelines"}
_DETAIL = 300  # characters of the reader's own error message kept in ours


def is_inspect_log(path: Any, text: str | None) -> bool:
    """An `.eval` zip (`text` None), or a JSON document whose top level has Inspect's `eval` header."""
    if text is None:
        return str(path).endswith(".eval")
    try:
        doc = JsonText(text)
        start = doc.member("eval")
        header = doc.value_at(start) if start is not None else None
    except JsonTextError:
        return False
    return isinstance(header, dict) and "task" in header


def parse(path: str, score: str | None = None) -> Iterator[Rollout | RecordError]:
    """The samples of the log at `path` as rollouts, in the log's order."""
    try:
        from inspect_ai.log import read_eval_log, read_eval_log_samples
        from inspect_ai.scorer import value_to_float
    except ImportError as exc:
        raise InputError(f"{path}: {MISSING}") from exc
    number = 1
    try:
        header = read_eval_log(path, header_only=True)
        model = header.eval.model
        task = header.eval.task
        to_float = value_to_float()
        samples = read_eval_log_samples(
            path, all_samples_required=False, resolve_attachments=True, exclude_fields=_EXCLUDE
        )
        for number, sample in enumerate(samples, start=1):
            reader = RecordReader(path, number)
            try:
                yield _rollout(reader, sample, model, task, score, to_float)
            except RecordError as exc:
                yield exc
    except (OSError, ValueError, RuntimeError, KeyError, zipfile.BadZipFile) as exc:
        # inspect_ai raises these for a file that is not a log, a damaged zip, or JSON that fails its schema
        detail = " ".join(clean(str(exc)).split())[:_DETAIL]  # the reader's message can quote the file
        yield RecordError(path, number, "log", f"cannot read as an Inspect log: {type(exc).__name__}: {detail}")


def _rollout(reader: RecordReader, sample: Any, model: str, task: str, score: str | None, to_float: Any) -> Rollout:
    limit = sample.limit
    error = sample.error.message if sample.error is not None else None
    usage = list(sample.model_usage.values())
    costs = [u.total_cost for u in usage if u.total_cost is not None]
    record = {
        "rollout_id": f"{sample.id}:epoch{sample.epoch}",
        "task_id": sample.id,
        "trial": sample.epoch,
        "reward": _reward(reader, sample.scores or {}, score, to_float),
        "messages": [_message(m) for m in sample.messages],
        "metadata": {
            "source_format": "inspect",
            "task": task,
            **({"sample": sample.metadata} if sample.metadata else {}),
        },
        "termination_reason": f"{limit.type}_limit" if limit is not None else ("error" if error else "completed"),
        "error": error,
        "timed_out": limit is not None,
        "tokens": sum(u.total_tokens for u in usage) if usage else None,
        "cost_usd": sum(costs) if costs else None,
        "model": model,
    }
    return reader.rollout(record)


def _reward(reader: RecordReader, scores: dict[str, Any], name: str | None, to_float: Any) -> float | None:
    if not scores:
        return None
    if name is None:
        name = next(iter(scores))
    elif name not in scores:
        have = ", ".join(clean(n) for n in scores)
        raise reader.fail("scores", f"no score named {clean(name)!r} (have: {have}); choose one with --score")
    value = scores[name].value
    if isinstance(value, list | dict):
        raise reader.fail(
            f"scores.{clean(name)}", f"a {type(value).__name__} of values, not one; choose a scorer with --score"
        )
    return None if value is None else float(to_float(value))


def _message(message: Any) -> dict[str, Any]:
    """A canonical message from an Inspect ChatMessage."""
    out: dict[str, Any] = {"role": message.role}
    if isinstance(message.content, str):
        out["content"] = message.content
    else:
        texts, thoughts = [], []
        for part in message.content:
            if part.type == "text":
                texts.append(part.text)
            elif part.type == "reasoning":
                thoughts.append((part.summary or REDACTED) if part.redacted else part.reasoning)
            else:  # images, audio, video, documents, server-side tool use: named, not read
                texts.append(f"[{part.type}]")
        out["content"] = "\n".join(t for t in texts if t) or None
        out["reasoning"] = join(*thoughts)
    if message.role == "assistant":
        out["tool_calls"] = [
            {"id": c.id, "name": c.function, "arguments": c.arguments} for c in message.tool_calls or []
        ]
    elif message.role == "tool":
        out.update(tool_call_id=message.tool_call_id, name=message.function, is_error=message.error is not None)
        if message.error is not None and not out.get("content"):
            out["content"] = f"{message.error.type}: {message.error.message}"
    return out
