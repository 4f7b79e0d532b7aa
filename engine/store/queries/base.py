"""What every query module shares: the connection type, typed row fetches, rows as dicts, a segment's reference."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

import duckdb

from engine.errors import RldiffError

Connection = duckdb.DuckDBPyConnection
# feature_deltas rows `d` with their feature `f` and the label drawn from the feature's examples of the row's kind
# (`kl`, where it has one); ROW_LABEL is what such a row is called: that label, or the feature's own ('any' rows,
# structural features, stores analysed before per-kind labels).
KIND_LABEL_JOIN = "LEFT JOIN feature_kind_labels kl ON kl.feature_id = d.feature_id AND kl.kind = d.kind"
DELTA_FEATURES = f"feature_deltas d JOIN features f USING (feature_id) {KIND_LABEL_JOIN}"
ROW_LABEL = "coalesce(kl.label, f.label)"


class Executor(Protocol):
    """What runs a statement: a DuckDB connection or cursor, or a `Store` (its writer's connection)."""

    def execute(self, sql: str, params: list[Any] | None = None, /) -> Connection: ...


def fetchone(con: Executor, sql: str, params: list[Any] | None = None) -> tuple[Any, ...]:
    """The first row of a query that always returns one (an aggregate); a clear error when it returns none."""
    rows = con.execute(sql, params or []).fetchall()  # fetched to the end: DuckDB 2 keeps the connection busy
    if not rows:
        raise RldiffError(f"the store returned no row for: {sql[:80]}")
    return tuple(rows[0])


def first_row(con: Executor, sql: str, params: list[Any] | None = None) -> tuple[Any, ...] | None:
    """The first row of a query, or None when it returns none."""
    rows = con.execute(sql, params or []).fetchall()
    return tuple(rows[0]) if rows else None


def fetch_rows(con: Executor, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    """Every row of a query, as tuples."""
    return [tuple(r) for r in con.execute(sql, params or []).fetchall()]


def fetch_dicts(con: Executor, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    """Every row of a query, as dicts by column name."""
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
