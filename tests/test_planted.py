"""The planted benchmark's parts: planting into the real gpt-4o pair, ground truth, scoring, the baseline."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from engine.ingest import ingest_file
from engine.kinds import DISCOVERY, HELDOUT
from engine.planted import (
    BEHAVIOURS,
    SAMPLE_PAIR,
    Candidate,
    naive_baseline,
    plant,
    planted_segment_ids,
    score,
)
from engine.planted_oracle import Source, best_source_f1, best_sources, perfect_labeler_p
from engine.store import Store


@pytest.fixture(scope="module")
def planted_store(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("planted")
    before, after, truth = plant(SAMPLE_PAIR[0], SAMPLE_PAIR[1], work, np.random.default_rng(0))
    store = Store(work / "s.duckdb")
    ingest_file(store, before, "before")
    ingest_file(store, after, "after")
    # Odd tasks held out (the split stage's job in the real pipeline).
    store.execute("UPDATE rollouts SET split = CASE WHEN hash(task_id) % 2 = 0 THEN 'discovery' ELSE 'heldout' END")
    yield store, truth, work
    store.close()


def test_planting_follows_rates_and_directions(planted_store) -> None:
    store, truth, work = planted_store
    counts = {b.name: [t for t in truth if t.behaviour == b.name] for b in BEHAVIOURS}
    for b in BEHAVIOURS:
        assert counts[b.name], b.name
        assert {t.checkpoint for t in counts[b.name]} == {"after" if b.direction == "increase" else "before"}
        assert {t.kind for t in counts[b.name]} == {b.kind}
    texts = store.scalar(
        "SELECT count(*) FROM segments s JOIN rollouts r USING (rollout_key) "
        "WHERE kind = 'text' AND checkpoint = 'after'"
    )
    assert 0.15 < len(counts["email_summary"]) / texts < 0.35
    assert len(counts["rest_assured"]) < len(counts["email_summary"]) / 2
    assert json.loads((work / "ground_truth.json").read_text())[0].keys() >= {"rollout_id", "message_index"}


def test_ground_truth_points_at_the_planted_segments(planted_store) -> None:
    store, truth, _ = planted_store
    by_split = planted_segment_ids(store, truth)
    assert sum(len(ids) for split in by_split.values() for ids in split.values()) == len(truth)
    planted = by_split[HELDOUT]
    assert set(planted) == set(by_split[DISCOVERY]) == {b.name for b in BEHAVIOURS}
    texts = dict(
        store.execute(
            "SELECT segment_id, text FROM segments WHERE segment_id IN (SELECT unnest(?::BIGINT[]))",
            [sorted(set().union(*planted.values()))],
        ).fetchall()
    )
    assert all(texts[s].startswith("Certainly!") for s in planted["certainly"])
    assert all(texts[s].startswith("list_all_airports") for s in planted["airport_check"])
    assert all('"include_history":true' in texts[s] for s in planted["include_history"])
    assert all("summary" in texts[s] for s in planted["email_summary"])


def test_scoring_counts_matches_directions_and_false_discoveries() -> None:
    planted = {HELDOUT: {"certainly": {1, 2, 3, 4}, "email_summary": {10, 11}}}
    result = score(
        "x",
        [
            Candidate("good", "decrease", frozenset({1, 2, 3})),  # F1 0.86 with certainly
            Candidate("wrong way", "decrease", frozenset({10, 11})),  # right segments, wrong direction
            Candidate("noise", "increase", frozenset({50, 51, 52})),
            Candidate("partial", "decrease", frozenset({1, 60, 61, 62, 63})),
        ],
        planted,
    )
    assert result.recovered["certainly"] and not result.recovered["email_summary"]
    assert result.recall["certainly"] == pytest.approx(6 / 7)
    assert result.validated == 4 and result.false_discoveries == 1 and result.partial == 1
    assert result.unrelated == ["noise"] and result.best["certainly"] == "good"
    assert result.fragments == 0


def test_a_narrow_phrase_of_a_behaviour_is_an_unrelated_fragment() -> None:
    planted = {HELDOUT: {"certainly": set(range(100))}}
    narrow = Candidate("narrow", "decrease", frozenset({1, 2, 3, 200}))  # F1 0.06, 3 of its 4 positives planted
    result = score("x", [narrow], planted)
    assert result.false_discoveries == 1 and result.fragments == 1


def test_a_finding_tested_on_discovery_is_scored_against_discovery() -> None:
    """A small study's finding drafted on the held-out fold is tested, and so scored, on discovery."""
    planted = {HELDOUT: {"certainly": {1, 2, 3}}, DISCOVERY: {"certainly": {7, 8, 9}}}
    crossfit = Candidate("cross-fitted", "decrease", frozenset({7, 8, 9}), DISCOVERY)
    result = score("x", [crossfit], planted)
    assert result.recovered["certainly"] and result.false_discoveries == 0
    result = score("x", [Candidate("held-out", "decrease", frozenset({7, 8, 9}))], planted)
    assert not result.recovered["certainly"] and result.false_discoveries == 1


def test_naive_baseline_finds_planted_phrases(planted_store) -> None:
    store, truth, _ = planted_store
    result = score("naive", naive_baseline(store, "before", "after"), planted_segment_ids(store, truth))
    assert result.recovered["certainly"]


def test_a_perfect_labeler_confirms_what_the_study_can_and_nothing_where_nothing_changed(planted_store) -> None:
    """The planted segments, as the labels of the held-out test, confirm a planted change the study is large
    enough for; a behaviour planted nowhere gets no p below the level; a small study's test runs on both folds;
    a study holding nothing out tests nothing."""
    store, truth, _ = planted_store
    planted = planted_segment_ids(store, truth)
    absent = replace(BEHAVIOURS[0], name="never_planted")
    common = [b for b in BEHAVIOURS if b.rate >= 0.25]
    try:
        store.set_meta("split_mode", "task")
        p = perfect_labeler_p(store, planted, (*common, absent), n_permutations=500)
        assert all(len(p[b.name]) == 1 and p[b.name][0] < 0.05 for b in common), p
        assert p["never_planted"][0] is None or p["never_planted"][0] > 0.05
        store.set_meta("split_mode", "rollout")
        assert all(len(ps) == 2 for ps in perfect_labeler_p(store, planted, tuple(common), n_permutations=200).values())
        store.set_meta("split_mode", "none")
        assert perfect_labeler_p(store, planted, tuple(common)) == {b.name: [] for b in common}
    finally:
        store.execute("DELETE FROM meta WHERE key = 'split_mode'")


def _feature(store: Store, feature_id: int, kind: str, tested: bool, fires: list[int]) -> None:
    """A feature with a row of `kind` that fires (activation 1.0 over threshold 0.5) on `fires`."""
    store.execute(
        "INSERT INTO features (feature_id, source, name, label, threshold) VALUES (?, 'concept', ?, '', 0.5)",
        [feature_id, f"concept:{feature_id}"],
    )
    store.execute("INSERT INTO feature_deltas (feature_id, kind, tested) VALUES (?, ?, ?)", [feature_id, kind, tested])
    store.execute("INSERT INTO segment_features SELECT unnest(?::BIGINT[]), ?, 1.0", [fires, feature_id])


def test_the_best_source_is_the_tested_row_of_the_kind_that_fires_most_like_the_behaviour(planted_store) -> None:
    """A tested text row firing on half the planted replies and as many others has F1 about 1/2; an untested
    row, or one of another kind, firing on all of them does not count; a row firing on exactly them is 1.0."""
    store, truth, _ = planted_store
    planted = planted_segment_ids(store, truth)
    email = sorted(planted[DISCOVERY]["email_summary"])
    half = len(email) // 2
    others = store.frame(
        "SELECT segment_id FROM segments JOIN rollouts USING (rollout_key) WHERE kind = 'text' AND split = ? "
        "AND segment_id NOT IN (SELECT unnest(?::BIGINT[])) ORDER BY segment_id LIMIT ?",
        [DISCOVERY, email, half],
    )["segment_id"].to_list()
    email_only = (BEHAVIOURS[0], replace(BEHAVIOURS[0], name="never_planted"))
    store.execute("BEGIN")
    try:
        _feature(store, 1, "text", True, email[:half] + others)
        _feature(store, 2, "text", False, email)
        _feature(store, 3, "reasoning", True, email)
        got = best_sources(store, planted, email_only)
        assert got["email_summary"] == Source(1, pytest.approx(2 * half / (2 * half + len(email))))
        assert got["never_planted"] is None
        _feature(store, 4, "text", True, email)
        assert best_sources(store, planted, email_only)["email_summary"] == Source(4, 1.0)
        assert best_source_f1(store, planted, email_only) == {"email_summary": 1.0, "never_planted": None}
        # where no row of its kind fires on it, the best source isolates none of it
        assert best_sources(store, planted, (BEHAVIOURS[3],))["airport_check"] == Source(None, 0.0)
    finally:
        store.execute("ROLLBACK")
