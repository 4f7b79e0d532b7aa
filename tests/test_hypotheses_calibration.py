"""Labeler calibration against hand labels, and LLM drafting through the fake client."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from factories_hypotheses import Planted, add_features, make_study, split_within_task

from bench.labeler_calibration import shipped_interval, simulate
from engine.config import AnalyzeConfig
from engine.console import calibration_text
from engine.errors import InputError
from engine.hypotheses import lifecycle, stage
from engine.hypotheses.calibration import calibrate, checkpoint_estimate
from engine.hypotheses.calibration_record import stored_calibration
from engine.hypotheses.judge import JUDGE_SCHEMA
from engine.kinds import DISCOVERY, HELDOUT
from engine.llm.fake import FakeLLMClient
from engine.llm.session import LLMSession
from engine.progress import NullProgress
from engine.store.queries import label_candidates

APOLOGY = Planted("apology", "text", "I sincerely apologize for the inconvenience.", 0.05, 0.45)
AIRPORTS = Planted("airports", "tool_call", "list_all_airports", 0.3, 0.02)
CONFIG = AnalyzeConfig(before="before", after="after", permutations=300, seed=1)


@pytest.fixture
def study(tmp_path: Path):
    store, truth = make_study(tmp_path / "s.duckdb", [APOLOGY], n_tasks=16)
    with store:
        add_features(store, truth)
        yield store, truth


def test_corrected_prevalence_against_a_hand_computed_reference() -> None:
    """A labeler level of 0.4 over 100 segments; hand labels: 8 of 10 labeler-yes and 1 of 10 labeler-no are
    true. theta = 0.4 * 0.8 + 0.6 * 0.1 = 0.38; sensitivity 0.32 / 0.38; specificity 0.54 / 0.62; the hand
    sample's variance 0.16 * (0.75 * 0.25 / 10) + 0.36 * (1/6 * 5/6 / 10) (add-one smoothing in the shares'
    variances)."""
    hand_verdict = np.arange(20) < 10
    hand_truth = np.array([True] * 8 + [False] * 2 + [True] + [False] * 9)
    c = checkpoint_estimate(0.4, 100, hand_truth, hand_verdict, np.ones(20))
    assert c.corrected == pytest.approx(0.38)
    assert (c.true_if_yes, c.true_if_no) == (pytest.approx(0.8), pytest.approx(0.1))
    assert c.sensitivity == pytest.approx(0.32 / 0.38) and c.specificity == pytest.approx(0.54 / 0.62)
    expected_var = 0.16 * 0.75 * 0.25 / 10 + 0.36 * (1 / 6) * (5 / 6) / 10
    assert c.hand_se == pytest.approx(np.sqrt(expected_var))
    assert (c.tp, c.fp, c.fn, c.tn) == (8, 2, 1, 9)
    # One hand label where the labeler said no: no correction, and the reason names what is missing.
    thin = checkpoint_estimate(0.4, 100, hand_truth[:11], hand_verdict[:11], np.ones(11))
    assert thin.corrected is None and "said no (has 1)" in thin.missing


def test_corrected_interval_covers_the_truth_a_biased_labeler_misses() -> None:
    """A labeler whose false positives differ by checkpoint (5% vs 30%), missing 20% of positives, with
    judge-style weights and true rates that vary by task and rollout (`bench/labeler_calibration.py`): its own
    delta is off by more than 10 points; the corrected 95% interval covers the true +0.1 in at least 90% of 300
    studies (a calibrated one falls below with probability < 0.1%), though a rollout's segments are not
    independent."""
    rng = np.random.default_rng(0)
    covered, naive = 0, []
    for _ in range(300):
        study = simulate(rng, rollout_sd=0.08, hand=60, bases=(0.35, 0.45), false_positives=(0.05, 0.3))
        _, low, high, own = shipped_interval(study)
        naive.append(own - 0.1)
        covered += low <= 0.1 <= high
    assert np.mean(naive) > 0.1
    assert covered >= 270


def test_calibration_against_hand_labels_is_stored_and_shown(study) -> None:
    store, truth = study
    stage.run(store, CONFIG, np.random.default_rng(0), NullProgress())
    # A too-broad verifier: matches "inconvenience" and also every "confirm".
    hid = lifecycle.add_hypothesis(store, "apologies", pattern="inconvenience|confirm", kind="text")
    with pytest.raises(InputError, match="no hand labels"):
        calibrate(store, hid)
    lifecycle.test_hypothesis(store, hid)
    candidates = label_candidates(store.cursor(), hid, limit=80)
    for c in candidates:
        lifecycle.add_user_label(store, hid, c.segment_id, c.segment_id in truth["apology"])
    # Labels of segments outside what the labeler's prevalence counts are ignored: a discovery segment (not the
    # tested split) and a held-out tool call (not the verifier's kind).
    discovery, tool_call = store.frame(
        "SELECT min(s.segment_id) FILTER (WHERE r.split = 'discovery' AND s.kind = 'text'), "
        "min(s.segment_id) FILTER (WHERE r.split = 'heldout' AND s.kind = 'tool_call') "
        "FROM segments s JOIN rollouts r USING (rollout_key)"
    ).row(0)
    lifecycle.add_user_label(store, hid, discovery, True)
    lifecycle.add_user_label(store, hid, tool_call, False)
    result = calibrate(store, hid)
    labelled = {c.segment_id: c.text for c in candidates}
    expected_fp = sum(("confirm" in t) and ("inconvenience" not in t) for t in labelled.values())
    assert result.n == 80 and result.before.fn == result.after.fn == 0  # the verifier misses no apology
    assert result.before.fp + result.after.fp == expected_fp > 0
    assert result.before.tn + result.after.tn == sum(
        not ("confirm" in t or "inconvenience" in t) for t in labelled.values()
    )
    # The stratified hand sample has both verdicts in both checkpoints, so both are corrected.
    assert min(result.before.tp + result.before.fp, result.before.tn + result.before.fn) >= 2
    tested = store.frame(
        "SELECT prevalence_before, prevalence_after, delta FROM hypotheses WHERE hypothesis_id = ?", [hid]
    ).row(0, named=True)
    observed = tested["prevalence_after"]
    # the labeler's own levels and delta are the held-out test's: one estimand, corrected or not
    assert result.before.labeler_rate == pytest.approx(tested["prevalence_before"])
    assert result.after.labeler_rate == pytest.approx(observed)
    assert result.labeler_delta == pytest.approx(tested["delta"])
    # The broad labeler over-reports; corrected for its false positives the prevalence is lower.
    assert result.after.corrected is not None and 0.0 <= result.after.corrected < observed
    assert result.ci_low < result.delta < result.ci_high
    stored = stored_calibration(store.cursor(), hid)
    assert stored["delta"] == pytest.approx(result.delta) and stored["stale"] is False
    shown = calibration_text(hid, result).plain
    assert "TP" in shown and "specificity" in shown and "corrected delta" in shown
    assert "(prevalence on held-out, " in shown
    lifecycle.test_hypothesis(store, hid)  # new labels: the stored calibration is stale
    assert stored_calibration(store.cursor(), hid)["stale"] is True


def test_a_hypothesis_tested_on_the_discovery_fold_is_calibrated_there(tmp_path: Path) -> None:
    """A small study cross-fits: a hypothesis drafted on the held-out fold is tested on discovery. Its
    calibration reads hand labels of discovery segments, its labeler levels are that test's, and it says so."""
    store, truth = make_study(tmp_path / "small.duckdb", [APOLOGY, AIRPORTS], n_tasks=4, k=12)
    with store:
        add_features(store, truth)
        split_within_task(store, heldout_phrase=True)  # fold B alone sees a new phrase
        stage.run(store, CONFIG, np.random.default_rng(0), NullProgress())
        hid, before, after = store.frame(
            "SELECT hypothesis_id, prevalence_before, prevalence_after FROM hypotheses "
            "WHERE json_extract_string(provenance, '$.split') = 'discovery' ORDER BY hypothesis_id LIMIT 1"
        ).row(0)
        for c in label_candidates(store.cursor(), hid, limit=40):
            lifecycle.add_user_label(store, hid, c.segment_id, "itinerary below" in c.text)
        splits = store.frame(
            "SELECT DISTINCT r.split FROM user_labels JOIN segments USING (segment_id) JOIN rollouts r "
            "USING (rollout_key) WHERE hypothesis_id = ?",
            [hid],
        )["split"].to_list()
        result = calibrate(store, hid)
    assert splits == [DISCOVERY] and result.n == 40
    assert (result.before.labeler_rate, result.after.labeler_rate) == (pytest.approx(before), pytest.approx(after))
    assert "(prevalence on the discovery fold, " in calibration_text(hid, result).plain


def test_llm_drafting_uses_fenced_examples_and_checks_the_verifier(study, monkeypatch) -> None:
    store, _ = study
    seen = []

    def responder(request):
        seen.append(request)
        if "explain" in request.system.lower():
            return {"explanation": "Detects apologies for inconvenience."}
        if "data-" in request.user and "apologize" in request.user:
            return {
                "statement": "The agent apologises for inconvenience more often",
                "direction": "increase",
                "judge_question": "Does the agent apologise?",
                "explanation": "apologies",
                "verifier": {"all": [{"kind": "text"}, {"regex": "sincerely apologi[sz]e"}]},
            }
        return {
            "statement": "Something vague",
            "direction": "increase",
            "judge_question": "Is it vague?",
            "explanation": "?",
            "verifier": {"regex": "("},
        }

    client = FakeLLMClient(responder)
    monkeypatch.setattr(lifecycle, "open_session", lambda store, config: LLMSession(client, store, 5.0))
    monkeypatch.setattr(stage, "open_session", lambda store, config: LLMSession(client, store, 5.0))
    stage.run(
        store,
        AnalyzeConfig(before="before", after="after", llm="fake-model", permutations=300),
        np.random.default_rng(0),
        NullProgress(),
    )
    rows = {r["statement"]: r for r in store.frame("SELECT * FROM hypotheses").to_dicts()}
    good = rows["The agent apologises for inconvenience more often"]
    assert good["origin"] == "llm" and good["labeler"] == "verifier" and good["status"] == "validated"
    provenance = json.loads(good["provenance"])
    assert provenance["model"] == "fake-model" and len(provenance["prompt_hash"]) == 64
    draft_requests = [r for r in seen if "Segments where the pattern fires" in r.user]
    assert all("<data-" in r.user and "never follow" in r.system for r in draft_requests)
    assert store.scalar("SELECT explanation FROM features WHERE feature_id = 0") == (
        "Detects apologies for inconvenience."
    )


def test_user_judge_hypothesis_is_tested_through_the_llm(study, monkeypatch) -> None:
    store, _ = study
    stage.run(store, CONFIG, np.random.default_rng(0), NullProgress())
    client = FakeLLMClient(lambda r: {"answer": "apologize" in r.user, "evidence": "apologize"})
    monkeypatch.setattr(lifecycle, "open_session", lambda store, config: LLMSession(client, store, 5.0))
    hid = lifecycle.add_hypothesis(store, "The agent apologises more", judge="Does the agent apologise?", kind="text")
    result = lifecycle.test_hypothesis(store, hid, llm="fake-model")
    assert result.status == "validated" and result.n_labeled > 0
    provenance = json.loads(store.scalar("SELECT provenance FROM hypotheses WHERE hypothesis_id = ?", [hid]))
    assert provenance["labeler"] == "judge:fake-model" and provenance["split"] == HELDOUT
    assert all("Does the agent apologise?" in r.system for r in client.requests)


def test_cost_cap_falls_back_to_extractive_drafts(study, monkeypatch, caplog) -> None:
    store, _ = study
    client = FakeLLMClient(lambda r: {"explanation": "x"})  # would fail the draft schema if ever asked
    monkeypatch.setattr(stage, "open_session", lambda store, config: LLMSession(client, store, 0.0))
    stage.run(
        store,
        AnalyzeConfig(before="before", after="after", llm="fake-model", permutations=300),
        np.random.default_rng(0),
        NullProgress(),
    )
    assert client.requests == []  # nothing fits in a zero budget
    assert "cost cap" in caplog.text
    origins = set(store.frame("SELECT origin FROM hypotheses")["origin"])
    assert origins == {"extractive"}


def test_judge_drafts_pass_a_discovery_check(study, monkeypatch) -> None:
    """Judge drafts (the LLM's verifier was invalid) are labelled on discovery first: a question that separates
    the checkpoints is kept with its discovery z; one answered at random is dropped before held-out testing."""
    store, _ = study
    coin = np.random.default_rng(7)

    def responder(request):
        if request.schema == JUDGE_SCHEMA:
            if "apologise" in request.system:
                return {"answer": "apologize" in request.user, "evidence": "apologize"}
            return {"answer": bool(coin.random() < 0.5), "evidence": "?"}
        if "explain" in request.system.lower():
            return {"explanation": "x"}
        apology = "apologize" in request.user
        return {
            "statement": "The agent apologises more" if apology else "Something vague",
            "direction": "increase",
            "judge_question": "Does the agent apologise?" if apology else "Is it vague?",
            "explanation": "?",
            "verifier": {"regex": "("},  # invalid: the draft falls back to its judge question
        }

    client = FakeLLMClient(responder)
    monkeypatch.setattr(lifecycle, "open_session", lambda store, config: LLMSession(client, store, 50.0))
    monkeypatch.setattr(stage, "open_session", lambda store, config: LLMSession(client, store, 50.0))
    stage.run(
        store,
        AnalyzeConfig(before="before", after="after", llm="fake-model", permutations=300),
        np.random.default_rng(0),
        NullProgress(),
    )
    rows = {r["statement"]: r for r in store.frame("SELECT * FROM hypotheses").to_dicts()}
    assert "Something vague" not in rows
    good = rows["The agent apologises more"]
    provenance = json.loads(good["provenance"])
    assert good["labeler"] == "judge" and provenance["judge_discovery_z"] >= 2.0
    metrics = json.loads(store.scalar("SELECT metrics FROM runs WHERE stage = 'hypotheses'"))
    assert metrics["judge_dropped"] >= 1
