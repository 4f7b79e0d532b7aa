"""One validated finding of an analysed store made to restate another: the CLI's and the TUI's tests of how such
a finding is listed and described (`engine.store.queries.shared_evidence`)."""

from __future__ import annotations

from pathlib import Path

import duckdb


def restate_a_finding(path: Path) -> tuple[int, int, int]:
    """The second validated hypothesis's positives become half of the first one's, with the same evidence, both
    expecting an increase. Returns the broad finding's id, the narrow one's, and its number of positives."""
    with duckdb.connect(str(path)) as con:
        broad, narrow = (r[0] for r in con.execute(
            "SELECT hypothesis_id FROM hypotheses WHERE status = 'validated' ORDER BY hypothesis_id LIMIT 2"
        ).fetchall())  # fmt: skip
        con.execute("UPDATE hypotheses SET direction = 'increase' WHERE hypothesis_id IN (?, ?)", [broad, narrow])
        con.execute("DELETE FROM hypothesis_labels WHERE hypothesis_id = ?", [narrow])
        con.execute(
            "INSERT INTO hypothesis_labels SELECT ?, segment_id, label, evidence, weight FROM hypothesis_labels "
            "WHERE hypothesis_id = ? AND label AND length(evidence) > 0 AND segment_id % 2 = 0",
            [narrow, broad],
        )
        [(positives,)] = con.execute(
            "SELECT count(*) FROM hypothesis_labels WHERE hypothesis_id = ?", [narrow]
        ).fetchall()
    assert positives > 0
    return broad, narrow, positives
