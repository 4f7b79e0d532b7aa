"""Hypotheses, their held-out examples, and segments to hand-label."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.kinds import UNDECIDED, DecisionFilter, Status
from engine.store.queries.base import SEGMENT_REF_COLUMNS, Connection, SegmentRef, fetch_dicts, json_value, segment_ref


@dataclass(frozen=True)
class HypothesisRow:
    hypothesis_id: int
    statement: str
    direction: str
    labeler: str
    spec: Any
    status: str
    origin: str
    prevalence_before: float | None
    prevalence_after: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    q_value: float | None
    mde: float | None
    n_labeled: int | None
    reward_assoc: float | None
    reason: str | None
    decision: str | None
    note: str | None
    n_user_labels: int = 0
    provenance: dict[str, Any] = field(default_factory=dict)


_HYPOTHESIS_ORDER = (
    "CASE status WHEN 'validated' THEN 0 WHEN 'inconclusive' THEN 1 WHEN 'proposed' THEN 2 ELSE 3 END, "
    "q_value ASC NULLS LAST, hypothesis_id"
)


def _hypothesis_rows(con: Connection, where: str, params: list[Any], limit: int | None = None) -> list[HypothesisRow]:
    names = [f for f in HypothesisRow.__dataclass_fields__ if f != "n_user_labels"]
    sql = (
        f"SELECT {', '.join('h.' + n for n in names)}, "
        "(SELECT count(*) FROM user_labels u WHERE u.hypothesis_id = h.hypothesis_id) AS n_user_labels "
        f"FROM hypotheses h WHERE {where} ORDER BY {_HYPOTHESIS_ORDER}"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    out = []
    for r in fetch_dicts(con, sql, params):
        r["spec"] = json_value(r["spec"])
        r["provenance"] = json_value(r["provenance"]) or {}
        out.append(HypothesisRow(**r))
    return out


def hypotheses(
    con: Connection, status: Status | None = None, decision: DecisionFilter | None = None
) -> list[HypothesisRow]:
    """The triage queue: validated first, then by q. `decision='undecided'` selects those without one."""
    clauses: list[str] = ["TRUE"]
    params: list[Any] = []
    if status:
        clauses.append("status = ?")
        params.append(status)
    if decision == UNDECIDED:
        clauses.append("decision IS NULL")
    elif decision:
        clauses.append("decision = ?")
        params.append(decision)
    return _hypothesis_rows(con, " AND ".join(clauses), params)


def hypothesis(con: Connection, hypothesis_id: int) -> HypothesisRow | None:
    rows = _hypothesis_rows(con, "hypothesis_id = ?", [hypothesis_id])
    return rows[0] if rows else None


def top_findings(con: Connection, limit: int = 10) -> list[HypothesisRow]:
    """Validated hypotheses not rejected by the user, most significant first."""
    return _hypothesis_rows(con, "status = 'validated' AND coalesce(decision, '') <> 'rejected'", [], limit=limit)


@dataclass(frozen=True)
class HypothesisExample:
    segment: SegmentRef
    evidence: str | None
    split: str | None  # the split the labels are on ('heldout'): shown marked as such


def hypothesis_examples(con: Connection, hypothesis_id: int, per_checkpoint: int = 3) -> list[HypothesisExample]:
    """Held-out segments the labeler marked positive, a few from each checkpoint."""
    return [
        HypothesisExample(segment=segment_ref(r), evidence=r["evidence"], split=r["split"])
        for r in fetch_dicts(
            con,
            f"SELECT {SEGMENT_REF_COLUMNS}, l.evidence, r.split, c.ordinal FROM hypothesis_labels l "
            "JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key) "
            "JOIN checkpoints c ON c.checkpoint = r.checkpoint "
            "WHERE l.hypothesis_id = ? AND l.label "
            "QUALIFY row_number() OVER (PARTITION BY r.checkpoint ORDER BY s.segment_id) <= ? "
            "ORDER BY c.ordinal, s.segment_id",
            [hypothesis_id, per_checkpoint],
        )
    ]


@dataclass(frozen=True)
class LabelCandidate:
    """A segment to label by hand, shown blind: no checkpoint, no labeler verdict."""

    segment_id: int
    kind: str
    text: str


def label_candidates(con: Connection, hypothesis_id: int, limit: int = 20) -> list[LabelCandidate]:
    """Segments the labeler judged for this hypothesis that the user has not labelled: a sample stratified by
    checkpoint and the labeler's verdict (the strata taken in turn, each in a fixed pseudo-random order), so
    that the calibration has hand labels of both verdicts in both checkpoints however rare one is."""
    return [
        LabelCandidate(**r)
        for r in fetch_dicts(
            con,
            "SELECT s.segment_id, s.kind, s.text FROM hypothesis_labels l JOIN segments s USING (segment_id) "
            "JOIN rollouts r USING (rollout_key) "
            "WHERE l.hypothesis_id = ? AND NOT EXISTS (SELECT 1 FROM user_labels u "
            "WHERE u.hypothesis_id = l.hypothesis_id AND u.segment_id = l.segment_id) "
            "ORDER BY row_number() OVER (PARTITION BY r.checkpoint, l.label ORDER BY hash(s.segment_id, "
            "l.hypothesis_id)), hash(s.segment_id, l.hypothesis_id) LIMIT ?",
            [hypothesis_id, limit],
        )
    ]
