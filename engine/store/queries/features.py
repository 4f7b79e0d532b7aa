"""One feature: its deltas, per-task rates and examples (sentences for concept and group
features); the features firing on a segment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.kinds import SENTENCE_SOURCES
from engine.store.queries.base import (
    DELTA_FEATURES,
    KIND_LABEL_JOIN,
    ROW_LABEL,
    SEGMENT_REF_COLUMNS,
    Connection,
    Executor,
    SegmentRef,
    fetch_dicts,
    json_value,
    segment_ref,
)
from engine.store.queries.deltas import DELTA_COLUMNS, DeltaRow, delta_row


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


def ngram_list(value: Any) -> list[str]:
    """The n-grams of a `features.top_ngrams` value: a JSON list of {"ngram": ..., "score": ...} objects (as
    the features stage writes it), of [ngram, score] pairs, or of strings."""
    parsed = json_value(value)
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
    rows = fetch_dicts(con, "SELECT * FROM features WHERE feature_id = ?", [feature_id])
    if not rows:
        return None
    f = rows[0]
    deltas = [
        FeatureDelta(
            row=delta_row({k: r[k] for k in DeltaRow.__dataclass_fields__}),
            rollout_rate_before=r["rollout_rate_before"],
            rollout_rate_after=r["rollout_rate_after"],
            n_before=r["n_before"],
            n_after=r["n_after"],
            reward_assoc_before=r["reward_assoc_before"],
            reward_assoc_after=r["reward_assoc_after"],
            skip_reason=r["skip_reason"],
        )
        for r in fetch_dicts(
            con,
            f"SELECT {DELTA_COLUMNS}, d.rollout_rate_before, d.rollout_rate_after, d.n_before, d.n_after, "
            "d.reward_assoc_before, d.reward_assoc_after, d.skip_reason "
            f"FROM {DELTA_FEATURES} WHERE d.feature_id = ? "
            "ORDER BY d.q_value ASC NULLS LAST, abs(d.delta) DESC NULLS LAST",
            [feature_id],
        )
    ]
    task_deltas = [
        TaskDelta(**r)
        for r in fetch_dicts(
            con,
            "SELECT kind, task_id, prevalence_before, prevalence_after, n_before, n_after "
            "FROM feature_task_deltas WHERE feature_id = ? ORDER BY kind, length(task_id), task_id",  # 2 before 10
            [feature_id],
        )
    ]
    examples = [
        FeatureExample(
            segment=segment_ref(r),
            rank=int(r["rank"]),
            activation=float(r["activation"]),
            tokens=[(int(a), int(b), float(v)) for a, b, v in (json_value(r["tokens"]) or [])],
        )
        for r in fetch_dicts(
            con,
            f"SELECT {SEGMENT_REF_COLUMNS}, e.rank, e.activation, e.tokens FROM feature_examples e "
            "JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key) "
            "WHERE e.feature_id = ? AND e.rank <= ? "
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
        for r in fetch_dicts(
            con,
            "SELECT f.feature_id, f.name, f.label, f.source, sf.activation FROM segment_features sf "
            "JOIN features f USING (feature_id) WHERE sf.segment_id = ? "
            "ORDER BY sf.activation DESC, f.feature_id LIMIT ?",
            [segment_id, limit],
        )
    ]


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
    rows = fetch_dicts(
        con,
        f"SELECT f.feature_id, f.source, {ROW_LABEL} AS label, f.snippets, d.kind, d.delta, d.q_value "
        f"FROM {DELTA_FEATURES} WHERE f.source IN ('concept', 'group') AND d.tested "
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
            sentences=[str(t) for t in (json_value(r["snippets"]) or [])][:SENTENCES_SHOWN],
        )
        for r in rows
    ]


def row_labels(con: Executor, rows: list[tuple[int, str]]) -> dict[tuple[int, str], str]:
    """What each (feature, kind) row of `rows` is called (`ROW_LABEL`), for the features that exist."""
    return {
        (int(r["feature_id"]), r["kind"]): r["label"]
        for r in fetch_dicts(
            con,
            f"SELECT d.feature_id, d.kind, {ROW_LABEL} AS label "
            "FROM (SELECT unnest(?::BIGINT[]) AS feature_id, unnest(?::VARCHAR[]) AS kind) d "
            f"JOIN features f USING (feature_id) {KIND_LABEL_JOIN}",
            [[f for f, _ in rows], [k for _, k in rows]],
        )
    }
