"""The sentence pass of the features stage on a small study with a tiny reader: sentences, concept and group
features, examples that are sentences, discovery-only labels, every segment scored, and the switch."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from engine import deltas, split
from engine.config import AnalyzeConfig
from engine.features import stage
from engine.features.labels import KIND_NAMES
from engine.features.sentence_features import LABEL_SENTENCES, each_kind
from engine.features.settings import FeatureSettings
from engine.ingest import ingest_file
from engine.kinds import DISCOVERY, SPLITS
from engine.mcp.access import StoreAccess
from engine.mcp.tools import StudyTools
from engine.progress import NullProgress
from engine.report.content import gather
from engine.report.markdown import render_markdown
from engine.store import Store, queries
from tests.factories_features import call, rollout, tiny_reader, write_jsonl

SMALL = FeatureSettings(max_tokens=64, sae_width=64, sae_k=8, sae_steps=40, sae_batch=128, top_examples=3)
TOPICS = ["refund", "seat", "baggage", "flight", "hotel", "order", "address", "payment"]


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_reader(tmp_path_factory.mktemp("reader") / "bert", "bert", layers=2)


def _rollout(rid: str, task: str, n: int, grader: bool) -> dict:
    topic = TOPICS[n % len(TOPICS)]
    thoughts = [f"The user asks about the {topic} for booking {n}.", f"I should look up record {n * 7} first."]
    if grader:
        thoughts.append(f"The grader will check whether I confirm step {n} before acting.")
    messages = [
        {"role": "user", "content": f"Please help with my {topic}."},
        {
            "role": "assistant",
            "reasoning": " ".join(thoughts),
            "content": f"Sure, I can help with the {topic}. Let me check item {n}.",
            "tool_calls": [call("get_record", {"id": f"R{n}"}, "c1")],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
        {"role": "assistant", "content": f"Your {topic} request {n} is done. Anything else?"},
    ]
    return rollout(rid, task, messages)


def _study(tmp_path: Path) -> Path:
    path = tmp_path / "study.duckdb"
    before = [_rollout(f"b{t}-{k}", f"t{t}", 100 * t + k, False) for t in range(8) for k in range(4)]
    after = [_rollout(f"a{t}-{k}", f"t{t}", 100 * t + k + 50, k % 2 == 0) for t in range(8) for k in range(4)]
    with Store(path) as store:
        ingest_file(store, write_jsonl(tmp_path / "before.jsonl", before), "before")
        ingest_file(store, write_jsonl(tmp_path / "after.jsonl", after), "after")
        split.run(store, AnalyzeConfig(before="before", after="after"), np.random.default_rng(0), NullProgress())
    return path


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory, reader: Path) -> Path:
    """A study after one features run (read only in the tests that use it)."""
    path = _study(tmp_path_factory.mktemp("analysed"))
    with Store(path) as store:
        extract(store, reader)
        config = AnalyzeConfig(before="before", after="after", permutations=200)
        deltas.run(store, config, np.random.default_rng(1), NullProgress())
    return path


def extract(store: Store, reader: Path, **config: object) -> int:
    cfg = AnalyzeConfig(before="before", after="after", reader=str(reader), device="cpu", **config)  # type: ignore[arg-type]
    return stage.extract(store, cfg, np.random.default_rng(0), NullProgress(), SMALL, "cpu")


def test_sentences_cover_text_and_reasoning_segments_only(analysed: Path) -> None:
    with Store(analysed, read_only=True) as store:
        rows = store.frame(
            "SELECT st.*, s.kind, s.text AS segment_text FROM sentences st JOIN segments s USING (segment_id) "
            "ORDER BY sentence_id"
        )
        assert set(rows["kind"]) == {"text", "reasoning"}
        assert all(seg[a:b] == text for a, b, text, seg in rows.select(
            "char_start", "char_end", "text", "segment_text").iter_rows())  # fmt: skip
        per_segment = rows.group_by("segment_id").agg("sentence_index")
        assert all(sorted(ix) == list(range(len(ix))) for ix in per_segment["sentence_index"])
        reasoning = rows.filter(rows["kind"] == "reasoning")
        assert reasoning.group_by("segment_id").len()["len"].max() == 3  # the grader sentence is its own unit


def test_concept_and_group_features_fire_on_segments_of_both_splits(analysed: Path) -> None:
    with Store(analysed, read_only=True) as store:
        features = store.frame("SELECT * FROM features WHERE source IN ('concept', 'group')")
        concepts = features.filter(features["source"] == "concept")
        assert concepts.height > 5 and (concepts["threshold"] > 0).all()
        assert all(label.split(": ", 1)[1].startswith("“") for label in concepts["label"])
        assert all(isinstance(json.loads(s), list) and json.loads(s) for s in concepts["snippets"])
        splits = store.frame(
            "SELECT DISTINCT r.split, s.kind FROM segment_features sf JOIN features f USING (feature_id) "
            "JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key) WHERE f.source = 'concept'"
        )
        assert set(splits["split"]) == set(SPLITS)
        assert set(splits["kind"]) <= {"text", "reasoning"}
        metrics = json.loads(store.scalar("SELECT metrics FROM runs WHERE stage = 'features'"))
        assert metrics["concept_features"] == concepts.height and metrics["sentence_seconds"] > 0
        assert 0 < metrics["concept_explained_variance"] <= 1


def test_examples_are_discovery_sentences_with_their_span(analysed: Path) -> None:
    with Store(analysed, read_only=True) as store:
        examples = store.frame(
            "SELECT e.tokens, e.activation, s.text, r.split FROM feature_examples e JOIN features f USING "
            "(feature_id) JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key) "
            "WHERE f.source = 'concept'"
        )
        sentences = set(store.frame("SELECT text FROM sentences")["text"])
        assert examples.height > 0 and set(examples["split"]) == {DISCOVERY}
        for tokens, activation, text, _ in examples.iter_rows():
            [[start, end, value]] = json.loads(tokens)
            assert text[start:end] in sentences and value == pytest.approx(activation, rel=1e-3)


def test_each_kind_is_labelled_from_its_own_sentences(analysed: Path) -> None:
    """A concept is labelled, for each kind it fires on in discovery, from its sentences of that kind: the label
    names the kind and quotes one of them (a reasoning row is not called by the feature's replies)."""
    with Store(analysed, read_only=True) as store:
        labels = store.frame(
            "SELECT kl.feature_id, kl.kind, kl.label, f.source FROM feature_kind_labels kl "
            "JOIN features f USING (feature_id) WHERE f.source = 'concept'"
        )
        fired = store.frame(
            "SELECT DISTINCT sf.feature_id, s.kind FROM segment_features sf JOIN features f USING (feature_id) "
            "JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key) "
            "WHERE f.source = 'concept' AND r.split = ?",
            [DISCOVERY],
        )
        said = store.frame("SELECT DISTINCT st.text, s.kind FROM sentences st JOIN segments s USING (segment_id)")
        assert set(labels.select("feature_id", "kind").rows()) == set(fired.rows())
        assert set(labels["kind"]) == {"text", "reasoning"}
        for _, kind, label, _ in labels.iter_rows():
            assert label.startswith(f"{KIND_NAMES[kind]}: “")
            quoted = label.split("“", 1)[1].split("”", 1)[0].removesuffix("…")
            assert any(t.startswith(quoted) for t in said.filter(said["kind"] == kind)["text"])


def test_a_group_is_labelled_per_kind_from_its_nearest_members_of_that_kind() -> None:
    """A behaviour group's own label reads its LABEL_SENTENCES nearest members; a kind's label reads that kind's
    nearest, also those further down than the first LABEL_SENTENCES (a group mostly of replies)."""
    said = [(f"reply {i}", "text") for i in range(LABEL_SENTENCES + 6)] + [("thought 0", "reasoning")]
    labelled = each_kind(said)
    assert labelled[None] == said[:LABEL_SENTENCES]
    assert labelled["text"] == said[:LABEL_SENTENCES]
    assert labelled["reasoning"] == [("thought 0", "reasoning")]


def test_the_segment_activation_is_the_max_over_its_sentences(analysed: Path) -> None:
    with Store(analysed, read_only=True) as store:
        feature, segment, activation = store.execute(
            "SELECT sf.feature_id, sf.segment_id, sf.activation FROM segment_features sf JOIN features f "
            "USING (feature_id) WHERE f.source = 'concept' ORDER BY sf.activation DESC LIMIT 1"
        ).fetchone()
        best = store.scalar("SELECT max(e.activation) FROM feature_examples e WHERE e.feature_id = ?", [feature])
        assert activation == pytest.approx(best, rel=1e-3)  # the strongest sentence is the strongest segment's
        assert store.scalar("SELECT count(*) FROM segment_features WHERE segment_id = ? AND feature_id = ?",
                            [segment, feature]) == 1  # fmt: skip


def test_no_sentence_features_keeps_sentences_and_drops_concepts_and_groups(
    analysed: Path, reader: Path, tmp_path: Path
) -> None:
    with Store(shutil.copy(analysed, tmp_path / "study.duckdb")) as store:  # after a run with sentence features
        assert store.scalar("SELECT count(*) FROM features WHERE source = 'concept'") > 0
        extract(store, reader, sentence_features=False)
        assert store.scalar("SELECT count(*) FROM features WHERE source IN ('concept', 'group')") == 0
        assert store.scalar("SELECT count(*) FROM sentences") > 0
        assert (
            store.scalar(
                "SELECT count(*) FROM segment_features WHERE feature_id NOT IN (SELECT feature_id FROM features)"
            )
            == 0
        )
        assert extract(store, reader, sentence_features=False) == 0  # up to date: skipped


def test_the_report_and_feature_details_show_the_sentences(analysed: Path) -> None:
    with Store(analysed, read_only=True) as store:
        shown = queries.sentence_features(store.cursor())
        assert shown and all(f.sentences and f.source in ("concept", "group") for f in shown)
        text = render_markdown(gather(store))
        assert "## Concepts and behaviour groups: their sentences" in text and shown[0].sentences[0] in text
        detail = queries.feature_detail(store.cursor(), shown[0].feature_id)
        assert detail is not None and detail.examples
        sentences = set(store.frame("SELECT text FROM sentences")["text"])
        assert all(queries.example_sentence(detail.source, e) in sentences for e in detail.examples)
    answer = json.loads(StudyTools(StoreAccess(analysed, lock_wait_s=1)).get_feature(shown[0].feature_id))
    assert answer["examples"] and all(e["sentence"] in sentences for e in answer["examples"])
