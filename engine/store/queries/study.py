"""The study's own records: `meta` entries, the last analysis's configuration, the compared checkpoints and
the SAE the features stage used.

`engine.study` (the engine's view, a resolved `AnalyzeConfig`) and the TUI both read them here.
"""

from __future__ import annotations

import json
from typing import Any

from engine.store.queries.base import Executor, fetch_rows, first_row

CONFIG_KEY = "analysis_config"  # the whole configuration of the last `analyze`, as JSON
SAE_SOURCE_KEY = "sae_source"  # the SAE the last features run used: a local folder, 'release/sae_id', or ''


def meta_value(con: Executor, key: str) -> str | None:
    """One `meta` entry, or None."""
    row = first_row(con, "SELECT value FROM meta WHERE key = ?", [key])
    return None if row is None else row[0]


def analysis_config(con: Executor) -> dict[str, Any]:
    """The last analysis's configuration as stored ({} when none ran).

    Stores analysed before the configuration was kept in `meta` fall back to the last finished hypotheses
    run's record (which holds the checkpoints, seed and testing settings, not every field)."""
    raw = meta_value(con, CONFIG_KEY)
    if raw is None:
        row = first_row(
            con,
            "SELECT config FROM runs WHERE stage = 'hypotheses' AND status = 'done' ORDER BY finished_at DESC LIMIT 1",
        )
        raw = None if row is None else row[0]
    return dict(json.loads(raw)) if raw else {}


def checkpoint_names(con: Executor) -> list[str]:
    """Every checkpoint, in ingest order."""
    return [r[0] for r in fetch_rows(con, "SELECT checkpoint FROM checkpoints ORDER BY ordinal")]


def default_pair(names: list[str], before: str | None, after: str | None) -> tuple[str | None, str | None]:
    """`before` and `after`, each defaulting to the first and second checkpoint ingested (None if missing)."""
    return before or (names[0] if names else None), after or (names[1] if len(names) > 1 else None)


def compared_checkpoints(con: Executor) -> tuple[str | None, str | None]:
    """The (before, after) pair of the last analysis, else the first two checkpoints ingested."""
    config = analysis_config(con)
    return default_pair(checkpoint_names(con), config.get("before"), config.get("after"))


def sae_source(con: Executor) -> str:
    """Where the SAE of the current features came from ('' when none is recorded).

    Stores whose features ran before the location was kept in `meta` fall back to the last finished features
    run's metrics."""
    value = meta_value(con, SAE_SOURCE_KEY)
    if value is None:
        row = first_row(
            con,
            "SELECT json_extract_string(metrics, '$.sae_source') FROM runs WHERE stage = 'features' "
            "AND status = 'done' ORDER BY finished_at DESC LIMIT 1",
        )
        value = None if row is None else row[0]
    return value or ""


def set_split_mode(con: Executor, mode: str, warning: str | None) -> None:
    """Record how the study was split (`split_mode`) and why, when it is a fallback (`split_warning`)."""
    con.execute("DELETE FROM meta WHERE key IN ('split_mode', 'split_warning')")
    con.execute("INSERT INTO meta VALUES ('split_mode', ?)", [mode])
    if warning:
        con.execute("INSERT INTO meta VALUES ('split_warning', ?)", [warning])
