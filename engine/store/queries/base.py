"""What every query module shares: the connection type, rows as dicts, a segment's reference."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import duckdb

Connection = duckdb.DuckDBPyConnection


def fetch_dicts(con: Connection, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def json_value(value: Any) -> Any:
    if value is None or not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


@dataclass(frozen=True)
class SegmentRef:
    """Where a segment lives: enough to open its rollout at it."""

    segment_id: int
    rollout_key: int
    checkpoint: str
    rollout_id: str
    task_id: str
    message_index: int
    kind: str
    text: str


SEGMENT_REF_COLUMNS = (
    "s.segment_id, s.rollout_key, r.checkpoint, r.rollout_id, r.task_id, s.message_index, s.kind, s.text"
)


def segment_ref(r: dict[str, Any]) -> SegmentRef:
    return SegmentRef(**{k: r[k] for k in SegmentRef.__dataclass_fields__})
