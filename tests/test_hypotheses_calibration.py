"""Labeler calibration against hand labels, and LLM drafting through the fake client."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from factories_hypotheses import Planted, add_features, make_study

from engine.config import AnalyzeConfig
from engine.console import calibration_text
from engine.errors import InputError
from engine.hypotheses import ledger, stage
from engine.hypotheses.calibration import calibrate, corrected_prevalence, ppi_delta, ppi_mean
from engine.llm.fake import FakeLLMClient
from engine.llm.session import LLMSession
from engine.progress import NullProgress

APOLOGY = Planted("apology", "text", "I sincerely apologize for the inconvenience.", 0.05, 0.45)
CONFIG = AnalyzeConfig(before="before", after="after", permutations=300, seed=1)


@pytest.fixture
def study(tmp_path: Path):
    store, truth = make_study(tmp_path / "s.duckdb", [APOLOGY], n_tasks=16)
    with store:
        add_features(store, truth)
        yield store, truth


def test_corrected_prevalence() -> None:
    assert corrected_prevalence(0.3, 1.0, 1.0) == pytest.approx(0.3)
    # A labeler with recall 0.5 and specificity 0.9 observing 0.3: true rate (0.3 - 0.1) / 0.4 = 0.5.
    assert corrected_prevalence(0.3, 0.5, 0.9) == pytest.approx(0.5)
    assert corrected_prevalence(0.3, 0.4, 0.5) is None


def test_ppi_interval_covers_the_truth_a_biased_labeler_misses() -> None:
    """A labeler that over-reports in one checkpoint only: the labeler's own delta is biased, the PPI++ interval
    (2,000 verdicts, 150 hand labels a side) covers the true delta in about 95% of 300 replications."""
    rng = np.random.default_rng(0)
    covered, naive_bias = 0, []
    for _ in range(300):
        ests = []
        for truth_rate, false_positive in ((0.2, 0.05), (0.3, 0.25)):
            truth = rng.random(2000) < truth_rate
            predicted = truth | (rng.random(2000) < false_positive)
            hand = rng.choice(2000, 150, replace=False)
            ests.append(ppi_mean(predicted.astype(float), np.ones(2000), truth[hand], predicted[hand]))
            naive_bias.append(predicted.mean() - truth_rate)
        result = ppi_delta(*ests)
        covered += result.ci_low <= 0.1 <= result.ci_high
    assert np.mean(naive_bias[1::2]) - np.mean(naive_bias[::2]) > 0.1  # the labeler's delta is off by > 10 pts
    assert covered >= 270  # 90%: a calibrated 95% interval falls below with probability < 0.1%
    assert ppi_mean(np.ones(3), np.ones(3), np.array([True]), np.array([True])) is None


def test_precision_recall_against_hand_labels(study) -> None:
    store, truth = study
    stage.run(store, CONFIG, np.random.default_rng(0), NullProgress())
    # A too-broad verifier: matches "inconvenience" and also every "confirm".
    hid = ledger.add_hypothesis(store, "apologies", pattern="inconvenience|confirm", kind="text")
    with pytest.raises(InputError, match="no hand labels"):
        calibrate(store, hid)
    ledger.test_hypothesis(store, hid)
    texts = store.frame("SELECT segment_id, text FROM segments WHERE kind = 'text' ORDER BY segment_id LIMIT 60")
    for segment_id, _text in texts.iter_rows():
        ledger.add_user_label(store, hid, segment_id, segment_id in truth["apology"])
    result = calibrate(store, hid)
    labelled = texts["text"].to_list()
    expected_fp = sum(("confirm" in t) and ("inconvenience" not in t) for t in labelled)
    assert result.n == 60 and result.recall == 1.0
    assert result.false_positive == expected_fp > 0
    assert result.precision == pytest.approx(result.true_positive / (result.true_positive + expected_fp))
    observed = store.scalar("SELECT prevalence_after FROM hypotheses WHERE hypothesis_id = ?", [hid])
    # The broad labeler over-reports; corrected for its false positives the prevalence is lower.
    assert result.corrected_after is not None and 0.0 <= result.corrected_after < observed
    # Per checkpoint: the hand sample's confusion matrices add up, and PPI gives an interval when both have labels.
    total = sum(sum(m.values()) for m in result.by_checkpoint.values())
    assert (
        total == result.n and result.by_checkpoint["after"]["fp"] + result.by_checkpoint["before"]["fp"] == expected_fp
    )
    if min(sum(m.values()) for m in result.by_checkpoint.values()) >= 2:
        assert result.ppi is not None and result.ppi.ci_low < result.ppi.delta < result.ppi.ci_high
    shown = calibration_text(hid, result).plain
    assert "TP" in shown and "specificity" in shown and ("PPI++" in shown or "needs at least 2" in shown)


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
    monkeypatch.setattr(ledger, "open_session", lambda store, config: LLMSession(client, store, 5.0))
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
    monkeypatch.setattr(ledger, "open_session", lambda store, config: LLMSession(client, store, 5.0))
    hid = ledger.add_hypothesis(store, "The agent apologises more", judge="Does the agent apologise?", kind="text")
    result = ledger.test_hypothesis(store, hid, llm="fake-model")
    assert result.status == "validated" and result.n_labeled > 0
    provenance = json.loads(store.scalar("SELECT provenance FROM hypotheses WHERE hypothesis_id = ?", [hid]))
    assert provenance["labeler"] == "judge:fake-model" and provenance["split"] == "heldout"
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
