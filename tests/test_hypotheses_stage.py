"""The hypotheses stage end to end on a planted study (offline), and the user-hypothesis ledger."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from factories_hypotheses import Planted, add_features, make_study

from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.hypotheses import ledger, stage
from engine.hypotheses.verifier import SegmentView, Verifier
from engine.progress import NullProgress

APOLOGY = Planted("apology", "text", "I sincerely apologize for the inconvenience.", 0.05, 0.45)
AIRPORTS = Planted("airports", "tool_call", "list_all_airports", 0.3, 0.02)
CONFIG = AnalyzeConfig(before="before", after="after", permutations=400, seed=3)


@pytest.fixture
def study(tmp_path: Path):
    store, truth = make_study(tmp_path / "s.duckdb", [APOLOGY, AIRPORTS])
    with store:
        add_features(store, truth)
        yield store, truth


def run_stage(store) -> int:
    return stage.run(store, CONFIG, np.random.default_rng(0), NullProgress())


def test_offline_stage_drafts_validates_and_skips_when_done(study) -> None:
    store, truth = study
    assert run_stage(store) == 2
    rows = store.frame("SELECT * FROM hypotheses ORDER BY hypothesis_id").to_dicts()
    by_feature = {json.loads(r["provenance"])["feature_ids"][0]: r for r in rows}
    apology, airports = by_feature[0], by_feature[1]
    assert apology["origin"] == airports["origin"] == "extractive"
    assert apology["status"] == "validated" and apology["direction"] == "increase"
    spec = json.loads(apology["spec"])
    assert spec["all"][0] == {"kind": "text"}
    assert Verifier(spec)(SegmentView(0, "text", APOLOGY.content)).label
    assert json.loads(airports["spec"]) == {"tool_name": "list_all_airports"}
    assert airports["status"] == "validated" and airports["delta"] < 0
    assert json.loads(airports["provenance"])["kinds"] == ["tool_call"]  # its segment kind, not 'any'
    provenance = json.loads(apology["provenance"])
    assert provenance["split"] == "heldout" and provenance["labeler"] == "verifier"
    assert provenance["seed"] == 3 and provenance["drafter"] == "extractive"
    # Labels cover held-out segments only, and match the planted ones there.
    labelled = store.frame(
        "SELECT l.segment_id, l.label, r.split FROM hypothesis_labels l JOIN segments USING (segment_id) "
        "JOIN rollouts r USING (rollout_key) WHERE l.hypothesis_id = ?",
        [apology["hypothesis_id"]],
    )
    assert set(labelled["split"]) == {"heldout"}
    positives = set(labelled.filter("label")["segment_id"])
    assert positives and positives <= truth["apology"]
    assert run_stage(store) == 0  # same inputs and config: skipped
    assert store.scalar("SELECT count(*) FROM runs WHERE stage = 'hypotheses' AND status = 'done'") == 1


def test_user_hypotheses_are_tested_as_one_family(study) -> None:
    store, _ = study
    run_stage(store)
    hid = ledger.add_hypothesis(store, "The agent apologises more", pattern=r"apologi[sz]e", kind="text")
    assert store.scalar("SELECT status FROM hypotheses WHERE hypothesis_id = ?", [hid]) == "proposed"
    result = ledger.test_hypothesis(store, hid)
    assert result.status == "validated" and result.n_labeled > 0
    null = ledger.add_hypothesis(store, "More talk of departures", pattern="departs", direction="increase")
    assert ledger.test_hypothesis(store, null).status in ("inconclusive", "rejected")
    ledger.decide(store, hid, "accepted", note="matches what we saw")
    row = store.frame("SELECT decision, note, origin FROM hypotheses WHERE hypothesis_id = ?", [hid]).row(0)
    assert row == ("accepted", "matches what we saw", "user")
    # A re-run keeps the user's hypotheses and re-tests them with the new drafts.
    store.execute("DELETE FROM runs WHERE stage = 'hypotheses'")
    run_stage(store)
    assert store.scalar("SELECT status FROM hypotheses WHERE hypothesis_id = ?", [hid]) == "validated"
    assert store.scalar("SELECT count(*) FROM hypotheses WHERE origin = 'user'") == 2


def test_add_refuses_bad_input(study) -> None:
    store, _ = study
    with pytest.raises(InputError, match="exactly one"):
        ledger.add_hypothesis(store, "x")
    with pytest.raises(InputError, match="bad regex"):
        ledger.add_hypothesis(store, "x", pattern="(")
    with pytest.raises(InputError, match="--kind"):
        ledger.add_hypothesis(store, "x", pattern="a", kind="user")
    hid = ledger.add_hypothesis(store, "Asks for confirmation", judge="Does the agent ask to confirm?")
    run_stage(store)
    with pytest.raises(InputError, match="ANTHROPIC_API_KEY"):
        ledger.test_hypothesis(store, hid)


def test_a_phrase_no_feature_catches_is_found_lexically(tmp_path: Path) -> None:
    assured = Planted("assured", "text", "Rest assured, I will take care of this.", 0.0, 0.25)
    store, truth = make_study(tmp_path / "l.duckdb", [APOLOGY, assured])
    with store:
        add_features(store, truth)  # no feature fires on the planted phrase
        run_stage(store)
        rows = store.frame("SELECT spec, status, provenance FROM hypotheses WHERE status = 'validated'").to_dicts()
        lexical = [r for r in rows if json.loads(r["provenance"])["feature_names"][0].startswith("ngram:")]
        assert any(Verifier(json.loads(r["spec"]))(SegmentView(0, "text", assured.content)).label for r in lexical)
        assert all(
            not Verifier(json.loads(r["spec"]))(SegmentView(0, "text", "Your booking is updated.")).label
            for r in lexical
        )
