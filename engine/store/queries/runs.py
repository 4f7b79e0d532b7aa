"""Stage run records (`runs`): whether a stage is up to date, a run's start and end, what a new output
makes stale, and each stage's last configuration."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from engine.store.queries.base import Executor, fetch_rows, fetchone, first_row


def is_done(con: Executor, stage: str, config_hash: str, input_hash: str) -> bool:
    """Whether `stage` has a finished run with this configuration hash on these inputs."""
    (n,) = fetchone(
        con,
        "SELECT count(*) FROM runs WHERE stage = ? AND status = 'done' AND input_hash = ? "
        "AND json_extract_string(config, '$._hash') = ?",
        [stage, input_hash, config_hash],
    )
    return bool(n)


def start_run(
    con: Executor,
    run_id: str,
    stage: str,
    config: str,
    input_hash: str,
    versions: str,
    seed: int | None,
    started_at: datetime,
) -> None:
    """Record a stage run as 'running' (`config` and `versions` as JSON)."""
    con.execute(
        "INSERT INTO runs (run_id, stage, config, input_hash, versions, seed, status, started_at) "
        "VALUES (?, ?, ?, ?, ?, ?, 'running', ?)",
        [run_id, stage, config, input_hash, versions, seed, started_at],
    )


def finish_run(con: Executor, run_id: str, status: str, metrics: str, finished_at: datetime) -> None:
    """Record a run's end: its status ('done' or 'failed') and its metrics (JSON)."""
    con.execute(
        "UPDATE runs SET status = ?, metrics = ?, finished_at = ? WHERE run_id = ?",
        [status, metrics, finished_at, run_id],
    )


def mark_stale(con: Executor, stage: str, tables: tuple[str, ...]) -> None:
    """Clear `tables` (computed by `stage` from an earlier output) and mark `stage`'s finished runs 'stale'."""
    for table in tables:
        con.execute(f"DELETE FROM {table}")
    con.execute("UPDATE runs SET status = 'stale' WHERE stage = ? AND status = 'done'", [stage])


def stage_configs(con: Executor) -> dict[str, dict[str, Any]]:
    """Each stage's configuration in its last finished run."""
    rows = fetch_rows(con, "SELECT stage, arg_max(config, finished_at) FROM runs WHERE status = 'done' GROUP BY stage")
    return {stage: json.loads(config) for stage, config in rows}


def features_reader(con: Executor) -> tuple[str | None, str | None]:
    """(reader, layer) of the last finished features run, as recorded; (None, None) when none ran."""
    row = first_row(
        con,
        "SELECT json_extract_string(config, '$.reader'), json_extract_string(metrics, '$.layer') FROM runs "
        "WHERE stage = 'features' AND status = 'done' ORDER BY started_at DESC LIMIT 1",
    )
    return (None, None) if row is None or row[0] is None else (row[0], row[1])
