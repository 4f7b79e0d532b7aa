"""Held-out evidence shown to a person, and what it makes of the hypotheses they write afterwards.

A hypothesis written after reading held-out examples is no longer tested on data it was not drawn from: the
person may have phrased it to fit what they saw. Logged in `heldout_views`: every display of held-out labelled
examples (`rldiff hypothesis show`, the TUI's held-out examples key, the MCP `get_hypothesis` tool asked for
examples, a report with examples), every held-out rollout read (the TUI's transcript, MCP `read_rollout` and
`read_segment`) and every showing of a small study's whole-study exploratory ranking (`show_exploratory`). A
user hypothesis added after the first view is marked exploratory: still tested and counted in the held-out
family's BH, shown with its numbers, never 'validated' (docs/statistics.md, "No leaks").
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from engine.store.queries.base import Connection
from engine.store.queries.overview import StudySummary, exploratory_ranking
from engine.store.queries.testing import first_view, record_view

VIAS = ("cli", "tui", "mcp", "report")


def record_heldout_view(con: Connection, via: str, hypothesis_id: int | None = None) -> None:
    """Log that held-out evidence (of `hypothesis_id`, when one's) is being shown through `via`."""
    if via not in VIAS:
        raise ValueError(f"via must be one of {VIAS}, not {via!r}")
    record_view(con, datetime.now(UTC).replace(tzinfo=None), via, hypothesis_id)


def show_exploratory(con: Connection, via: str, summary: StudySummary) -> list[dict[str, Any]]:
    """A small study's whole-study ranking (`exploratory_ranking` of the caller's `summary`), logging a held-out
    view when it has a row to show: the ranking includes held-out rollouts."""
    rows = exploratory_ranking(con, summary)
    if rows:
        record_heldout_view(con, via)
    return rows


def first_heldout_view(con: Connection) -> datetime | None:
    """When held-out evidence was first shown to anyone, or None."""
    return first_view(con)


def exploratory_note(con: Connection) -> str | None:
    """Why a hypothesis written now is exploratory, or None when no held-out evidence was shown yet."""
    viewed_at = first_heldout_view(con)
    if viewed_at is None:
        return None
    return (
        f"exploratory: written after held-out evidence was shown ({viewed_at:%Y-%m-%d %H:%M} UTC), so the "
        "held-out split no longer tests it independently; counted in the family, never validated"
    )
