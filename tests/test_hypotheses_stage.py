"""The hypotheses stage end to end on a planted study (offline), and the user-hypothesis ledger."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from factories_hypotheses import Planted, add_features, make_study, split_within_task
from rich.console import Console

from engine import cli
from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.hypotheses import lifecycle, stage
from engine.hypotheses.lexical import lexical_sources
from engine.hypotheses.reasons import NO_MATCH, TOO_SMALL
from engine.hypotheses.sources import DRAFT_FDR, SourceQueue
from engine.hypotheses.verifier import SegmentView, Verifier
from engine.kinds import DISCOVERY, HELDOUT
from engine.progress import NullProgress
from engine.stats.fdr import bh_qvalues
from engine.store import Store, queries

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
    assert provenance["split"] == HELDOUT and provenance["labeler"] == "verifier"
    assert provenance["seed"] == 3 and provenance["drafter"] == "extractive"
    # Labels cover held-out segments only, and match the planted ones there.
    labelled = store.frame(
        "SELECT l.segment_id, l.label, r.split FROM hypothesis_labels l JOIN segments USING (segment_id) "
        "JOIN rollouts r USING (rollout_key) WHERE l.hypothesis_id = ?",
        [apology["hypothesis_id"]],
    )
    assert set(labelled["split"]) == {HELDOUT}
    positives = set(labelled.filter("label")["segment_id"])
    assert positives and positives <= truth["apology"]
    assert run_stage(store) == 0  # same inputs and config: skipped
    assert store.scalar("SELECT count(*) FROM runs WHERE stage = 'hypotheses' AND status = 'done'") == 1


def test_user_hypotheses_are_tested_as_one_family(study) -> None:
    store, _ = study
    run_stage(store)
    hid = lifecycle.add_hypothesis(store, "The agent apologises more", pattern=r"apologi[sz]e", kind="text")
    assert store.scalar("SELECT status FROM hypotheses WHERE hypothesis_id = ?", [hid]) == "proposed"
    result = lifecycle.test_hypothesis(store, hid)
    assert result.status == "validated" and result.n_labeled > 0
    null = lifecycle.add_hypothesis(store, "More talk of departures", pattern="departs", direction="increase")
    assert lifecycle.test_hypothesis(store, null).status in ("inconclusive", "rejected")
    lifecycle.decide(store, hid, "accepted", note="matches what we saw")
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
        lifecycle.add_hypothesis(store, "x")
    with pytest.raises(InputError, match="bad regex"):
        lifecycle.add_hypothesis(store, "x", pattern="(")
    with pytest.raises(InputError, match="--kind"):
        lifecycle.add_hypothesis(store, "x", pattern="a", kind="user")
    hid = lifecycle.add_hypothesis(store, "Asks for confirmation", judge="Does the agent ask to confirm?")
    run_stage(store)
    with pytest.raises(InputError, match="ANTHROPIC_API_KEY"):
        lifecycle.test_hypothesis(store, hid)


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


def test_every_heldout_test_stays_in_the_family_across_reruns_and_tests(study, monkeypatch: pytest.MonkeyPatch) -> None:
    """A re-run that drafts none of the earlier drafts (no source) drops them, but not their held-out tests:
    every stored q-value is the BH q over all held-out tests ever run on the split."""
    store, _ = study
    run_stage(store)
    first = set(store.frame("SELECT statement, spec FROM heldout_tests").rows())
    hid = lifecycle.add_hypothesis(store, "More departures", pattern="departs", kind="text")
    lifecycle.test_hypothesis(store, hid)
    monkeypatch.setattr(stage, "source_queue", lambda *args, **kwargs: SourceQueue([], []))
    monkeypatch.setattr(stage, "lexical_sources", lambda *args, **kwargs: [])
    stage.run(store, replace(CONFIG, seed=4), np.random.default_rng(1), NullProgress())
    assert store.scalar("SELECT count(*) FROM hypotheses") == 1  # the drafts are gone; the user's stays
    tests = store.frame("SELECT statement, spec, p_value FROM heldout_tests")
    assert len(first) == 2 and first <= set(tests.select("statement", "spec").rows()) and tests.height == 3
    p = tests["p_value"].drop_nulls().to_numpy()
    current = store.frame("SELECT p_value, q_value FROM hypotheses WHERE p_value IS NOT NULL")
    expected = dict(zip(p.tolist(), bh_qvalues(p).tolist(), strict=True))
    assert current.height and all(q == pytest.approx(expected[p]) for p, q in current.rows())


def test_hypotheses_written_after_seeing_heldout_examples_are_exploratory(study, monkeypatch, tmp_path) -> None:
    """`hypothesis show --examples` marks its examples held-out and logs the view; a hypothesis added after it
    is tested and counted but never validated, and the report and the top findings leave it out."""
    store, _ = study
    run_stage(store)
    before_view = lifecycle.add_hypothesis(store, "The agent apologises more", pattern=r"apologi[sz]e", kind="text")
    path = str(store.path)
    store.close()
    buffer = io.StringIO()
    monkeypatch.setattr(cli.output, "out", Console(file=buffer, width=200, highlight=False))
    assert cli.main(["hypothesis", "show", path, "0"]) == 0  # no examples asked: nothing logged
    with Store(path) as s:
        assert s.scalar("SELECT count(*) FROM heldout_views") == 0
    assert cli.main(["hypothesis", "show", path, "0", "--examples", "2"]) == 0
    shown = buffer.getvalue()
    assert shown.count("[held-out]") >= 2
    with Store(path) as s:
        after_view = lifecycle.add_hypothesis(s, "Apologies, seen on held-out", pattern=r"apologi[sz]e", kind="text")
        assert lifecycle.test_hypothesis(s, before_view).status == "validated"
        seen = lifecycle.test_hypothesis(s, after_view)
        assert seen.status == "exploratory" and "held-out evidence was shown" in seen.reason
        assert "The test said validated" in seen.reason and seen.q_value is not None
        assert after_view not in [h.hypothesis_id for h in queries.top_findings(s.cursor())]
        assert s.scalar("SELECT count(*) FROM heldout_tests WHERE statement = 'Apologies, seen on held-out'") == 1
    assert cli.main(["hypothesis", "list", path, "--status", "exploratory"]) == 0
    assert "Apologies, seen on held-out" in buffer.getvalue()


def test_every_study_drafts_below_the_drafting_level(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Drafting only chooses which claims the held-out test sees, so every study drafts at q < sources.DRAFT_FDR,
    not q < fdr: the planted apology at discovery q 0.3 is drafted, on a small study's first fold and on a study
    split by task; at q 0.6 it is drafted in neither. Each fold's n-grams are drafted at the same level as its
    features."""
    levels: list[float | None] = []

    def lexical(*args, **kwargs):  # the real sources, with the level the stage asked for recorded
        levels.append(kwargs.get("draft_fdr"))
        return lexical_sources(*args, **kwargs)

    monkeypatch.setattr(stage, "lexical_sources", lexical)
    for q, drafted in ((0.3, True), (0.6, False)):
        small, truth = make_study(tmp_path / f"small-{q}.duckdb", [APOLOGY, AIRPORTS], n_tasks=4, k=12)
        large, large_truth = make_study(tmp_path / f"large-{q}.duckdb", [APOLOGY, AIRPORTS])
        for store, planted in ((small, truth), (large, large_truth)):
            levels.clear()
            with store:
                add_features(store, planted)
                if store is small:
                    split_within_task(store)
                store.execute("UPDATE feature_deltas SET q_value = ? WHERE feature_id = 0", [q])
                run_stage(store)
                provenances = [json.loads(p) for p in store.frame("SELECT provenance FROM hypotheses")["provenance"]]
                apology = [p["drafted_on"] for p in provenances if 0 in p["feature_ids"]]
                assert apology == ([DISCOVERY] if drafted else [])
                assert levels == ([DRAFT_FDR, DRAFT_FDR] if store is small else [DRAFT_FDR])


def test_small_study_is_cross_fitted_with_one_family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """4 tasks, split within task: the stage drafts on discovery and tests on held-out, then drafts on the
    held-out fold (its own deltas and n-grams) and tests on discovery. A phrase planted only in the held-out
    fold's after-rollouts is drafted there and not confirmed on discovery; a claim both folds make (the planted
    apology) is tested once. Each hypothesis's labels lie on the fold it was not drafted on; every q is BH over
    all tests."""
    store, _ = make_study(tmp_path / "x.duckdb", [APOLOGY, AIRPORTS], n_tasks=4, k=12)
    with store:
        add_features(store, _)
        split_within_task(store, heldout_phrase=True)  # fold B alone sees a new phrase
        deltas_before = store.frame("SELECT * FROM feature_deltas ORDER BY feature_id, kind")
        run_stage(store)
        metrics = json.loads(store.scalar("SELECT metrics FROM runs WHERE stage = 'hypotheses'"))
        assert metrics["cross_fitted"] is True
        rows = store.frame(
            "SELECT hypothesis_id, statement, status, reason, provenance, p_value, q_value FROM hypotheses"
        ).to_dicts()
        for r in rows:
            provenance = json.loads(r["provenance"])
            splits = store.frame(
                "SELECT DISTINCT r.split FROM hypothesis_labels l JOIN segments USING (segment_id) "
                "JOIN rollouts r USING (rollout_key) WHERE l.hypothesis_id = ?",
                [r["hypothesis_id"]],
            )["split"].to_list()
            assert splits == [provenance["split"]] and provenance["drafted_on"] != provenance["split"]
        drafted_on = {r["statement"]: (json.loads(r["provenance"])["drafted_on"], r["status"]) for r in rows}
        assert any("apologize" in s and v == (DISCOVERY, "validated") for s, v in drafted_on.items())
        artifact = [v for s, v in drafted_on.items() if "itinerary below" in s]
        assert artifact and all(where == HELDOUT and status != "validated" for where, status in artifact)
        specs = store.frame("SELECT spec::VARCHAR AS spec FROM hypotheses")["spec"]
        assert specs.n_unique() == len(specs)  # no claim drafted on both folds is tested twice
        assert store.scalar("SELECT count(*) FROM heldout_tests") == len(rows)
        # one family for both folds, less the tests that cannot reach the level (Tarone): they have no q
        counted = [r for r in rows if r["q_value"] is not None]
        p = np.array([r["p_value"] for r in counted])
        assert counted and np.allclose([r["q_value"] for r in counted], bh_qvalues(p))
        assert all(r["reason"].startswith((TOO_SMALL, NO_MATCH)) for r in rows if r["q_value"] is None)
        # `hypothesis test` of a fold-B hypothesis labels discovery again, and keeps it in the one family
        fold_b = next(r["hypothesis_id"] for r in rows if json.loads(r["provenance"])["split"] == DISCOVERY)
        assert lifecycle.test_hypothesis(store, fold_b).status != "validated"
        assert store.frame(
            "SELECT DISTINCT r.split FROM hypothesis_labels l JOIN segments USING (segment_id) "
            "JOIN rollouts r USING (rollout_key) WHERE l.hypothesis_id = ?",
            [fold_b],
        )["split"].to_list() == [DISCOVERY]
        assert (
            json.loads(store.scalar("SELECT provenance FROM hypotheses WHERE hypothesis_id = ?", [fold_b]))[
                "drafted_on"
            ]
            == HELDOUT
        )
        # the held-out fold's deltas shadowed the stored ones for drafting only
        assert store.frame("SELECT * FROM feature_deltas ORDER BY feature_id, kind").equals(deltas_before)
    # `hypothesis show` says where a finding was drafted and tested, and how the other fold drafted it too
    repeated = next(r for r in rows if json.loads(r["provenance"]).get("other_fold"))
    buffer = io.StringIO()
    monkeypatch.setattr(cli.output, "out", Console(file=buffer, width=400, highlight=False))
    assert cli.main(["hypothesis", "show", str(store.path), str(repeated["hypothesis_id"])]) == 0
    shown = buffer.getvalue()
    assert "drafted on discovery, tested on held-out" in shown and "drafted on both folds, tested once" in shown
    for other in json.loads(repeated["provenance"])["other_fold"]:
        assert f"also drafted on the other fold as: {other['statement']}" in shown


def test_a_hypothesis_on_a_kind_the_split_lacks_gets_a_clear_error(sample_study_copy: Path) -> None:
    """The tau2 sample has no reasoning: testing a reasoning hypothesis says so, and labels nothing."""
    from engine.errors import InputError
    from engine.hypotheses import lifecycle

    with Store(sample_study_copy) as store:
        assert store.scalar("SELECT count(*) FROM segments WHERE kind = 'reasoning'") == 0
        hid = lifecycle.add_hypothesis(store, "More thinking about refunds", pattern="refund", kind="reasoning")
        with pytest.raises(InputError, match="no segment of the kinds its labeler reads"):
            lifecycle.test_hypothesis(store, hid)
        assert store.scalar("SELECT count(*) FROM hypothesis_labels WHERE hypothesis_id = ?", [hid]) == 0


def test_a_study_with_nothing_held_out_drafts_nothing_and_says_why(study, caplog) -> None:
    """A study whose split holds out no rollout (the tau2 grok-3-mini file's A/A split: one shared task, one
    rollout a side, and a lone rollout stays in discovery) cannot test a hypothesis: the stage drafts none and
    says so, where it failed on loading the held-out split ("run `rldiff analyze` first")."""
    store, _ = study
    run_stage(store)
    assert store.scalar("SELECT count(*) FROM hypotheses") == 2
    store.execute("UPDATE rollouts SET split = ?", [DISCOVERY])
    store.execute("DELETE FROM runs WHERE stage = 'hypotheses'")  # as a new split would: the stage runs again
    assert run_stage(store) == 0
    assert store.scalar("SELECT count(*) FROM hypotheses") == 0
    assert "no hypothesis can be tested" in caplog.text
    metrics = store.scalar("SELECT metrics FROM runs WHERE stage = 'hypotheses' ORDER BY run_id DESC LIMIT 1")
    metrics = json.loads(metrics)
    assert metrics["skipped"] == stage.NOTHING_HELD_OUT


def test_a_small_studys_second_fold_does_not_depend_on_the_first_folds_draws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held-out fold's deltas, drafts and labels come from their own random stream: a first fold that draws
    more (here: a thousand numbers more before it drafts) leaves the second fold's results as they were."""
    real_draft_fold, real_fold_deltas = stage._draft_fold, stage.heldout_fold_deltas
    fold_b_p: list[list[float]] = []
    extra_draws = [0]

    def fold_deltas(*args, **kwargs):  # the real deltas, with their p-values recorded
        deltas = real_fold_deltas(*args, **kwargs)
        fold_b_p.append(deltas["p_value"].to_list())
        return deltas

    def draft_fold(*args):  # the first call drafts fold A: it draws `extra_draws` numbers more first
        args[6].random(extra_draws.pop() if extra_draws else 0)
        return real_draft_fold(*args)

    monkeypatch.setattr(stage, "heldout_fold_deltas", fold_deltas)
    monkeypatch.setattr(stage, "_draft_fold", draft_fold)
    fold_b: list[list[tuple[str, float]]] = []
    for extra in (0, 1000):
        extra_draws.append(extra)
        store, truth = make_study(tmp_path / f"s{extra}.duckdb", [APOLOGY, AIRPORTS], n_tasks=4, k=12)
        with store:
            add_features(store, truth)
            split_within_task(store, heldout_phrase=True)  # fold B alone sees a new phrase
            run_stage(store)
            rows = store.frame("SELECT statement, provenance, p_value FROM hypotheses ORDER BY statement").to_dicts()
        fold_b.append(
            [(r["statement"], r["p_value"]) for r in rows if json.loads(r["provenance"])["drafted_on"] == HELDOUT]
        )
    assert fold_b_p[0] == fold_b_p[1] and fold_b[0] == fold_b[1] and fold_b[0]
