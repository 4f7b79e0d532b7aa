"""The deltas stage on stores built from simulated studies with known answers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from engine import deltas, split
from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.ingest import ingest_file
from engine.kinds import DISCOVERY
from engine.progress import NullProgress
from engine.stats.fdr import bh_qvalues
from tests.factories_stats import build_study

CONFIG = AnalyzeConfig(before="before", after="after", permutations=499)


def _run(store, config=CONFIG, seed=0) -> int:
    return deltas.run(store, config, np.random.default_rng(seed), NullProgress())


def _row(store, feature_id, kind) -> dict:
    return store.frame("SELECT * FROM feature_deltas WHERE feature_id = ? AND kind = ?", [feature_id, kind]).row(
        0, named=True
    )


def _add_feature(store, feature_id: int, every_segment: bool) -> None:
    store.append(
        "features",
        pl.DataFrame(
            {
                "feature_id": [feature_id],
                "source": ["structural"],
                "name": [f"x:{feature_id}"],
                "label": [f"extra {feature_id}"],
                "threshold": [1.0],
            }
        ),
    )
    if every_segment:
        store.execute(f"INSERT INTO segment_features SELECT segment_id, {feature_id}, 2.0 FROM segments")


@pytest.fixture
def study(store):
    build_study(
        store,
        np.random.default_rng(0),
        n_tasks=48,
        rollouts_per_checkpoint=4,
        rollout_sd=0.5,
        shifts={0: 0.3, 1: -0.2},
        reward_feature=2,
        split="alternate",
    )
    _add_feature(store, 100, every_segment=False)  # never fires
    _add_feature(store, 101, every_segment=True)  # fires in every segment
    return store


def test_planted_shifts_are_found_with_covering_intervals(study):
    assert _run(study) == 42 * 3  # every feature x (text, tool_call, any)
    covered = 0
    for kind in ("text", "tool_call"):
        up, down = _row(study, 0, kind), _row(study, 1, kind)
        assert up["q_value"] < 0.05 and up["delta"] > 0
        assert down["q_value"] < 0.05 and down["delta"] < 0
        covered += (up["ci_low"] <= 0.3 <= up["ci_high"]) + (down["ci_low"] <= -0.2 <= down["ci_high"])
    # 95% intervals (calibrated in test_stats_calibration): two misses of four would happen about 1.4% of the time.
    assert covered >= 3
    null = study.frame("SELECT q_value FROM feature_deltas WHERE tested AND feature_id BETWEEN 2 AND 39")
    assert (null["q_value"] < 0.05).sum() <= 2


def test_prevalence_rates_and_threshold_match_a_direct_count(study):
    _run(study)
    per_rollout = (
        "SELECT r.checkpoint, r.task_id, r.rollout_key, "
        "count(DISTINCT s.segment_id) FILTER (WHERE sf.activation >= 1.0) AS fired, "
        "count(DISTINCT s.segment_id) AS segments FROM rollouts r JOIN segments s USING (rollout_key) "
        "LEFT JOIN segment_features sf ON sf.segment_id = s.segment_id AND sf.feature_id = 5 "
        "WHERE r.split = 'discovery' AND s.kind = 'text' GROUP BY ALL"
    )
    direct = study.frame(
        f"WITH r AS ({per_rollout}), "
        "t AS (SELECT checkpoint, task_id, avg(fired / segments)::DOUBLE AS rate FROM r GROUP BY ALL) "
        "SELECT checkpoint, (SELECT avg(rate) FROM t WHERE t.checkpoint = r.checkpoint) AS rate, "
        "sum(fired)::DOUBLE AS fired, "
        "sum(segments)::DOUBLE AS segments, count(*) FILTER (WHERE fired > 0) AS rollouts_fired, count(*) AS rollouts "
        "FROM r GROUP BY checkpoint"
    )
    by = {row["checkpoint"]: row for row in direct.iter_rows(named=True)}
    row = _row(study, 5, "text")
    # Balanced tasks: the task-weighted mean of rollout rates is the plain mean over tasks.
    assert row["prevalence_before"] == pytest.approx(by["before"]["rate"])
    assert row["prevalence_after"] == pytest.approx(by["after"]["rate"])
    assert row["pooled_before"] == pytest.approx(by["before"]["fired"] / by["before"]["segments"])
    assert row["pooled_after"] == pytest.approx(by["after"]["fired"] / by["after"]["segments"])
    assert row["rollout_rate_after"] == pytest.approx(by["after"]["rollouts_fired"] / by["after"]["rollouts"])
    assert row["n_before"] == by["before"]["segments"]
    assert row["delta"] == pytest.approx(row["prevalence_after"] - row["prevalence_before"])
    assert row["ratio"] == pytest.approx(row["prevalence_after"] / row["prevalence_before"])
    assert row["family"] == "sae"  # build_study makes SAE features
    # Sub-threshold activations are stored but do not fire.
    assert study.scalar("SELECT count(*) FROM segment_features WHERE feature_id = 5 AND activation < 1") > 0
    any_row = _row(study, 5, "any")
    assert any_row["prevalence_before"] == pytest.approx(any_row["rollout_rate_before"])
    assert any_row["family"] == "latent_rollout"


def test_support_filters_are_written_and_counted(study):
    _run(study)
    assert _row(study, 100, "text")["tested"] is False
    assert _row(study, 100, "text")["skip_reason"] == deltas.SKIP_UNATTAINABLE
    assert _row(study, 101, "tool_call")["skip_reason"] == deltas.SKIP_UNATTAINABLE
    assert _row(study, 101, "tool_call")["prevalence_after"] == pytest.approx(1.0)
    assert _row(study, 101, "any")["p_value"] is None
    rows = study.frame("SELECT tested, min_p FROM feature_deltas")
    # Tarone: tested exactly where the design's smallest attainable p-value reaches the level.
    assert ((rows["min_p"] <= 0.05) == rows["tested"]).all()
    metrics = json.loads(study.scalar("SELECT metrics FROM runs WHERE stage = 'deltas'"))
    counts = study.frame("SELECT tested, count(*) AS n FROM feature_deltas GROUP BY 1")
    assert metrics["n_tested"] == counts.filter(pl.col("tested"))["n"].item()
    assert metrics["n_skipped"] == counts.filter(~pl.col("tested"))["n"].item()
    assert metrics["skipped_by_reason"][deltas.SKIP_UNATTAINABLE] >= 3
    by_family = study.frame("SELECT family, count(*) AS n FROM feature_deltas WHERE tested GROUP BY 1")
    assert metrics["tested_by_family"] == dict(by_family.iter_rows())
    summary = deltas.testing_summary(study)
    assert summary["tested"] == metrics["n_tested"] and summary["significant"] == metrics["n_significant"]


def test_rollout_rows_of_structural_facts_are_a_family_of_their_own(study):
    """A structural fact per rollout (here: one segment of every after rollout) is corrected among the few
    other facts per rollout, not among the latents' rollout rows, each family by its own BH."""
    _add_feature(study, 102, every_segment=False)
    study.execute(
        "INSERT INTO segment_features SELECT min(s.segment_id), 102, 2.0 FROM segments s "
        "JOIN rollouts r USING (rollout_key) WHERE r.checkpoint = 'after' GROUP BY s.rollout_key"
    )
    _run(study)
    assert _row(study, 102, "any")["family"] == "rollout"
    assert _row(study, 5, "any")["family"] == "latent_rollout"
    rows = study.frame("SELECT family, p_value, q_value FROM feature_deltas WHERE tested AND kind = 'any'")
    for family in ("rollout", "latent_rollout"):
        part = rows.filter(pl.col("family") == family)
        assert part["q_value"].to_numpy() == pytest.approx(bh_qvalues(part["p_value"].to_numpy()))
    assert _row(study, 102, "any")["q_value"] < 0.05


def test_reward_association_within_checkpoint(study):
    _run(study)
    row = _row(study, 2, "any")
    assert row["reward_assoc_before"] > 0.3 and row["reward_assoc_after"] > 0.3
    others = study.frame(
        "SELECT reward_assoc_before FROM feature_deltas WHERE kind = 'any' AND feature_id > 5 AND tested"
    )
    assert others["reward_assoc_before"].abs().median() < 0.2


def test_task_breakdown_matches_the_pooled_numbers(study):
    _run(study)
    tasks = study.frame("SELECT * FROM feature_task_deltas WHERE feature_id = 0 AND kind = 'text'")
    assert tasks.height == 24  # discovery tasks
    row = _row(study, 0, "text")
    # Equal rollouts per task and checkpoint: equal task weights.
    assert tasks["prevalence_after"].mean() == pytest.approx(row["prevalence_after"])
    assert study.scalar("SELECT count(*) FROM feature_task_deltas WHERE feature_id = 100") == 0  # untested


def test_heldout_and_one_sided_tasks_do_not_enter(study):
    _run(study)
    before = study.frame("SELECT * FROM feature_deltas ORDER BY feature_id, kind")
    study.execute(
        "DELETE FROM segment_features WHERE segment_id IN (SELECT segment_id FROM segments "
        "JOIN rollouts USING (rollout_key) WHERE split = 'heldout')"
    )
    extra = study.frame("SELECT * FROM rollouts WHERE checkpoint = 'after' AND split = 'discovery' LIMIT 3")
    study.append("rollouts", extra.with_columns(rollout_key=pl.col("rollout_key") + 10_000, task_id=pl.lit("lonely")))
    assert _run(study) > 0  # inputs changed: recomputed, not skipped
    after = study.frame("SELECT * FROM feature_deltas ORDER BY feature_id, kind")
    assert after.height == before.height
    for column in ("prevalence_before", "prevalence_after", "n_before", "n_after", "tested"):
        assert after[column].to_list() == before[column].to_list()
    metrics = json.loads(study.scalar("SELECT metrics FROM runs WHERE stage = 'deltas' ORDER BY finished_at DESC"))
    assert metrics["n_rollouts_dropped_unshared_task"] == 3


def test_rerun_is_skipped_and_a_new_config_replaces_rows(study):
    first = _run(study)
    assert _run(study) == 0
    assert _run(study, AnalyzeConfig(before="before", after="after", permutations=199)) == first
    assert study.scalar("SELECT count(*) FROM feature_deltas") == first


def test_kind_present_in_one_checkpoint_is_skipped(store):
    build_study(store, np.random.default_rng(1), n_tasks=12, n_features=4)
    store.execute(
        "UPDATE segments SET kind = 'reasoning' WHERE kind = 'tool_call' AND rollout_key IN "
        "(SELECT rollout_key FROM rollouts WHERE checkpoint = 'after')"
    )
    _run(store)
    reasons = store.frame("SELECT DISTINCT skip_reason FROM feature_deltas WHERE kind IN ('reasoning', 'tool_call')")
    assert reasons["skip_reason"].to_list() == [deltas.SKIP_NO_SEGMENTS]
    assert store.scalar("SELECT count(*) FROM feature_deltas WHERE kind = 'text' AND tested") > 0


def test_ranked_deltas_orders_by_q_then_size(study):
    _run(study)
    table = deltas.ranked_deltas(study, top=10)
    assert table.height == 10 and set(table["feature_id"][:4]) <= {0, 1}
    q = table["q_value"].to_numpy()
    assert (np.diff(q) >= 0).all()
    tied = table.filter(pl.col("q_value") == q[0])["delta"].abs().to_numpy()
    assert (np.diff(tied) <= 0).all()
    only = deltas.ranked_deltas(study, kind="tool_call", top=3)
    assert set(only["kind"]) == {"tool_call"} and {"label", "prevalence_before", "q_value"} <= set(only.columns)


# -- the sample pairs, with simple deterministic features (the full feature stage is too slow for unit tests) --

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
WORDS = ("sorry", "transfer", "human", "confirm", "cheapest", "policy", "refund", "baggage")


def _word_and_tool_features(store) -> None:
    """One feature per tool name (fires on its calls) and per word in WORDS (fires on segments containing it)."""
    tools = store.frame("SELECT DISTINCT tool_name FROM segments WHERE tool_name IS NOT NULL ORDER BY 1")["tool_name"]
    names = [f"tool:{t}" for t in tools] + [f"word:{w}" for w in WORDS]
    store.append("features", pl.DataFrame({"feature_id": range(len(names)), "source": "structural", "name": names,
                                           "label": names, "threshold": 0.5}))  # fmt: skip
    for i, tool in enumerate(tools):
        store.execute(f"INSERT INTO segment_features SELECT segment_id, {i}, 1.0 FROM segments WHERE tool_name = ?",
                      [tool])  # fmt: skip
    for i, word in enumerate(WORDS, start=len(tools)):
        store.execute(f"INSERT INTO segment_features SELECT segment_id, {i}, 1.0 FROM segments "
                      "WHERE kind != 'tool_call' AND text ILIKE ?", [f"%{word}%"])  # fmt: skip


def _analyse_sample(store, before: str, after: str) -> pl.DataFrame:
    config = AnalyzeConfig(before=before, after=after)
    split.run(store, config, np.random.default_rng([0, 0]), NullProgress())
    _word_and_tool_features(store)
    deltas.run(store, config, np.random.default_rng([0, 2]), NullProgress())
    return store.frame("SELECT f.name, d.* FROM feature_deltas d JOIN features f USING (feature_id)")


def test_tau2_hand_off_is_a_significant_decrease(tau2_store):
    rows = _analyse_sample(tau2_store, "standard", "tighter")
    transfer = rows.filter(pl.col("name") == "tool:transfer_to_human_agents")
    row = transfer.filter(pl.col("kind") == "any").row(0, named=True)
    assert row["q_value"] < 0.05 and row["delta"] < 0 and row["ci_high"] < 0, row
    # Among calls to the same tool, a tool-identity feature is always 1: nothing to test, whatever the mix.
    calls = transfer.filter(pl.col("kind") == "tool_call").row(0, named=True)
    assert calls["skip_reason"] == deltas.SKIP_UNATTAINABLE and calls["pooled_after"] == 1.0
    assert tau2_store.scalar("SELECT value FROM meta WHERE key = 'split_mode'") == "rollout"  # 4 tasks


def test_gpt4o_same_model_pair_has_no_significant_delta(store):
    for name in ("trials01", "trials23"):
        ingest_file(store, SAMPLE / "tau-bench-gpt4o" / f"{name}.jsonl.gz", name)
    rows = _analyse_sample(store, "trials01", "trials23")
    tested = rows.filter(pl.col("tested"))
    assert tested.height >= 20
    # An A/A pair: at 5% FDR per family a false finding can occur (here one, q = 0.044 in the structural
    # family of 8 text tests); none is strong.
    assert tested.filter(pl.col("q_value") < 0.05).height <= 1
    assert tested.filter(pl.col("q_value") < 0.01).height == 0


@pytest.mark.parametrize("change", ["no split drawn", "no shared task"])
def test_nothing_to_compare_is_a_clear_input_error(store, change):
    build_study(
        store,
        np.random.default_rng(0),
        n_tasks=4,
        n_features=3,
        split=None if change == "no split drawn" else DISCOVERY,
    )
    if change == "no shared task":
        store.execute("UPDATE rollouts SET task_id = task_id || '-after' WHERE checkpoint = 'after'")
    with pytest.raises(InputError, match="no task has discovery rollouts of both"):
        _run(store)
    assert store.scalar("SELECT status FROM runs WHERE stage = 'deltas'") == "failed"


def test_small_study_ranks_the_hand_off_first_exploratively(tau2_store):
    """4 tasks x 4 rollouts a side (the tau2 pair cut down): too few to split by task, so the whole study is
    ranked, marked exploratory; the transfer change (most rollouts -> few) comes first."""
    tau2_store.execute(
        "DELETE FROM rollouts WHERE rollout_key IN (SELECT rollout_key FROM (SELECT rollout_key, row_number() "
        "OVER (PARTITION BY task_id, checkpoint ORDER BY rollout_key) AS n FROM rollouts) WHERE n > 4)"
    )
    tau2_store.execute("DELETE FROM segments WHERE rollout_key NOT IN (SELECT rollout_key FROM rollouts)")
    _analyse_sample(tau2_store, "standard", "tighter")
    metrics = json.loads(tau2_store.scalar("SELECT metrics FROM runs WHERE stage = 'deltas'"))
    assert metrics["split_mode"] == "rollout" and metrics["few_tasks"]
    top = metrics["exploratory"]
    assert {row["status"] for row in top} == {"exploratory"}
    first = top[0]
    assert first["name"] in ("tool:transfer_to_human_agents", "word:transfer") and first["delta"] < 0, top[:3]
