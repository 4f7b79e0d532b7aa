"""The deltas table: filtered, sorted, a page at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.kinds import DeltaKind, DeltaSort, Direction, Source
from engine.store.queries.base import (
    DELTA_FEATURES,
    ROW_LABEL,
    Connection,
    fetch_dicts,
    fetchone,
    first_row,
    json_value,
)


@dataclass(frozen=True)
class DeltaFilter:
    """What the deltas table shows. `max_q = None` with `tested_only = False` shows untested rows too."""

    kind: DeltaKind | None = None
    direction: Direction | None = None
    source: Source | None = None
    max_q: float | None = None
    tested_only: bool = True
    search: str = ""
    sort: DeltaSort = "q"


# How a deltas table's numbers read, for the caption beneath every rendering of one (CLI, report)
LEVELS_READING = (
    "Before and after: each rollout's own rate (tool calls: among calls to the same tool; 'any': whether it fires "
    "at all), averaged within task; pooled: the share of all segments ('any': of rollouts), which moves with "
    "length, tool mix and task mix and is not tested."
)


@dataclass(frozen=True)
class DeltaRow:
    feature_id: int
    name: str
    label: str
    source: str
    kind: str
    prevalence_before: float | None
    prevalence_after: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    q_value: float | None
    tested: bool
    family: str | None = None  # testing family (BH within it): engine.kinds.FAMILIES
    # the pooled share sum(c) / sum(t) of each checkpoint (untested; moves with length and tool mix)
    pooled_before: float | None = None
    pooled_after: float | None = None


@dataclass(frozen=True)
class DeltaPage:
    rows: list[DeltaRow]
    offset: int
    total: int


DELTA_COLUMNS = (
    f"d.feature_id, f.name, {ROW_LABEL} AS label, f.source, d.kind, d.prevalence_before, d.prevalence_after, d.delta, "
    "d.ci_low, d.ci_high, d.p_value, d.q_value, d.tested, d.family, d.pooled_before, d.pooled_after"
)


_DELTA_ORDER: dict[DeltaSort, str] = {
    "abs_delta": "abs(d.delta) DESC NULLS LAST",
    "increase": "d.delta DESC NULLS LAST",
    "decrease": "d.delta ASC NULLS LAST",
    "q": "d.q_value ASC NULLS LAST, abs(d.delta) DESC NULLS LAST",
    "label": f"{ROW_LABEL} ASC",
}


def delta_row(r: dict[str, Any]) -> DeltaRow:
    return DeltaRow(**{**r, "tested": bool(r["tested"])})


def _delta_where(flt: DeltaFilter) -> tuple[str, list[Any]]:
    clauses: list[str] = ["TRUE"]
    params: list[Any] = []
    if flt.kind:
        clauses.append("d.kind = ?")
        params.append(flt.kind)
    if flt.direction == "increase":
        clauses.append("d.delta > 0")
    elif flt.direction == "decrease":
        clauses.append("d.delta < 0")
    if flt.source:
        clauses.append("f.source = ?")
        params.append(flt.source)
    if flt.max_q is not None:
        clauses.append("d.q_value <= ?")
        params.append(flt.max_q)
    if flt.tested_only:
        clauses.append("d.tested")
    if flt.search:
        clauses.append(f"({ROW_LABEL} ILIKE ? OR f.name ILIKE ?)")
        pattern = f"%{flt.search}%"
        params += [pattern, pattern]
    return " AND ".join(clauses), params


def delta_page(con: Connection, flt: DeltaFilter, offset: int = 0, limit: int = 200) -> DeltaPage:
    """One page of the ranked deltas table and the number of rows the filter matches."""
    if flt.sort not in _DELTA_ORDER:
        raise ValueError(f"unknown sort {flt.sort!r}; one of {', '.join(_DELTA_ORDER)}")
    where, params = _delta_where(flt)
    base = f"FROM {DELTA_FEATURES} WHERE {where}"
    total = int(fetchone(con, f"SELECT count(*) {base}", params)[0])
    rows = fetch_dicts(
        con,
        f"SELECT {DELTA_COLUMNS} {base} ORDER BY {_DELTA_ORDER[flt.sort]}, d.feature_id, d.kind LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )
    return DeltaPage(rows=[delta_row(r) for r in rows], offset=offset, total=total)


# What the deltas run records about its families and the rollouts' length, for readers of its table
_FAMILY_KEYS = (
    "tested_by_family",
    "significant_by_family",
    "length_ratio",
    "segments_per_rollout_before",
    "segments_per_rollout_after",
)


def family_summary(con: Connection) -> dict[str, Any] | None:
    """Tests and findings per testing family and the rollouts' length change, from the last finished deltas
    run; None before one that records them."""
    row = first_row(
        con, "SELECT metrics FROM runs WHERE stage = 'deltas' AND status = 'done' ORDER BY finished_at DESC LIMIT 1"
    )
    metrics = (json_value(row[0]) if row else None) or {}
    return {k: metrics.get(k) for k in _FAMILY_KEYS} if "tested_by_family" in metrics else None


def length_line(summary: dict[str, Any] | None) -> str:
    """How much longer the after-rollouts are, which 'any' rows are tested adjusted for ('' without a summary)."""
    if not summary:
        return ""
    before, after = summary.get("segments_per_rollout_before"), summary.get("segments_per_rollout_after")
    length = f" ({before:.1f} -> {after:.1f} segments a rollout)" if before is not None and after is not None else ""
    return (
        f"Rollouts are {summary['length_ratio']:.2f}x as long after{length}; 'any' rows are tested adjusted for "
        "log-length."
    )


def families_line(summary: dict[str, Any] | None) -> str:
    """Beside a deltas table: tests and findings per testing family (BH runs within each) and the length change
    (`length_line`); '' without a summary."""
    if not summary:
        return ""
    significant = summary["significant_by_family"] or {}
    per_family = ", ".join(
        f"{name} {n} ({significant.get(name, 0)} significant)" for name, n in summary["tested_by_family"].items()
    )
    return f"BH within each family: {per_family}. {length_line(summary)}"
