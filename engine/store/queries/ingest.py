"""What ingesting writes besides the bulk rows: checkpoints, sources, and a checkpoint copied from another
store (the A/A check's input)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import InputError
from engine.store.queries.base import Executor, fetch_rows, fetchone

if TYPE_CHECKING:
    from engine.store.store import Store


def is_ingested(con: Executor, source_hash: str, checkpoint: str) -> bool:
    """Whether a file with this digest was already ingested into `checkpoint`."""
    (n,) = fetchone(
        con, "SELECT count(*) FROM sources WHERE source_hash = ? AND checkpoint = ?", [source_hash, checkpoint]
    )
    return bool(n)


def source_lines(con: Executor, checkpoint: str) -> dict[str, int]:
    """Each rollout id of `checkpoint` with the source line it came from."""
    return dict(fetch_rows(con, "SELECT rollout_id, source_line FROM rollouts WHERE checkpoint = ?", [checkpoint]))


def register_source(
    con: Executor, checkpoint: str, digest: str, path: Path, fmt: str, n: int, skipped: int, at: datetime
) -> None:
    """Record an ingested file (`sources`) and its checkpoint (`checkpoints`, in ingest order, once)."""
    con.execute(
        "INSERT INTO checkpoints SELECT ?, (SELECT count(*) FROM checkpoints), ? "
        "WHERE NOT EXISTS (SELECT 1 FROM checkpoints WHERE checkpoint = ?)",
        [checkpoint, at, checkpoint],
    )
    con.execute(
        "INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?)", [digest, checkpoint, str(path), fmt, n, skipped, at]
    )


def replace_checkpoints(con: Executor, names: tuple[str, ...], at: datetime) -> None:
    """Make `names` the study's checkpoints, in this order."""
    con.execute("DELETE FROM checkpoints")
    for ordinal, name in enumerate(names):
        con.execute("INSERT INTO checkpoints VALUES (?, ?, ?)", [name, ordinal, at])


def copy_checkpoint(store: Store, source: Path, checkpoint: str | None) -> str:
    """Copy one checkpoint's rollouts (without their split), messages and segments from the store at `source`
    (default: its first checkpoint), in one transaction; returns the checkpoint's name."""
    store.execute(f"ATTACH '{str(source).replace(chr(39), chr(39) * 2)}' AS src (READ_ONLY)")
    try:
        names = [r[0] for r in fetch_rows(store, "SELECT checkpoint FROM src.checkpoints ORDER BY ordinal")]
        chosen = checkpoint or (names[0] if names else None)
        if chosen is None or chosen not in names:
            raise InputError(f"{source}: no checkpoint named {chosen!r} (have: {', '.join(names) or 'none'})")
        keys = "rollout_key IN (SELECT rollout_key FROM src.rollouts WHERE checkpoint = ?)"
        with store.transaction() as con:
            con.execute(
                "INSERT INTO rollouts BY NAME SELECT * EXCLUDE (split) FROM src.rollouts WHERE checkpoint = ?", [chosen]
            )
            con.execute(f"INSERT INTO messages BY NAME SELECT * FROM src.messages WHERE {keys}", [chosen])
            con.execute(f"INSERT INTO segments BY NAME SELECT * FROM src.segments WHERE {keys}", [chosen])
    finally:
        store.execute("DETACH src")
    return chosen
