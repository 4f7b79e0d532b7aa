"""The split stage: by task, by environment, or rollouts within task when tasks are few."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from engine import split
from engine.config import AnalyzeConfig
from engine.kinds import DISCOVERY, HELDOUT, SPLITS
from engine.progress import NullProgress
from engine.strata import EXCLUDED
from tests.factories_stats import build_study

CONFIG = AnalyzeConfig(before="before", after="after", seed=3)
ROOT = Path(__file__).resolve().parent.parent
# A split name a fixed SQL string compares rollouts.split with: `split = 'heldout'`, `IS DISTINCT FROM ...`.
SPLIT_LITERAL = re.compile(r"split\s*(?:=|<>|!=|IS (?:NOT )?DISTINCT FROM)\s*'(\w+)'")


def _splits(store) -> pl.DataFrame:
    return store.frame("SELECT rollout_key, checkpoint, task_id, environment_id, split FROM rollouts ORDER BY 1")


def _meta(store, key):
    return store.scalar("SELECT value FROM meta WHERE key = ?", [key])


def test_many_tasks_split_by_task(store):
    build_study(store, np.random.default_rng(0), n_tasks=30, n_features=2, split=None)
    assert split.run(store, CONFIG, np.random.default_rng(1), NullProgress()) == 180
    rows = _splits(store)
    per_task = rows.group_by("task_id").agg(pl.col("split").n_unique().alias("n"), pl.col("split").first())
    assert (per_task["n"] == 1).all()  # no task feeds both sides
    assert per_task.filter(pl.col("split") == HELDOUT).height == 15
    assert _meta(store, "split_mode") == "task" and _meta(store, "split_warning") is None
    metrics = json.loads(store.scalar("SELECT metrics FROM runs WHERE stage = 'split'"))
    assert metrics["split_mode"] == "task" and metrics["n_heldout"] == 90


def test_split_is_deterministic_from_the_seed_and_skipped_when_unchanged(store, tmp_path):
    build_study(store, np.random.default_rng(0), n_tasks=30, n_features=2, split=None)
    split.run(store, CONFIG, np.random.default_rng(1), NullProgress())
    first = _splits(store)
    assert split.run(store, CONFIG, np.random.default_rng(99), NullProgress()) == 0  # same config: skipped
    plan_same = split.plan_split(first, "before", "after", 0.5, np.random.default_rng(1))
    plan_other = split.plan_split(first, "before", "after", 0.5, np.random.default_rng(2))
    assert (plan_same.split == first["split"].to_numpy()).all()
    assert (plan_other.split != first["split"].to_numpy()).any()
    split.run(store, AnalyzeConfig(before="before", after="after", seed=4), np.random.default_rng(2), NullProgress())
    assert (_splits(store)["split"].to_numpy() == plan_other.split).all()


def test_few_tasks_split_rollouts_within_task_and_warn(store):
    build_study(store, np.random.default_rng(0), n_tasks=4, rollouts_per_checkpoint=5, n_features=2, split=None)
    split.run(store, CONFIG, np.random.default_rng(1), NullProgress())
    cells = (
        _splits(store)
        .group_by("task_id", "checkpoint")
        .agg((pl.col("split") == HELDOUT).sum().alias("heldout"), pl.len().alias("n"))
    )
    assert (cells["heldout"] >= 1).all() and (cells["heldout"] < cells["n"]).all()
    assert (cells["heldout"] == 2).all()  # 2.5 of 5: the odd rollout goes to discovery
    assert _meta(store, "split_mode") == "rollout"
    assert "generalise only to these tasks" in _meta(store, "split_warning")
    metrics = json.loads(store.scalar("SELECT metrics FROM runs WHERE stage = 'split'"))
    assert "generalise only" in metrics["split_warning"]


def test_tasks_sharing_environments_split_by_environment(store):
    build_study(
        store,
        np.random.default_rng(0),
        n_tasks=60,
        rollouts_per_checkpoint=1,
        n_features=2,
        environments=24,
        split=None,
    )
    split.run(store, CONFIG, np.random.default_rng(1), NullProgress())
    rows = _splits(store)
    assert _meta(store, "split_mode") == "environment"
    assert (rows.group_by("environment_id").agg(pl.col("split").n_unique())["split"] == 1).all()
    assert rows.filter(pl.col("split") == HELDOUT)["environment_id"].n_unique() == 12


def test_few_environments_fall_back_to_tasks_with_a_note(store):
    build_study(
        store, np.random.default_rng(0), n_tasks=30, rollouts_per_checkpoint=1, n_features=2, environments=3, split=None
    )
    split.run(store, CONFIG, np.random.default_rng(1), NullProgress())
    assert _meta(store, "split_mode") == "task"
    assert "share 3 environments" in _meta(store, "split_warning")
    assert (_splits(store).group_by("task_id").agg(pl.col("split").n_unique())["split"] == 1).all()


def test_tasks_of_one_checkpoint_do_not_count_as_shared(store):
    build_study(store, np.random.default_rng(0), n_tasks=25, rollouts_per_checkpoint=1, n_features=2, split=None)
    # Move 10 tasks' before rollouts away: 15 shared tasks are too few for 10 on each side.
    store.execute("DELETE FROM rollouts WHERE checkpoint = 'before' AND CAST(substr(task_id, 2) AS INT) < 10")
    plan = split.plan_split(_splits(store), "before", "after", 0.5, np.random.default_rng(0))
    assert plan.mode == "rollout" and plan.n_shared_tasks == 15


def test_holdout_bounds():
    frame = pl.DataFrame(
        {
            "rollout_key": [0, 1],
            "checkpoint": ["before", "after"],
            "task_id": ["t", "t"],
            "environment_id": [None, None],
        },
        schema_overrides={"environment_id": pl.String},
    )
    plan = split.plan_split(frame, "before", "after", 0.0, np.random.default_rng(0))
    assert plan.mode == "none" and (plan.split == DISCOVERY).all()
    with pytest.raises(ValueError):
        split.plan_split(frame, "before", "after", 1.0, np.random.default_rng(0))


def test_split_names_are_the_schemas_and_those_of_the_fixed_sql():
    """kinds.SPLITS (and strata.EXCLUDED) are the values schema.sql gives rollouts.split, and every split name a
    fixed SQL string in engine/ compares with (the store's queries, the MCP sql tool) is one of SPLITS."""
    schema = (ROOT / "engine/store/schema.sql").read_text()
    column = re.search(r"^\s*split\s+VARCHAR,\s*--(.*)$", schema, re.M)
    assert column is not None and re.findall(r"'(\w+)'", column[1]) == [*SPLITS, EXCLUDED]
    compared = {name for path in (ROOT / "engine").rglob("*.py") for name in SPLIT_LITERAL.findall(path.read_text())}
    assert HELDOUT in compared and compared <= set(SPLITS)
    assert SPLIT_LITERAL.findall("WHERE r.split = 'held_out' OR split IS DISTINCT FROM 'heldout'") == [
        "held_out",
        "heldout",
    ]
