"""Typed reads over the study store for the TUI, the MCP server and the report.

Every function takes a DuckDB connection or cursor first, so it can run in a worker thread on a cursor of its
own, and returns frozen dataclasses (no polars: the TUI imports this module on its start-up path). Functions
added by other parts go at the end of the file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import duckdb

from engine.kinds import DeltaKind, DeltaSort, Direction, Source

Connection = duckdb.DuckDBPyConnection


def _rows(con: Connection, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _json(value: Any) -> Any:
    if value is None or not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


# -- study overview -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointSummary:
    """One checkpoint's size and success rate (mean reward with a task-clustered 95% CI)."""

    checkpoint: str
    n_tasks: int
    n_rollouts: int
    segments_by_kind: dict[str, int]
    mean_reward: float | None
    reward_ci: tuple[float, float] | None
    n_rewarded: int


@dataclass(frozen=True)
class StageStatus:
    """The latest run of one pipeline stage."""

    stage: str
    status: str
    started_at: datetime | None
    finished_at: datetime | None
    metrics: dict[str, Any]


@dataclass(frozen=True)
class StudySummary:
    checkpoints: list[CheckpointSummary]
    before: str | None
    after: str | None
    n_tasks: int
    n_features: int
    n_hypotheses: int
    stages: list[StageStatus]
    n_shared_tasks: int = 0  # tasks with rollouts in every checkpoint
    split_mode: str | None = None  # engine.split: 'task' | 'environment' | 'rollout' | 'none'; None before
    split_warning: str | None = None

    @property
    def stale(self) -> list[str]:
        """Stages whose results were computed from an earlier stage's previous output (e.g. features
        re-computed, then the analysis stopped): readers say so rather than show them as current."""
        return [s.stage for s in self.stages if s.status == "stale"]

    @property
    def exploratory(self) -> list[dict[str, Any]]:
        """The deltas stage's whole-study ranking (small studies only), each row marked exploratory."""
        deltas = next((s for s in self.stages if s.stage == "deltas"), None)
        return list(deltas.metrics.get("exploratory") or []) if deltas else []

    def small_study_notice(self) -> str:
        """A sentence for readers when too few tasks are shared to split by task (engine.split), else ''."""
        if self.split_mode != "rollout":
            return ""
        return (
            f"Small study: {self.split_warning or 'rollouts are split within task'}. Rankings over the whole "
            "study are exploratory, never validated; a hypothesis is confirmed only on the fold of rollouts it "
            "was not drafted on"
        )

    def stale_notice(self, store: str = "STORE") -> str:
        """A sentence for readers when some results are stale, else ''."""
        if not self.stale:
            return ""
        return (
            f"{', '.join(self.stale)} predate the current features (their tables were cleared or are out of "
            f"date); run `rldiff analyze {store}` to bring them up to date"
        )


def compared_checkpoints(con: Connection) -> tuple[str | None, str | None]:
    """The (before, after) pair of the latest finished analysis, else the first two checkpoints ingested."""
    row = con.execute(
        "SELECT json_extract_string(config, '$.before'), json_extract_string(config, '$.after') FROM runs "
        "WHERE status = 'done' AND json_extract_string(config, '$.before') IS NOT NULL "
        "ORDER BY finished_at DESC LIMIT 1"
    ).fetchone()
    if row and row[0] and row[1]:
        return row[0], row[1]
    names = [r[0] for r in con.execute("SELECT checkpoint FROM checkpoints ORDER BY ordinal").fetchall()]
    return (names[0] if names else None), (names[1] if len(names) > 1 else None)


def checkpoint_summaries(con: Connection) -> list[CheckpointSummary]:
    """Every checkpoint with its counts and success rate (the CI `rldiff info` prints), in ingest order."""
    import numpy as np

    from engine.stats.intervals import clustered_mean_ci

    rewards: dict[str, tuple[list[str], list[float]]] = {}
    for checkpoint, task_id, reward in con.execute(
        "SELECT checkpoint, task_id, reward FROM rollouts WHERE reward IS NOT NULL"
    ).fetchall():
        tasks, values = rewards.setdefault(checkpoint, ([], []))
        tasks.append(task_id)
        values.append(float(reward))
    kinds: dict[str, dict[str, int]] = {}
    for checkpoint, kind, n in con.execute(
        "SELECT r.checkpoint, s.kind, count(*) FROM segments s JOIN rollouts r USING (rollout_key) "
        "GROUP BY ALL ORDER BY ALL"
    ).fetchall():
        kinds.setdefault(checkpoint, {})[kind] = int(n)
    out = []
    for checkpoint, n_tasks, n_rollouts in con.execute(
        "SELECT c.checkpoint, count(DISTINCT r.task_id), count(r.rollout_key) FROM checkpoints c "
        "LEFT JOIN rollouts r USING (checkpoint) GROUP BY c.checkpoint, c.ordinal ORDER BY c.ordinal"
    ).fetchall():
        tasks, values = rewards.get(checkpoint, ([], []))
        mean, ci = None, None
        if values:
            reward = clustered_mean_ci(np.array(values), np.array(tasks))
            mean = reward.mean
            ci = None if math.isnan(reward.low) else (reward.low, reward.high)
        out.append(
            CheckpointSummary(
                checkpoint=checkpoint,
                n_tasks=int(n_tasks),
                n_rollouts=int(n_rollouts),
                segments_by_kind=kinds.get(checkpoint, {}),
                mean_reward=mean,
                reward_ci=ci,
                n_rewarded=len(values),
            )
        )
    return out


def stage_statuses(con: Connection) -> list[StageStatus]:
    """The latest run of each stage that has run, most recent first."""
    rows = _rows(
        con,
        "SELECT stage, status, started_at, finished_at, metrics FROM runs "
        "QUALIFY row_number() OVER (PARTITION BY stage ORDER BY started_at DESC) = 1 ORDER BY started_at",
    )
    return [
        StageStatus(
            stage=r["stage"],
            status=r["status"],
            started_at=r["started_at"],
            finished_at=r["finished_at"],
            metrics=_json(r["metrics"]) or {},
        )
        for r in rows
    ]


def study_summary(con: Connection) -> StudySummary:
    before, after = compared_checkpoints(con)
    return StudySummary(
        checkpoints=checkpoint_summaries(con),
        before=before,
        after=after,
        n_tasks=int(con.execute("SELECT count(DISTINCT task_id) FROM rollouts").fetchone()[0]),
        n_features=int(con.execute("SELECT count(*) FROM features").fetchone()[0]),
        n_hypotheses=int(con.execute("SELECT count(*) FROM hypotheses").fetchone()[0]),
        stages=stage_statuses(con),
        n_shared_tasks=int(
            con.execute(
                "SELECT count(*) FROM (SELECT task_id FROM rollouts GROUP BY task_id "
                "HAVING count(DISTINCT checkpoint) = (SELECT count(*) FROM checkpoints))"
            ).fetchone()[0]
        ),
        split_mode=_meta(con, "split_mode"),
        split_warning=_meta(con, "split_warning"),
    )


def _meta(con: Connection, key: str) -> str | None:
    row = con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
    return row[0] if row else None


# -- deltas -------------------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class DeltaPage:
    rows: list[DeltaRow]
    offset: int
    total: int


_DELTA_COLUMNS = (
    "d.feature_id, f.name, f.label, f.source, d.kind, d.prevalence_before, d.prevalence_after, d.delta, "
    "d.ci_low, d.ci_high, d.p_value, d.q_value, d.tested, d.family"
)
_DELTA_ORDER = {
    "abs_delta": "abs(d.delta) DESC NULLS LAST",
    "increase": "d.delta DESC NULLS LAST",
    "decrease": "d.delta ASC NULLS LAST",
    "q": "d.q_value ASC NULLS LAST, abs(d.delta) DESC NULLS LAST",
    "label": "f.label ASC",
}


def _delta_row(r: dict[str, Any]) -> DeltaRow:
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
        clauses.append("(f.label ILIKE ? OR f.name ILIKE ?)")
        pattern = f"%{flt.search}%"
        params += [pattern, pattern]
    return " AND ".join(clauses), params


def delta_page(con: Connection, flt: DeltaFilter, offset: int = 0, limit: int = 200) -> DeltaPage:
    """One page of the ranked deltas table and the number of rows the filter matches."""
    if flt.sort not in _DELTA_ORDER:
        raise ValueError(f"unknown sort {flt.sort!r}; one of {', '.join(_DELTA_ORDER)}")
    where, params = _delta_where(flt)
    base = f"FROM feature_deltas d JOIN features f USING (feature_id) WHERE {where}"
    total = int(con.execute(f"SELECT count(*) {base}", params).fetchone()[0])
    rows = _rows(
        con,
        f"SELECT {_DELTA_COLUMNS} {base} ORDER BY {_DELTA_ORDER[flt.sort]}, d.feature_id, d.kind LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )
    return DeltaPage(rows=[_delta_row(r) for r in rows], offset=offset, total=total)


# -- one feature --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FeatureDelta:
    """A feature's statistics for one segment kind."""

    row: DeltaRow
    rollout_rate_before: float | None
    rollout_rate_after: float | None
    n_before: int | None
    n_after: int | None
    reward_assoc_before: float | None
    reward_assoc_after: float | None
    skip_reason: str | None


@dataclass(frozen=True)
class TaskDelta:
    kind: str
    task_id: str
    prevalence_before: float | None
    prevalence_after: float | None
    n_before: int | None
    n_after: int | None


@dataclass(frozen=True)
class SegmentRef:
    """Where a segment lives: enough to open its rollout at it."""

    segment_id: int
    rollout_key: int
    checkpoint: str
    rollout_id: str
    task_id: str
    message_index: int
    kind: str
    text: str


@dataclass(frozen=True)
class FeatureExample:
    """A top-activating segment with per-token activations (char offsets into `segment.text`)."""

    segment: SegmentRef
    rank: int
    activation: float
    tokens: list[tuple[int, int, float]]


@dataclass(frozen=True)
class FeatureDetail:
    feature_id: int
    name: str
    label: str
    source: str
    explanation: str | None
    threshold: float
    top_ngrams: list[str]
    deltas: list[FeatureDelta]
    task_deltas: list[TaskDelta]
    examples: list[FeatureExample]
    clusters: list[tuple[int, str]]


_SEGMENT_REF = "s.segment_id, s.rollout_key, r.checkpoint, r.rollout_id, r.task_id, s.message_index, s.kind, s.text"


def _segment_ref(r: dict[str, Any]) -> SegmentRef:
    return SegmentRef(**{k: r[k] for k in SegmentRef.__dataclass_fields__})


def ngram_list(value: Any) -> list[str]:
    """The n-grams of a `features.top_ngrams` value: a JSON list of {"ngram": ..., "score": ...} objects (as
    the features stage writes it), of [ngram, score] pairs, or of strings."""
    parsed = _json(value)
    out = []
    for item in parsed if isinstance(parsed, list) else []:
        gram = (
            item.get("ngram")
            if isinstance(item, dict)
            else item[0]
            if isinstance(item, list | tuple) and item
            else item
        )
        if isinstance(gram, str) and gram.strip():
            out.append(gram.strip())
    return out


def feature_detail(con: Connection, feature_id: int, examples_per_checkpoint: int = 5) -> FeatureDetail | None:
    """Everything the feature screen shows, or None when no such feature exists."""
    rows = _rows(con, "SELECT * FROM features WHERE feature_id = ?", [feature_id])
    if not rows:
        return None
    f = rows[0]
    deltas = [
        FeatureDelta(
            row=_delta_row({k: r[k] for k in DeltaRow.__dataclass_fields__}),
            rollout_rate_before=r["rollout_rate_before"],
            rollout_rate_after=r["rollout_rate_after"],
            n_before=r["n_before"],
            n_after=r["n_after"],
            reward_assoc_before=r["reward_assoc_before"],
            reward_assoc_after=r["reward_assoc_after"],
            skip_reason=r["skip_reason"],
        )
        for r in _rows(
            con,
            f"SELECT {_DELTA_COLUMNS}, d.rollout_rate_before, d.rollout_rate_after, d.n_before, d.n_after, "
            "d.reward_assoc_before, d.reward_assoc_after, d.skip_reason "
            "FROM feature_deltas d JOIN features f USING (feature_id) WHERE d.feature_id = ? "
            "ORDER BY d.q_value ASC NULLS LAST, abs(d.delta) DESC NULLS LAST",
            [feature_id],
        )
    ]
    task_deltas = [
        TaskDelta(**r)
        for r in _rows(
            con,
            "SELECT kind, task_id, prevalence_before, prevalence_after, n_before, n_after "
            "FROM feature_task_deltas WHERE feature_id = ? ORDER BY kind, length(task_id), task_id",  # 2 before 10
            [feature_id],
        )
    ]
    examples = [
        FeatureExample(
            segment=_segment_ref(r),
            rank=int(r["rank"]),
            activation=float(r["activation"]),
            tokens=[(int(a), int(b), float(v)) for a, b, v in (_json(r["tokens"]) or [])],
        )
        for r in _rows(
            con,
            f"SELECT {_SEGMENT_REF}, e.rank, e.activation, e.tokens FROM feature_examples e "
            "JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key) "
            "WHERE e.feature_id = ? AND e.rank < ? "
            "ORDER BY (SELECT ordinal FROM checkpoints c WHERE c.checkpoint = e.checkpoint), e.rank",
            [feature_id, examples_per_checkpoint],
        )
    ]
    clusters = [
        (int(cid), label)
        for cid, label in con.execute(
            "SELECT c.cluster_id, c.label FROM cluster_members m JOIN clusters c USING (cluster_id) "
            "WHERE m.feature_id = ? ORDER BY c.cluster_id",
            [feature_id],
        ).fetchall()
    ]
    return FeatureDetail(
        feature_id=int(f["feature_id"]),
        name=f["name"],
        label=f["label"],
        source=f["source"],
        explanation=f["explanation"],
        threshold=float(f["threshold"]),
        top_ngrams=ngram_list(f["top_ngrams"]),
        deltas=deltas,
        task_deltas=task_deltas,
        examples=examples,
        clusters=clusters,
    )


# -- clusters -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterRow:
    cluster_id: int
    label: str
    kind: str
    size: int
    prevalence_before: float | None
    prevalence_after: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    q_value: float | None


@dataclass(frozen=True)
class ClusterMember:
    feature_id: int
    label: str
    source: str
    membership: float | None
    prevalence_before: float | None
    prevalence_after: float | None
    delta: float | None
    q_value: float | None


def clusters(con: Connection) -> list[ClusterRow]:
    """All clusters, the strongest combined change first."""
    return [
        ClusterRow(**r) for r in _rows(con, "SELECT * FROM clusters ORDER BY abs(delta) DESC NULLS LAST, cluster_id")
    ]


def cluster_members(con: Connection, cluster_id: int) -> list[ClusterMember]:
    """A cluster's features with their deltas for the cluster's segment kind."""
    return [
        ClusterMember(**r)
        for r in _rows(
            con,
            "SELECT m.feature_id, f.label, f.source, m.membership, d.prevalence_before, d.prevalence_after, "
            "d.delta, d.q_value FROM cluster_members m JOIN clusters c USING (cluster_id) "
            "JOIN features f ON f.feature_id = m.feature_id "
            "LEFT JOIN feature_deltas d ON d.feature_id = m.feature_id AND d.kind = c.kind "
            "WHERE m.cluster_id = ? ORDER BY abs(d.delta) DESC NULLS LAST, m.feature_id",
            [cluster_id],
        )
    ]


# -- hypotheses ---------------------------------------------------------------------------------------------

HYPOTHESIS_STATUSES: tuple[str, ...] = ("proposed", "validated", "rejected", "inconclusive")
DECISIONS: tuple[str, ...] = ("accepted", "rejected")


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
    for r in _rows(con, sql, params):
        r["spec"] = _json(r["spec"])
        r["provenance"] = _json(r["provenance"]) or {}
        out.append(HypothesisRow(**r))
    return out


def hypotheses(con: Connection, status: str | None = None, decision: str | None = None) -> list[HypothesisRow]:
    """The triage queue: validated first, then by q. `decision='undecided'` selects those without one."""
    clauses, params = ["TRUE"], []
    if status:
        clauses.append("status = ?")
        params.append(status)
    if decision == "undecided":
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
        HypothesisExample(segment=_segment_ref(r), evidence=r["evidence"], split=r["split"])
        for r in _rows(
            con,
            f"SELECT {_SEGMENT_REF}, l.evidence, r.split, c.ordinal FROM hypothesis_labels l "
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
        for r in _rows(
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


# -- rollouts -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutRow:
    rollout_key: int
    checkpoint: str
    rollout_id: str
    task_id: str
    trial: int | None
    reward: float | None
    split: str | None
    n_messages: int
    n_segments: int


@dataclass(frozen=True)
class RolloutPage:
    rows: list[RolloutRow]
    offset: int
    total: int


_ROLLOUT_COLUMNS = "r.rollout_key, r.checkpoint, r.rollout_id, r.task_id, r.trial, r.reward, r.split, r.n_messages"


def _rollout_rows(con: Connection, sql: str, params: list[Any]) -> list[RolloutRow]:
    """Rollouts selected by `sql` (the columns of `_ROLLOUT_COLUMNS`), with their segment counts: counted
    for these rollouts only, in one query, not once per row."""
    rows = _rows(con, sql, params)
    keys = [r["rollout_key"] for r in rows]
    counts = (
        dict(
            con.execute(
                "SELECT rollout_key, count(*) FROM segments WHERE rollout_key IN (SELECT unnest(?)) GROUP BY 1", [keys]
            ).fetchall()
        )
        if keys
        else {}
    )
    return [RolloutRow(**r, n_segments=int(counts.get(r["rollout_key"], 0))) for r in rows]


def rollout_page(
    con: Connection, checkpoint: str | None = None, search: str = "", offset: int = 0, limit: int = 200
) -> RolloutPage:
    """Rollouts by task, then checkpoint, then trial; `search` matches task or rollout id."""
    clauses, params = ["TRUE"], []
    if checkpoint:
        clauses.append("r.checkpoint = ?")
        params.append(checkpoint)
    if search:
        clauses.append("(r.task_id ILIKE ? OR r.rollout_id ILIKE ?)")
        params += [f"%{search}%", f"%{search}%"]
    where = " AND ".join(clauses)
    total = int(con.execute(f"SELECT count(*) FROM rollouts r WHERE {where}", params).fetchone()[0])
    rows = _rollout_rows(
        con,
        f"SELECT {_ROLLOUT_COLUMNS} FROM rollouts r JOIN checkpoints c USING (checkpoint) WHERE {where} "
        "ORDER BY length(r.task_id), r.task_id, c.ordinal, r.trial NULLS LAST, r.rollout_id LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )
    return RolloutPage(rows=rows, offset=offset, total=total)


def counterpart_rollouts(con: Connection, rollout_key: int) -> list[RolloutRow]:
    """The same task's rollouts in the other checkpoints, same trial first."""
    return _rollout_rows(
        con,
        f"SELECT {_ROLLOUT_COLUMNS} FROM rollouts r JOIN rollouts me ON me.rollout_key = ? "
        "JOIN checkpoints c ON c.checkpoint = r.checkpoint "
        "WHERE r.task_id = me.task_id AND r.checkpoint <> me.checkpoint "
        "ORDER BY c.ordinal, (r.trial IS NOT DISTINCT FROM me.trial) DESC, r.trial NULLS LAST, r.rollout_id",
        [rollout_key],
    )


@dataclass(frozen=True)
class MessageRow:
    message_index: int
    role: str
    content: str | None
    reasoning: str | None
    tool_calls: list[dict[str, Any]]
    tool_call_id: str | None
    name: str | None
    is_error: bool | None


@dataclass(frozen=True)
class SegmentRow:
    segment_id: int
    message_index: int
    part_index: int
    kind: str
    tool_name: str | None


@dataclass(frozen=True)
class Transcript:
    rollout: RolloutRow
    messages: list[MessageRow]
    segments: list[SegmentRow]


def transcript(con: Connection, rollout_key: int) -> Transcript | None:
    """A whole rollout: its messages (context included) and the segments that point into them."""
    rollout = _rollout_rows(con, f"SELECT {_ROLLOUT_COLUMNS} FROM rollouts r WHERE r.rollout_key = ?", [rollout_key])
    if not rollout:
        return None
    messages = []
    for r in _rows(
        con,
        "SELECT message_index, role, content, reasoning, tool_calls, tool_call_id, name, is_error "
        "FROM messages WHERE rollout_key = ? ORDER BY message_index",
        [rollout_key],
    ):
        calls = _json(r["tool_calls"])
        messages.append(MessageRow(**{**r, "tool_calls": calls if isinstance(calls, list) else []}))
    segments = [
        SegmentRow(**r)
        for r in _rows(
            con,
            "SELECT segment_id, message_index, part_index, kind, tool_name FROM segments "
            "WHERE rollout_key = ? ORDER BY message_index, part_index, segment_id",
            [rollout_key],
        )
    ]
    return Transcript(rollout=rollout[0], messages=messages, segments=segments)


def segment_location(con: Connection, segment_id: int) -> SegmentRef | None:
    rows = _rows(
        con,
        f"SELECT {_SEGMENT_REF} FROM segments s JOIN rollouts r USING (rollout_key) WHERE s.segment_id = ?",
        [segment_id],
    )
    return _segment_ref(rows[0]) if rows else None


# -- jump-to search (command palette) -----------------------------------------------------------------------


@dataclass(frozen=True)
class SearchHit:
    category: Literal["feature", "cluster", "hypothesis", "rollout"]
    id: int
    title: str
    detail: str


_SEARCHES: tuple[tuple[str, str], ...] = (  # (category, SQL selecting id, title, detail); $p pattern, $t text
    ("feature", "SELECT feature_id, label, name || ' · ' || source FROM features WHERE label ILIKE $p OR name ILIKE $p "
     "ORDER BY length(label), feature_id"),
    ("cluster", "SELECT cluster_id, label, format('cluster {} · {} · {} features', cluster_id, kind, size) "
     "FROM clusters WHERE label ILIKE $p OR cluster_id::VARCHAR = $t ORDER BY cluster_id"),
    ("hypothesis", "SELECT hypothesis_id, statement, format('hypothesis {} · {}', hypothesis_id, status) "
     "FROM hypotheses WHERE statement ILIKE $p OR hypothesis_id::VARCHAR = $t ORDER BY hypothesis_id"),
    ("rollout", "SELECT rollout_key, rollout_id, format('{} · task {}', checkpoint, task_id) FROM rollouts "
     "WHERE rollout_id ILIKE $p OR task_id ILIKE $p ORDER BY task_id, rollout_key"),
)  # fmt: skip


def search(con: Connection, text: str, limit: int = 8) -> list[SearchHit]:
    """Features, clusters, hypotheses and rollouts whose name contains `text` (case-insensitive)."""
    params = {"p": f"%{text}%", "t": text, "n": limit}
    return [
        SearchHit(category, int(i), title, detail)  # type: ignore[arg-type]
        for category, sql in _SEARCHES
        for i, title, detail in con.execute(
            f"{sql} LIMIT $n", {k: v for k, v in params.items() if f"${k}" in f"{sql} LIMIT $n"}
        ).fetchall()
    ]


# -- added for the MCP server -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentActivation:
    """A feature that fires on one segment, with its activation."""

    feature_id: int
    name: str
    label: str
    source: str
    activation: float


def segment_activations(con: Connection, segment_id: int, limit: int = 10) -> list[SegmentActivation]:
    """The features with the strongest activations on one segment."""
    return [
        SegmentActivation(**r)
        for r in _rows(
            con,
            "SELECT f.feature_id, f.name, f.label, f.source, sf.activation FROM segment_features sf "
            "JOIN features f USING (feature_id) WHERE sf.segment_id = ? "
            "ORDER BY sf.activation DESC, f.feature_id LIMIT ?",
            [segment_id, limit],
        )
    ]


@dataclass(frozen=True)
class AnalysisCounts:
    """How far the analysis got and what it found: what an agent needs to decide where to look first."""

    rollouts_by_split: dict[str, int]
    n_features: int
    n_deltas_tested: int
    n_deltas_significant: int
    n_clusters: int
    hypotheses_by_status: dict[str, int]
    decisions: dict[str, int]


def analysis_counts(con: Connection, fdr: float = 0.05) -> AnalysisCounts:
    """Rollouts per split ('unsplit' before the split is drawn), features, tested and significant
    (q <= `fdr`) deltas, clusters, hypotheses per status and the user's decisions ('undecided' for none)."""
    splits = {
        str(split or "unsplit"): int(n)
        for split, n in con.execute("SELECT split, count(*) FROM rollouts GROUP BY ALL ORDER BY ALL").fetchall()
    }
    tested, significant = con.execute(
        "SELECT count(*) FILTER (WHERE tested), count(*) FILTER (WHERE tested AND q_value <= ?) FROM feature_deltas",
        [fdr],
    ).fetchall()[0]
    statuses = {
        str(s): int(n)
        for s, n in con.execute("SELECT status, count(*) FROM hypotheses GROUP BY ALL ORDER BY ALL").fetchall()
    }
    decisions = {
        str(d or "undecided"): int(n)
        for d, n in con.execute("SELECT decision, count(*) FROM hypotheses GROUP BY ALL ORDER BY ALL").fetchall()
    }
    return AnalysisCounts(
        rollouts_by_split=splits,
        n_features=int(con.execute("SELECT count(*) FROM features").fetchall()[0][0]),
        n_deltas_tested=int(tested),
        n_deltas_significant=int(significant),
        n_clusters=int(con.execute("SELECT count(*) FROM clusters").fetchall()[0][0]),
        hypotheses_by_status=statuses,
        decisions=decisions,
    )


# -- sentence features (concepts, behaviour groups; docs/concepts.md) -----------------------------------------

SENTENCE_SOURCES = frozenset({"concept", "group"})  # features whose examples and labels are sentences
SENTENCES_SHOWN = 5


def example_sentence(source: str, example: FeatureExample) -> str | None:
    """The sentence a concept or group example fired on (its one span), None for other sources."""
    if source not in SENTENCE_SOURCES or not example.tokens:
        return None
    start, end, _ = example.tokens[0]
    return example.segment.text[start:end]


@dataclass(frozen=True)
class SentenceFeature:
    """A tested concept or group feature with its strongest discovery sentences."""

    feature_id: int
    source: str
    label: str
    kind: str
    delta: float | None
    q_value: float | None
    sentences: list[str]


def sentence_features(con: Connection, limit: int = 10) -> list[SentenceFeature]:
    """Concept and group features with the strongest tested changes (lowest q, then largest change)."""
    rows = _rows(
        con,
        "SELECT f.feature_id, f.source, f.label, f.snippets, d.kind, d.delta, d.q_value FROM feature_deltas d "
        "JOIN features f USING (feature_id) WHERE f.source IN ('concept', 'group') AND d.tested "
        "ORDER BY d.q_value ASC NULLS LAST, abs(d.delta) DESC NULLS LAST LIMIT ?",
        [limit],
    )
    return [
        SentenceFeature(
            feature_id=int(r["feature_id"]),
            source=r["source"],
            label=r["label"],
            kind=r["kind"],
            delta=r["delta"],
            q_value=r["q_value"],
            sentences=[str(t) for t in (_json(r["snippets"]) or [])][:SENTENCES_SHOWN],
        )
        for r in rows
    ]
