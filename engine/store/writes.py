"""Small writes a person makes while triaging: decisions, notes, hand labels and their own hypotheses.

Each takes a connection or cursor (the TUI runs them in a worker thread on a cursor of its own) and commits
at once. Bulk writes by pipeline stages go through `Store.append`, not here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from engine.errors import InputError
from engine.kinds import DECISIONS, DIRECTIONS, LABELERS
from engine.store.queries.base import Connection, fetchone


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _require_hypothesis(con: Connection, hypothesis_id: int) -> None:
    if not fetchone(con, "SELECT count(*) FROM hypotheses WHERE hypothesis_id = ?", [hypothesis_id])[0]:
        raise InputError(f"no hypothesis with id {hypothesis_id}")


def set_decision(con: Connection, hypothesis_id: int, decision: str | None) -> None:
    """Record the user's triage of a hypothesis: 'accepted', 'rejected', or None to clear it."""
    if decision is not None and decision not in DECISIONS:
        raise InputError(f"decision must be one of {', '.join(DECISIONS)} (or none), not {decision!r}")
    _require_hypothesis(con, hypothesis_id)
    con.execute(
        "UPDATE hypotheses SET decision = ?, decided_at = ? WHERE hypothesis_id = ?",
        [decision, _now() if decision else None, hypothesis_id],
    )


def set_note(con: Connection, hypothesis_id: int, note: str) -> None:
    """Replace the user's note on a hypothesis (an empty note clears it)."""
    _require_hypothesis(con, hypothesis_id)
    con.execute("UPDATE hypotheses SET note = ? WHERE hypothesis_id = ?", [note.strip() or None, hypothesis_id])


def set_user_label(con: Connection, hypothesis_id: int, segment_id: int, label: bool) -> None:
    """Record (or replace) the user's yes/no label of one segment for a hypothesis."""
    _require_hypothesis(con, hypothesis_id)
    if not fetchone(con, "SELECT count(*) FROM segments WHERE segment_id = ?", [segment_id])[0]:
        raise InputError(f"no segment with id {segment_id}")
    con.execute(
        "INSERT OR REPLACE INTO user_labels (hypothesis_id, segment_id, label, created_at) VALUES (?, ?, ?, ?)",
        [hypothesis_id, segment_id, bool(label), _now()],
    )


def add_user_hypothesis(
    con: Connection,
    statement: str,
    direction: str,
    labeler: str,
    spec: dict[str, Any],
    exploratory: str | None = None,
) -> int:
    """Add a hypothesis the user wrote, status 'proposed' until tested; `exploratory`: why it is (written after
    held-out evidence was shown). Returns its id."""
    if not statement.strip():
        raise InputError("a hypothesis needs a statement")
    if direction not in DIRECTIONS:
        raise InputError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
    if labeler not in LABELERS:
        raise InputError(f"labeler must be one of {', '.join(LABELERS)}, not {labeler!r}")
    con.execute("BEGIN TRANSACTION")
    try:
        new_id = int(fetchone(con, "SELECT coalesce(max(hypothesis_id) + 1, 0) FROM hypotheses")[0])
        con.execute(
            "INSERT INTO hypotheses (hypothesis_id, statement, direction, labeler, spec, status, origin, "
            "provenance, created_at, exploratory) VALUES (?, ?, ?, ?, ?, 'proposed', 'user', ?, ?, ?)",
            [
                new_id,
                statement.strip(),
                direction,
                labeler,
                json.dumps(spec),
                json.dumps({"origin": "user"} | ({"exploratory": exploratory} if exploratory else {})),
                _now(),
                exploratory is not None,
            ],
        )
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    return new_id
