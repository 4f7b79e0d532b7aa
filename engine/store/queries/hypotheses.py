"""Hypotheses, their held-out examples, validated findings that share their evidence, and segments to
hand-label."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.kinds import UNDECIDED, DecisionFilter, Status
from engine.store.queries.base import SEGMENT_REF_COLUMNS, Connection, SegmentRef, fetch_dicts, json_value, segment_ref

# A validated finding is listed with a broader one when at least this share of its positive labels have the same
# evidence as the broader one's on the same segments: the same sentences (or spans) decided both, so the two
# likely describe one behaviour. Overlapping segments alone are not enough: a long turn holds several behaviours
# (on the tau2 sample, 161 of 191 "thank you for" turns are also "let me confirm the details" turns, with the
# same evidence in 25).
SAME_EVIDENCE_SHARE = 0.8


@dataclass(frozen=True)
class SharedEvidence:
    """Most of a validated finding's positives decided by the same evidence as a broader validated finding's."""

    hypothesis_id: int  # the broader finding
    shared: int  # positives of this finding with the same evidence as the broader one's on that segment
    positives: int  # positives of this finding

    def phrase(self) -> str:
        return (
            f"likely the same behaviour as finding {self.hypothesis_id}: the same evidence in {self.shared} of "
            f"its {self.positives} positives"
        )


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
    same_evidence: SharedEvidence | None = None  # validated, and likely the same behaviour as a broader finding


_HYPOTHESIS_ORDER = (
    "CASE status WHEN 'validated' THEN 0 WHEN 'inconclusive' THEN 1 WHEN 'proposed' THEN 2 ELSE 3 END, "
    "q_value ASC NULLS LAST, hypothesis_id"
)


def _hypothesis_rows(con: Connection, where: str, params: list[Any], limit: int | None = None) -> list[HypothesisRow]:
    names = [f for f in HypothesisRow.__dataclass_fields__ if f not in ("n_user_labels", "same_evidence")]
    sql = (
        f"SELECT {', '.join('h.' + n for n in names)}, "
        "(SELECT count(*) FROM user_labels u WHERE u.hypothesis_id = h.hypothesis_id) AS n_user_labels "
        f"FROM hypotheses h WHERE {where} ORDER BY {_HYPOTHESIS_ORDER}"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    shared = shared_evidence(con)
    out = []
    for r in fetch_dicts(con, sql, params):
        r["spec"] = json_value(r["spec"])
        r["provenance"] = json_value(r["provenance"]) or {}
        out.append(HypothesisRow(**r, same_evidence=shared.get(r["hypothesis_id"])))
    return _grouped(out)


def shared_evidence(con: Connection) -> dict[int, SharedEvidence]:
    """Validated findings whose positives mostly have the same evidence as a broader validated finding's, in the
    same direction (SAME_EVIDENCE_SHARE). Two positive labels of a segment have the same evidence when their
    evidence (a matched sentence, a regex span, a tool name, a judge's quote) lies in one sentence of it (the
    first occurrence of each evidence string, against the stored sentences), or one evidence string holds the
    other (tool calls have no sentences; a judge may not quote exactly). Findings are taken broadest first (most
    positives), each against the broader ones not themselves listed with another, so a group has one broadest
    finding. Discovery keeps such drafts apart when the narrower one changes more within the broader one's
    segments (docs/hypotheses.md); both are tested, and this says they read as one behaviour."""
    positives = (
        "SELECT l.hypothesis_id, h.direction, l.segment_id, l.evidence FROM hypothesis_labels l "
        "JOIN hypotheses h USING (hypothesis_id) WHERE l.label AND h.status = 'validated'"
    )
    counts = {
        r["hypothesis_id"]: r["n"]
        for r in fetch_dicts(con, f"SELECT hypothesis_id, count(*) AS n FROM ({positives}) GROUP BY ALL")
    }
    pairs = fetch_dicts(
        con,
        f"WITH p AS ({positives}), "
        "twice AS (SELECT segment_id FROM p GROUP BY ALL HAVING count(*) > 1), "
        "found AS (SELECT p.*, strpos(s.text, p.evidence) - 1 AS start FROM p JOIN twice USING (segment_id) "
        "JOIN segments s USING (segment_id) WHERE length(p.evidence) > 0), "
        "located AS (SELECT f.*, t.sentence_id FROM found f LEFT JOIN sentences t ON t.segment_id = f.segment_id "
        "AND f.start >= 0 AND t.char_start < f.start + length(f.evidence) AND t.char_end > f.start) "
        "SELECT a.hypothesis_id AS narrow, b.hypothesis_id AS broad, count(DISTINCT a.segment_id) AS n "
        "FROM located a JOIN located b ON a.segment_id = b.segment_id AND a.direction = b.direction "
        "AND a.hypothesis_id <> b.hypothesis_id WHERE a.sentence_id = b.sentence_id "
        "OR contains(a.evidence, b.evidence) OR contains(b.evidence, a.evidence) GROUP BY ALL",
    )
    same = {(r["narrow"], r["broad"]): r["n"] for r in pairs}
    broadest: list[int] = []
    out: dict[int, SharedEvidence] = {}
    for h in sorted(counts, key=lambda h: (-counts[h], h)):
        n, broad = max(((same.get((h, b), 0), b) for b in broadest), default=(0, -1))
        if n >= SAME_EVIDENCE_SHARE * counts[h]:
            out[h] = SharedEvidence(broad, n, counts[h])
        else:
            broadest.append(h)
    return out


def _grouped(rows: list[HypothesisRow]) -> list[HypothesisRow]:
    """The rows in their order, but each group of findings sharing evidence together where its first member
    stands: the broadest first, then those that likely restate it."""
    groups: dict[int, list[HypothesisRow]] = {}
    for h in rows:
        groups.setdefault(h.same_evidence.hypothesis_id if h.same_evidence else h.hypothesis_id, []).append(h)
    return [h for group in groups.values() for h in sorted(group, key=lambda h: h.same_evidence is not None)]


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


def top_findings(con: Connection, limit: int | None = 10) -> list[HypothesisRow]:
    """Validated hypotheses not rejected by the user, most significant first (all of them when `limit` is None)."""
    return _hypothesis_rows(con, "status = 'validated' AND coalesce(decision, '') <> 'rejected'", [], limit=limit)


@dataclass(frozen=True)
class HypothesisExample:
    segment: SegmentRef
    evidence: str | None
    split: str | None  # the split the labels are on ('heldout'): shown marked as such


def hypothesis_examples(con: Connection, hypothesis_id: int, per_checkpoint: int = 3) -> list[HypothesisExample]:
    """Held-out segments the labeler marked positive, a few from each checkpoint: a fixed pseudo-random sample
    of them, each from another rollout while there are rollouts left, so that what is shown is what the
    labeler counted across the study, not the first turns of the first rollout (two of a tau2 finding's
    examples were one conversation's)."""
    return [
        HypothesisExample(segment=segment_ref(r), evidence=r["evidence"], split=r["split"])
        for r in fetch_dicts(
            con,
            f"SELECT * EXCLUDE (draw, nth) FROM (SELECT {SEGMENT_REF_COLUMNS}, l.evidence, r.split, c.ordinal, "
            "hash(s.segment_id, l.hypothesis_id) AS draw, "
            "row_number() OVER (PARTITION BY r.rollout_key ORDER BY hash(s.segment_id, l.hypothesis_id)) AS nth "
            "FROM hypothesis_labels l JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key) "
            "JOIN checkpoints c ON c.checkpoint = r.checkpoint WHERE l.hypothesis_id = ? AND l.label) "
            "QUALIFY row_number() OVER (PARTITION BY checkpoint ORDER BY nth, draw) <= ? "
            "ORDER BY ordinal, nth, draw",
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
