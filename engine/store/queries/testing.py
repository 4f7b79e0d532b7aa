"""What testing hypotheses reads and writes: a hypothesis's spec, its labels, its held-out test results and
verdict, calibrations, the held-out views that make later hypotheses exploratory, and the hypotheses stage's
pruning and feature explanations.

Each takes a `Store` or a connection or cursor and writes at once; callers hold the transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.errors import InputError
from engine.store.queries.base import Executor, fetchone, first_row

# `hypotheses` columns a test's result sets, in the order `set_result` takes them (engine.hypotheses.validate's
# `Validation` fields after the id).
RESULT_COLUMNS = (
    "status",
    "reason",
    "prevalence_before",
    "prevalence_after",
    "delta",
    "ci_low",
    "ci_high",
    "p_value",
    "q_value",
    "mde",
    "n_labeled",
    "reward_assoc",
)


@dataclass(frozen=True)
class HypothesisSpec:
    """What testing a hypothesis needs: its labeler, its spec and its provenance (JSON, which names the split
    it is tested on)."""

    labeler: str
    spec: dict[str, Any]
    provenance: str | None


def hypothesis_spec(con: Executor, hypothesis_id: int) -> HypothesisSpec:
    """A hypothesis's labeler, spec and provenance; InputError when there is no such hypothesis."""
    row = first_row(con, "SELECT labeler, spec, provenance FROM hypotheses WHERE hypothesis_id = ?", [hypothesis_id])
    if row is None:
        raise InputError(f"no hypothesis with id {hypothesis_id}")
    return HypothesisSpec(labeler=row[0], spec=json.loads(row[1]), provenance=row[2])


def delete_labels(con: Executor, hypothesis_id: int) -> None:
    """Remove one hypothesis's labels."""
    con.execute("DELETE FROM hypothesis_labels WHERE hypothesis_id = ?", [hypothesis_id])


def set_result(con: Executor, hypothesis_id: int, result: tuple[Any, ...], tested_at: datetime) -> None:
    """Record a hypothesis's test result (values in `RESULT_COLUMNS` order) and when it was tested."""
    if len(result) != len(RESULT_COLUMNS):
        raise ValueError(f"a result has {len(RESULT_COLUMNS)} values ({', '.join(RESULT_COLUMNS)}), not {len(result)}")
    assignments = ", ".join(f"{c} = ?" for c in RESULT_COLUMNS)
    con.execute(
        f"UPDATE hypotheses SET {assignments}, tested_at = ? WHERE hypothesis_id = ?",
        [*result, tested_at, hypothesis_id],
    )


def record_heldout_test(con: Executor, statement: str, spec: str, p_value: float | None, tested_at: datetime) -> None:
    """Keep a held-out test's p-value by statement and spec, so later families count it (BH over all tests)."""
    con.execute(
        "INSERT OR REPLACE INTO heldout_tests VALUES (?, ?::VARCHAR, ?, ?)", [statement, spec, p_value, tested_at]
    )


def set_provenance(con: Executor, hypothesis_id: int, provenance: str) -> None:
    """Replace a hypothesis's provenance (JSON)."""
    con.execute("UPDATE hypotheses SET provenance = ? WHERE hypothesis_id = ?", [provenance, hypothesis_id])


def keep_only(con: Executor, hypothesis_ids: list[int]) -> None:
    """Delete every hypothesis, and its labels, but those in `hypothesis_ids`."""
    con.execute(
        "DELETE FROM hypothesis_labels WHERE hypothesis_id NOT IN (SELECT unnest(?::INTEGER[]))", [hypothesis_ids]
    )
    con.execute("DELETE FROM hypotheses WHERE hypothesis_id NOT IN (SELECT unnest(?::INTEGER[]))", [hypothesis_ids])


def set_explanation(con: Executor, feature_id: int, text: str) -> None:
    """Set a feature's explanation (written by the hypotheses stage's LLM)."""
    con.execute("UPDATE features SET explanation = ? WHERE feature_id = ?", [text, feature_id])


def replace_calibration(con: Executor, hypothesis_id: int, result: str, computed_at: datetime) -> None:
    """Replace a hypothesis's stored labeler calibration (JSON)."""
    con.execute("DELETE FROM hypothesis_calibrations WHERE hypothesis_id = ?", [hypothesis_id])
    con.execute("INSERT INTO hypothesis_calibrations VALUES (?, ?, ?)", [hypothesis_id, result, computed_at])


def calibration(con: Executor, hypothesis_id: int) -> tuple[str, bool] | None:
    """A hypothesis's stored calibration (JSON) and whether it was re-tested since; None when never calibrated."""
    row = first_row(
        con,
        "SELECT c.result, h.tested_at IS NOT NULL AND h.tested_at > c.computed_at FROM hypothesis_calibrations c "
        "JOIN hypotheses h USING (hypothesis_id) WHERE c.hypothesis_id = ?",
        [hypothesis_id],
    )
    return None if row is None else (row[0], bool(row[1]))


def record_view(con: Executor, viewed_at: datetime, via: str, hypothesis_id: int | None) -> None:
    """Log one display of held-out evidence."""
    con.execute("INSERT INTO heldout_views VALUES (?, ?, ?)", [viewed_at, via, hypothesis_id])


def first_view(con: Executor) -> datetime | None:
    """When held-out evidence was first shown, or None."""
    (viewed_at,) = fetchone(con, "SELECT min(viewed_at) FROM heldout_views")
    return viewed_at
