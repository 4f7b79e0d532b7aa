"""Held-out validation and the judge's stratified sampling, on planted studies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from factories_hypotheses import Planted, make_study

from engine.hypotheses.judge import judge_labels, stratified_sample
from engine.hypotheses.population import load_population
from engine.hypotheses.reasons import TOO_SMALL
from engine.hypotheses.validate import Claim, _decide, validate
from engine.hypotheses.verifier import Verifier
from engine.kinds import HELDOUT
from engine.llm.fake import FakeLLMClient
from engine.llm.session import LLMSession

APOLOGY = Planted("apology", "text", "I sincerely apologize for the inconvenience.", 0.05, 0.45)
AIRPORTS = Planted("airports", "tool_call", "list_all_airports", 0.3, 0.02)


@pytest.fixture
def study(tmp_path: Path):
    store, truth = make_study(tmp_path / "s.duckdb", [APOLOGY, AIRPORTS])
    with store:
        yield store, truth


def labels_for(population, hypothesis_id: int, spec: dict, kinds: list[str]) -> pl.DataFrame:
    return population.verifier_labels(Verifier(spec), kinds).with_columns(hypothesis_id=pl.lit(hypothesis_id))


def test_planted_changes_validate_and_nulls_do_not(study) -> None:
    store, _ = study
    heldout = load_population(store, "before", "after", HELDOUT)
    labels = pl.concat(
        [
            labels_for(heldout, 0, {"regex": "apologi[sz]e"}, ["text"]),
            labels_for(heldout, 1, {"tool_name": "list_all_airports"}, ["tool_call"]),
            labels_for(heldout, 2, {"regex": "confirm"}, ["text"]),  # filler: no change
            labels_for(heldout, 3, {"regex": "apologi[sz]e"}, ["text"]),  # claimed the wrong way
            labels_for(heldout, 4, {"regex": "no such words"}, ["text"]),
        ]
    )
    claims = [
        Claim(0, "increase"),
        Claim(1, "decrease"),
        Claim(2, "increase"),
        Claim(3, "decrease"),
        Claim(4, "increase"),
    ]
    results = {
        v.hypothesis_id: v for v in validate(heldout, labels, claims, np.random.default_rng(0), n_permutations=500)
    }
    assert results[0].status == "validated" and results[0].prevalence_after > results[0].prevalence_before
    assert results[0].ci_low > 0 and results[0].q_value < 0.05
    assert results[1].status == "validated" and results[1].delta < 0
    assert results[2].status == "inconclusive" and "could detect" in results[2].reason
    assert results[2].mde is not None and 0 < results[2].mde < 0.5
    assert results[3].status == "rejected" and "other way" in results[3].reason
    assert results[4].status == "rejected" and "matched no" in results[4].reason
    assert results[0].n_labeled == heldout.of_kinds(["text"]).height


@pytest.mark.parametrize(
    ("sign", "delta", "lo", "hi", "says"), [(-1.0, 0.107, -0.001, 0.215, "fall"), (1.0, -0.05, -0.1, 0.01, "rise")]
)
def test_a_claim_not_replicated_names_the_change_its_interval_rules_out(sign, delta, lo, hi, says) -> None:
    """An interval that rules out the claimed change may hold a large change the other way (a claimed fall,
    +10.7 pts, CI -0.1 to +21.5 on a small study's fold): the reason names the direction it rules out."""
    before = 0.1
    status, reason = _decide(
        200, before, before + delta, delta, lo, hi, 0.04, 0.165, 9, 0.1, 0.001, sign, 0.05, "", "held-out"
    )
    assert status == "rejected" and f"rules out a {says} of 2 pts or more" in reason


def test_an_inconclusive_claim_shows_its_p_beside_the_familys_q() -> None:
    """A 95% interval clear of 0 with q above the level (a small study's retried calls: +8.5 pts, CI +1.3 to
    +15.7, q = 0.079 over 9 tests) reads as a contradiction unless the reason gives the raw p and the family."""
    status, reason = _decide(60, 0.004, 0.089, 0.085, 0.013, 0.157, 0.0175, 0.0787, 9, 0.138, 0.001, 1.0, 0.05, "", "x")
    assert status == "inconclusive"
    assert "p=0.018, q=0.0787 over 9 tests" in reason and "among 9 tests it could detect changes of +/-13.8" in reason


def test_earlier_tests_stay_counted_and_the_mde_is_at_the_bh_level(study) -> None:
    store, _ = study
    heldout = load_population(store, "before", "after", HELDOUT)
    labels = pl.concat(
        [
            labels_for(heldout, 7, {"regex": "confirm"}, ["text"]),
            labels_for(heldout, 0, {"regex": "apologi[sz]e"}, ["text"]),
        ]
    )
    claims = [Claim(7, "increase"), Claim(0, "increase")]
    plain = validate(heldout, labels, claims, np.random.default_rng(1), n_permutations=300)
    assert "half the discovery" not in plain[0].reason
    # Tests run earlier on this split count in the BH family: q grows with them, p does not.
    later = validate(heldout, labels, claims, np.random.default_rng(1), n_permutations=300, previous_p=[0.5] * 50)
    assert later[1].p_value == plain[1].p_value and later[1].q_value > plain[1].q_value
    assert later[1].mde > plain[1].mde  # the MDE is at the BH level for a lone finding: fdr / m


def test_a_claim_that_cannot_reach_the_level_is_not_counted_in_the_family(study) -> None:
    """Tarone: a labeler that fires in two held-out tasks gives the sign-flip over tasks nothing to flip
    elsewhere, so no p below 2 / 2^2 whatever the checkpoints: it "cannot detect at this size", has no q, and
    is not one of the family's tests, so the apology finding beside it is a family of one (q = p). Shift
    suite seed 7738: phrases of two or three rollouts, untestable held out, held a finding at q = 0.058."""
    store, _ = study
    heldout = load_population(store, "before", "after", HELDOUT)
    tasks = heldout.segments.select("segment_id", "task_id")
    two = sorted(set(tasks["task_id"]))[:2]
    narrow = (
        labels_for(heldout, 1, {"regex": "apologi[sz]e"}, ["text"])
        .join(tasks, on="segment_id")
        .with_columns(label=pl.col("label") & pl.col("task_id").is_in(two))
        .drop("task_id")
    )
    labels = pl.concat([labels_for(heldout, 0, {"regex": "apologi[sz]e"}, ["text"]), narrow])
    claims = [Claim(0, "increase"), Claim(1, "increase")]
    found, few = validate(heldout, labels, claims, np.random.default_rng(2), n_permutations=300, new_tasks=True)
    assert few.floor is not None and few.floor >= 0.5 and few.q_value is None
    assert few.status == "inconclusive" and few.reason.startswith(TOO_SMALL)
    assert found.status == "validated" and found.q_value == pytest.approx(found.p_value)


def test_task_level_test_speaks_for_new_tasks(study) -> None:
    store, _ = study
    heldout = load_population(store, "before", "after", HELDOUT)
    labels = labels_for(heldout, 0, {"regex": "apologi[sz]e"}, ["text"])
    [within] = validate(heldout, labels, [Claim(0, "increase")], np.random.default_rng(2), n_permutations=300)
    [across] = validate(
        heldout, labels, [Claim(0, "increase")], np.random.default_rng(2), n_permutations=300, new_tasks=True
    )
    assert within.scope == "these tasks" and across.scope == "new tasks"
    assert "new tasks" in across.reason and across.floor == pytest.approx(
        2 / 2 ** len(set(heldout.rollout_arrays()[2]))
    )
    assert across.status == "validated"


def test_stratified_sample_keeps_every_stratum_and_weights_to_size(study) -> None:
    store, _ = study
    heldout = load_population(store, "before", "after", HELDOUT)
    texts = heldout.of_kinds(["text"])
    sample = stratified_sample(texts, 60, np.random.default_rng(0))
    assert sample.height == 60
    assert (
        sample.select("checkpoint", "task_id").unique().height == texts.select("checkpoint", "task_id").unique().height
    )
    assert sample["weight"].sum() == pytest.approx(texts.height)
    small = stratified_sample(texts, 10_000, np.random.default_rng(0))
    assert small.height == texts.height and set(small["weight"]) == {1.0}


def test_judge_is_blind_and_its_weighted_labels_validate(study) -> None:
    store, _ = study
    heldout = load_population(store, "before", "after", HELDOUT)

    def responder(request):
        assert "before" not in request.user and "after" not in request.user  # no checkpoint names leak
        hit = "apologize" in request.user
        return {"answer": hit, "evidence": "apologize" if hit else ""}

    client = FakeLLMClient(responder)
    session = LLMSession(client, store, max_cost=100.0)
    texts = heldout.of_kinds(["text"])
    labels = judge_labels(session, "Does the agent apologise?", texts, np.random.default_rng(0), budget=80)
    assert labels.height == 80 and labels["weight"].sum() == pytest.approx(texts.height)
    assert labels.filter("label")["evidence"].to_list()[0] == "apologize"
    [result] = validate(
        heldout,
        labels.with_columns(hypothesis_id=pl.lit(0)),
        [Claim(0, "increase")],
        np.random.default_rng(0),
        n_permutations=300,
    )
    assert result.status == "validated"
    # Identical segment texts are asked once (the filler repeats), so far fewer calls than labels.
    assert len(client.requests) == len({r.user for r in client.requests}) < 80
