"""Rollouts a page at a time, one transcript, a segment's place, the rollout table's columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.store.queries.base import (
    SEGMENT_REF_COLUMNS,
    Connection,
    Executor,
    SegmentRef,
    fetch_dicts,
    fetch_rows,
    fetchone,
    json_value,
    segment_ref,
)

if TYPE_CHECKING:  # pyarrow loads on first use: the TUI imports this module on its start-up path
    import pyarrow as pa


@dataclass(frozen=True)
class RolloutRow:
    rollout_key: int
    checkpoint: str
    rollout_id: str
    task_id: str
    trial: int | None
    reward: float | None
    split: str | None
    n_messages: int
    n_segments: int


@dataclass(frozen=True)
class RolloutPage:
    rows: list[RolloutRow]
    offset: int
    total: int


_ROLLOUT_COLUMNS = "r.rollout_key, r.checkpoint, r.rollout_id, r.task_id, r.trial, r.reward, r.split, r.n_messages"


def _rollout_rows(con: Connection, sql: str, params: list[Any]) -> list[RolloutRow]:
    """Rollouts selected by `sql` (the columns of `_ROLLOUT_COLUMNS`), with their segment counts: counted
    for these rollouts only, in one query, not once per row."""
    rows = fetch_dicts(con, sql, params)
    keys = [r["rollout_key"] for r in rows]
    counts = (
        dict(
            con.execute(
                "SELECT rollout_key, count(*) FROM segments WHERE rollout_key IN (SELECT unnest(?)) GROUP BY 1", [keys]
            ).fetchall()
        )
        if keys
        else {}
    )
    return [RolloutRow(**r, n_segments=int(counts.get(r["rollout_key"], 0))) for r in rows]


def rollout_page(
    con: Connection, checkpoint: str | None = None, search: str = "", offset: int = 0, limit: int = 200
) -> RolloutPage:
    """Rollouts by task, then checkpoint, then trial; `search` matches task or rollout id."""
    clauses, params = ["TRUE"], []
    if checkpoint:
        clauses.append("r.checkpoint = ?")
        params.append(checkpoint)
    if search:
        clauses.append("(r.task_id ILIKE ? OR r.rollout_id ILIKE ?)")
        params += [f"%{search}%", f"%{search}%"]
    where = " AND ".join(clauses)
    total = int(fetchone(con, f"SELECT count(*) FROM rollouts r WHERE {where}", params)[0])
    rows = _rollout_rows(
        con,
        f"SELECT {_ROLLOUT_COLUMNS} FROM rollouts r JOIN checkpoints c USING (checkpoint) WHERE {where} "
        "ORDER BY length(r.task_id), r.task_id, c.ordinal, r.trial NULLS LAST, r.rollout_id LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )
    return RolloutPage(rows=rows, offset=offset, total=total)


def counterpart_rollouts(con: Connection, rollout_key: int) -> list[RolloutRow]:
    """The same task's rollouts in the other checkpoints, same trial first."""
    return _rollout_rows(
        con,
        f"SELECT {_ROLLOUT_COLUMNS} FROM rollouts r JOIN rollouts me ON me.rollout_key = ? "
        "JOIN checkpoints c ON c.checkpoint = r.checkpoint "
        "WHERE r.task_id = me.task_id AND r.checkpoint <> me.checkpoint "
        "ORDER BY c.ordinal, (r.trial IS NOT DISTINCT FROM me.trial) DESC, r.trial NULLS LAST, r.rollout_id",
        [rollout_key],
    )


@dataclass(frozen=True)
class MessageRow:
    message_index: int
    role: str
    content: str | None
    reasoning: str | None
    tool_calls: list[dict[str, Any]]
    tool_call_id: str | None
    name: str | None
    is_error: bool | None


@dataclass(frozen=True)
class SegmentRow:
    segment_id: int
    message_index: int
    part_index: int
    kind: str
    tool_name: str | None


@dataclass(frozen=True)
class Transcript:
    rollout: RolloutRow
    messages: list[MessageRow]
    segments: list[SegmentRow]


def transcript(con: Connection, rollout_key: int) -> Transcript | None:
    """A whole rollout: its messages (context included) and the segments that point into them."""
    rollout = _rollout_rows(con, f"SELECT {_ROLLOUT_COLUMNS} FROM rollouts r WHERE r.rollout_key = ?", [rollout_key])
    if not rollout:
        return None
    messages = []
    for r in fetch_dicts(
        con,
        "SELECT message_index, role, content, reasoning, tool_calls, tool_call_id, name, is_error "
        "FROM messages WHERE rollout_key = ? ORDER BY message_index",
        [rollout_key],
    ):
        calls = json_value(r["tool_calls"])
        messages.append(MessageRow(**{**r, "tool_calls": calls if isinstance(calls, list) else []}))
    segments = [
        SegmentRow(**r)
        for r in fetch_dicts(
            con,
            "SELECT segment_id, message_index, part_index, kind, tool_name FROM segments "
            "WHERE rollout_key = ? ORDER BY message_index, part_index, segment_id",
            [rollout_key],
        )
    ]
    return Transcript(rollout=rollout[0], messages=messages, segments=segments)


def segment_location(con: Connection, segment_id: int) -> SegmentRef | None:
    rows = fetch_dicts(
        con,
        f"SELECT {SEGMENT_REF_COLUMNS} FROM segments s JOIN rollouts r USING (rollout_key) WHERE s.segment_id = ?",
        [segment_id],
    )
    return segment_ref(rows[0]) if rows else None


def rollout_columns(con: Executor) -> list[str]:
    """The rollouts table's column names."""
    return [r[0] for r in fetch_rows(con, "SELECT column_name FROM (DESCRIBE rollouts)")]


def count_where(con: Executor, expression: str) -> int:
    """How many rollouts a (checked) `--where` expression keeps; DuckDB's error when it does not bind."""
    return int(fetch_rows(con, f"SELECT count(*) FROM rollouts WHERE ({expression})")[0][0])


def segments_at(con: Connection, positions: pa.Table) -> list[tuple[str, str, int]]:
    """(label, split, segment id) of the segments at `positions` (label, checkpoint, rollout_id, message_index,
    part_index, kind) that lie in a split. `con` is a cursor of its own (the positions are registered on it)."""
    con.register("_positions", positions)
    try:
        return [
            (str(label), str(split), int(segment_id))
            for label, split, segment_id in fetch_rows(
                con,
                "SELECT p.label, r.split, s.segment_id FROM _positions p JOIN rollouts r "
                "ON r.checkpoint = p.checkpoint AND r.rollout_id = p.rollout_id JOIN segments s ON s.rollout_key = "
                "r.rollout_key AND s.message_index = p.message_index AND s.part_index = p.part_index "
                "AND s.kind = p.kind WHERE r.split IN ('discovery', 'heldout')",
            )
        ]
    finally:
        con.unregister("_positions")


def has_heldout(con: Executor) -> bool:
    """Whether the split held any rollouts out (a study before its split, or with --holdout 0, has none)."""
    return bool(fetchone(con, "SELECT count(*) > 0 FROM rollouts WHERE split = 'heldout'")[0])
