"""Ingest one file into the study store: all of it in one transaction, or nothing.

Records are parsed as a stream and staged in batches in a scratch database, then moved into the store in one
transaction, so memory stays flat as files grow and a bad record anywhere leaves the store untouched.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from engine.errors import InputError, RecordError
from engine.ingest.formats import FORMATS, detect, parse
from engine.ingest.input_file import InputFile
from engine.ingest.records import RecordReader, Rollout
from engine.ingest.segments import message_row, segment_rollout
from engine.progress import NullProgress, Progress
from engine.store import Store
from engine.store.queries.ingest import is_ingested, register_source, source_lines

log = logging.getLogger(__name__)

FLUSH_ROLLOUTS = 2000  # rows are buffered and appended in batches of this many rollouts


@dataclass
class IngestResult:
    path: Path
    checkpoint: str
    format: str
    rollouts: int = 0
    segments: int = 0
    skipped: int = 0
    assistant_turns: int = 0
    reasoning_turns: int = 0  # assistant turns that carried reasoning: 0 says the format kept none
    already_ingested: bool = False
    warnings: list[str] = field(default_factory=list)
    quarantine: Path | None = None


@dataclass
class _Batch:
    """Column buffers for one bulk append of rollouts, messages and segments."""

    rollouts: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    segments: list[dict[str, Any]] = field(default_factory=list)

    def flush(self, store: Store, schema: str) -> None:
        store.append(f"{schema}.rollouts", pl.DataFrame(self.rollouts, schema=_ROLLOUT_SCHEMA))
        store.append(f"{schema}.messages", pl.DataFrame(self.messages, schema=_MESSAGE_SCHEMA))
        store.append(f"{schema}.segments", pl.DataFrame(self.segments, schema=_SEGMENT_SCHEMA))
        self.rollouts.clear()
        self.messages.clear()
        self.segments.clear()


_ROLLOUT_SCHEMA = {
    "rollout_key": pl.Int64,
    "checkpoint": pl.String,
    "rollout_id": pl.String,
    "task_id": pl.String,
    "environment_id": pl.String,
    "trial": pl.Int32,
    "reward": pl.Float64,
    "source_hash": pl.String,
    "source_line": pl.Int32,
    "n_messages": pl.Int32,
    "metadata": pl.String,
    "termination_reason": pl.String,
    "error": pl.String,
    "timed_out": pl.Boolean,
    "tokens": pl.Int64,
    "cost_usd": pl.Float64,
    "model": pl.String,
}
_MESSAGE_SCHEMA = {
    "rollout_key": pl.Int64,
    "message_index": pl.Int32,
    "role": pl.String,
    "content": pl.String,
    "reasoning": pl.String,
    "tool_calls": pl.String,
    "tool_call_id": pl.String,
    "name": pl.String,
    "is_error": pl.Boolean,
}
_SEGMENT_SCHEMA = {
    "segment_id": pl.Int64,
    "rollout_key": pl.Int64,
    "message_index": pl.Int32,
    "part_index": pl.Int32,
    "kind": pl.String,
    "text": pl.String,
    "tool_name": pl.String,
    "tool_args": pl.String,
    "args_valid": pl.Boolean,
    "origin": pl.String,
    "content_hash": pl.String,
}


_UNSAFE_FILENAME = re.compile(r"[^\w.-]+")


def quarantine_path(store: Store, path: Path, checkpoint: str, digest: str) -> Path:
    """Where --skip-bad writes the records it left out: beside the store, one file per input content and
    checkpoint (two inputs with the same base name do not overwrite each other's report)."""
    name = _UNSAFE_FILENAME.sub("_", f"{path.name}.{digest[:12]}.{checkpoint}")[:200]
    return store.path.with_name(f"{store.path.name}.quarantine") / f"{name}.jsonl"


def resolve_formats(paths: list[str | Path], fmt: str) -> list[tuple[Path, str]]:
    """Check that every file exists and has a known format before any is ingested."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
    resolved = []
    for path in map(Path, paths):
        if not path.is_file():
            raise InputError(f"{path}: no such file")
        resolved.append((path, detect(InputFile(path)) if fmt == "auto" else fmt))
    return resolved


def ingest_file(
    store: Store,
    path: str | Path,
    checkpoint: str,
    fmt: str = "auto",
    *,
    skip_bad: bool = False,
    progress: Progress | None = None,
    score: str | None = None,
) -> IngestResult:
    """Ingest the rollouts of one file into `checkpoint`.

    Raises `RecordError` (FILE:LINE: field: problem) at the first bad record unless `skip_bad`; then bad
    records go to a quarantine report. Either way the store changes only if the whole file is written.
    `score` names the scorer whose value is an Inspect log's reward (default: each sample's first).
    """
    if not checkpoint.strip():
        raise InputError("--checkpoint: empty name")
    [(path, fmt)] = resolve_formats([path], fmt)
    source = InputFile(path)
    digest = source.digest()
    result = IngestResult(path=path, checkpoint=checkpoint, format=fmt)
    if is_ingested(store, digest, checkpoint):
        result.already_ingested = True
        return result

    bad: list[RecordError] = []
    tables = ("rollouts", "messages", "segments")
    with store.staging(tables) as stage, (progress or NullProgress()).track(f"ingest {path.name}", None) as advance:
        seen = source_lines(store, checkpoint)
        next_rollout = store.next_id("rollouts", "rollout_key")
        next_segment = store.next_id("segments", "segment_id")
        batch = _Batch()
        for item in parse(source, fmt, score):
            if isinstance(item, Rollout) and item.rollout_id in seen:
                item = RecordError(
                    str(path),
                    item.line,
                    "rollout_id",
                    f"duplicate {item.rollout_id!r} in checkpoint {checkpoint!r}"
                    f" (first at line {seen[item.rollout_id]})",
                )
            if isinstance(item, RecordError):
                if not skip_bad:
                    raise item
                bad.append(item)
                continue
            rollout_key = next_rollout + result.rollouts
            try:
                rows = _rows(item, rollout_key, checkpoint, digest, next_segment + result.segments)
            except Exception as exc:  # anything unexpected in one record is that record's error
                error = RecordReader(str(path), item.line).unexpected(exc)
                if not skip_bad:
                    raise error from exc
                bad.append(error)
                continue
            seen[item.rollout_id] = item.line
            result.warnings.extend(item.warnings)
            batch.rollouts.append(rows[0])
            batch.messages.extend(rows[1])
            batch.segments.extend(rows[2])
            result.segments += len(rows[2])
            result.assistant_turns += sum(1 for m in item.messages if m.role == "assistant")
            result.reasoning_turns += len({s["message_index"] for s in rows[2] if s["kind"] == "reasoning"})
            result.rollouts += 1
            advance(1, status=f"{result.segments} segments")
            if len(batch.rollouts) >= FLUSH_ROLLOUTS:
                batch.flush(store, stage)
        if result.rollouts == 0:
            first = bad[0] if bad else RecordError(str(path), 1, "file", "no rollouts")
            raise RecordError(
                first.path,
                first.line,
                first.field,
                first.problem + (f" ({len(bad)} bad records, none usable)" if bad else ""),
            )
        batch.flush(store, stage)
        with store.transaction():
            store.publish_staged(stage, tables)
            register_source(store, checkpoint, digest, path, fmt, result.rollouts, len(bad), datetime.now(UTC))
    result.skipped = len(bad)
    if bad:
        result.quarantine = _write_quarantine(quarantine_path(store, path, checkpoint, digest), source, bad)
    return result


def _rows(
    rollout: Rollout, rollout_key: int, checkpoint: str, digest: str, first_segment: int
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The rollout's row, its message rows and its segment rows (segment ids from `first_segment`)."""
    messages = [message_row(rollout_key, i, m) for i, m in enumerate(rollout.messages)]
    segments = [
        {
            "segment_id": first_segment + n,
            "rollout_key": rollout_key,
            "message_index": row.message_index,
            "part_index": row.part_index,
            "kind": row.kind,
            "text": row.text,
            "tool_name": row.tool_name,
            "tool_args": row.tool_args,
            "args_valid": row.args_valid,
            "origin": row.origin,
            "content_hash": row.content_hash,
        }
        for n, row in enumerate(segment_rollout(rollout))
    ]
    return _rollout_row(rollout, rollout_key, checkpoint, digest), messages, segments


def _rollout_row(rollout: Rollout, rollout_key: int, checkpoint: str, digest: str) -> dict[str, Any]:
    return {
        "rollout_key": rollout_key,
        "checkpoint": checkpoint,
        "rollout_id": rollout.rollout_id,
        "task_id": rollout.task_id,
        "environment_id": rollout.environment_id,
        "trial": rollout.trial,
        "reward": rollout.reward,
        "source_hash": digest,
        "source_line": rollout.line,
        "n_messages": len(rollout.messages),
        "metadata": json.dumps(rollout.metadata, ensure_ascii=False, default=str) if rollout.metadata else None,
        **asdict(rollout.strata),
    }


def _write_quarantine(target: Path, source: InputFile, bad: list[RecordError]) -> Path:
    """One JSON line per bad record: where, what is wrong, and the record's first line of text."""
    wanted = {e.line for e in bad}
    if source.magic() == b"PK\x03\x04":  # an Inspect .eval zip: the report names the samples without their text
        text = {}
    else:
        text = {
            number: line.rstrip("\n")
            for number, line in source.numbered()
            if number in wanted and isinstance(line, str)
        }
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as out:
        for error in bad:
            out.write(
                json.dumps(
                    {
                        "file": error.path,
                        "line": error.line,
                        "field": error.field,
                        "problem": error.problem,
                        "text": text.get(error.line, "")[:10000],
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    return target
