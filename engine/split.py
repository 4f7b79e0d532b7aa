"""The split stage: discovery and held-out rollouts, so hypotheses are validated on data they were not drawn from.

Units are tasks (environments when tasks share environments and there are enough of them), so no unit feeds
both discovery and validation. When either side would get fewer than MIN_TASKS (10) tasks shared by both
checkpoints (fewer than 20 at the default 50% holdout), rollouts are split within each task and checkpoint
instead, and findings then generalise only to these tasks: the stage says so in its run metrics and in `meta`
('split_mode', 'split_warning'). Deterministic from the stage's rng, which the pipeline derives from `--seed`.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import numpy as np
import polars as pl

from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.kinds import DISCOVERY, HELDOUT
from engine.progress import Progress
from engine.runs import is_done, record_run
from engine.stats.design import MIN_TASKS
from engine.store import Store
from engine.store.queries.study import set_split_mode
from engine.strata import EXCLUDED, check_where

log = logging.getLogger(__name__)

STAGE = "split"
MODES = ("task", "environment", "rollout", "none")


@dataclass(frozen=True)
class SplitPlan:
    """Each rollout's split, how it was drawn, and what the user should know about it."""

    rollout_key: np.ndarray
    split: np.ndarray  # DISCOVERY | HELDOUT (engine.kinds.Split)
    mode: str  # one of MODES; 'none' when nothing is held out
    n_units: int
    n_shared_tasks: int
    warning: str | None


def _shared_tasks(rollouts: pl.DataFrame, before: str, after: str) -> set[str]:
    seen = (
        rollouts.filter(pl.col("checkpoint").is_in([before, after]))
        .group_by("task_id")
        .agg(pl.col("checkpoint").n_unique().alias("n"))
    )
    return set(seen.filter(pl.col("n") == 2)["task_id"].to_list())


def _unit_column(rollouts: pl.DataFrame, shared: set[str], holdout: float) -> tuple[str, str | None]:
    """'environment' when environments group tasks and are numerous enough to split on, else 'task'."""
    env = rollouts.select("task_id", "environment_id").unique()
    if env["environment_id"].null_count() or env["task_id"].n_unique() < env.height:
        return "task", None  # missing environments, or a task spans several: tasks are the units
    n_envs = env.filter(pl.col("task_id").is_in(list(shared)))["environment_id"].n_unique()
    if n_envs == env.height:
        return "task", None  # one task per environment: the same split either way
    if _splits_by_unit(n_envs, holdout):
        return "environment", None
    return "task", (
        f"tasks share {n_envs} environments, too few to split on; split by task, so held-out tasks may "
        "share an environment with discovery tasks"
    )


def _heldout_count(n: int, holdout: float) -> int:
    """Held-out units out of n: the nearest count to holdout * n, halves going to discovery (where findings
    are made), leaving each side one unit when n >= 2; a lone unit stays in discovery."""
    if n < 2:
        return 0
    k = int(np.ceil(holdout * n - 0.5))
    if 0 < holdout < 1:
        k = min(max(k, 1), n - 1)
    return k


def _splits_by_unit(n_shared: int, holdout: float) -> bool:
    """Whether n_shared units give both sides at least MIN_TASKS of them."""
    heldout = _heldout_count(n_shared, holdout)
    return heldout >= MIN_TASKS and n_shared - heldout >= MIN_TASKS


def plan_split(rollouts: pl.DataFrame, before: str, after: str, holdout: float, rng: np.random.Generator) -> SplitPlan:
    """Draw the split for `rollouts` (rollout_key, checkpoint, task_id, environment_id).

    Unit mode: units (tasks or environments) are shuffled and the first share held out, separately among
    units both checkpoints share and the rest, so held-out gets its share of comparable units. Rollout mode
    (too few shared tasks for MIN_TASKS a side): each (task, checkpoint) cell's rollouts are shuffled and split.
    """
    if not 0 <= holdout < 1:
        raise ValueError(f"holdout {holdout} must be in [0, 1)")
    rollouts = rollouts.sort("rollout_key")
    keys = rollouts["rollout_key"].to_numpy()
    split = np.full(keys.size, DISCOVERY, dtype=object)
    shared = _shared_tasks(rollouts, before, after)
    if holdout == 0:
        warning: str | None = "holdout is 0: nothing is held out, so hypotheses cannot be validated"
        log.warning(warning)
        return SplitPlan(keys, split, "none", 0, len(shared), warning)
    if not _splits_by_unit(len(shared), holdout):
        cells = rollouts.with_row_index("row").group_by("task_id", "checkpoint", maintain_order=True).agg("row")
        for rows in cells.sort("task_id", "checkpoint")["row"].to_list():
            order = rng.permutation(np.asarray(rows))
            split[order[: _heldout_count(order.size, holdout)]] = HELDOUT
        warning = (
            f"only {len(shared)} tasks are shared by both checkpoints, too few for {MIN_TASKS} on each side of "
            "the split: rollouts are split within each task, so findings generalise only to these tasks, "
            "not to new ones"
        )
        log.warning(warning)
        return SplitPlan(keys, split, "rollout", len(shared), len(shared), warning)
    mode, warning = _unit_column(rollouts, shared, holdout)
    unit_col = "task_id" if mode == "task" else "environment_id"
    units = rollouts[unit_col].to_numpy()
    shared_units = set(rollouts.filter(pl.col("task_id").is_in(list(shared)))[unit_col].to_list())
    all_units = sorted(set(units.tolist()))
    heldout: set[str] = set()
    for group in ([u for u in all_units if u in shared_units], [u for u in all_units if u not in shared_units]):
        order = rng.permutation(np.asarray(group, dtype=object))
        heldout.update(order[: _heldout_count(len(group), holdout)])
    split[np.isin(units, list(heldout))] = HELDOUT
    if warning:
        log.warning(warning)
    return SplitPlan(keys, split, mode, len(all_units), len(shared), warning)


def _rollouts_fingerprint(rollouts: pl.DataFrame) -> str:
    rows = rollouts.sort("rollout_key").select("rollout_key", "checkpoint", "task_id", "environment_id")
    return hashlib.sha256(rows.write_csv().encode()).hexdigest()[:16]


def run(store: Store, config: AnalyzeConfig, rng: np.random.Generator, progress: Progress) -> int:
    """Draw and store the split (rollouts.split); returns the number of rollouts assigned."""
    rollouts = store.frame("SELECT rollout_key, checkpoint, task_id, environment_id FROM rollouts")
    stage_config = {"before": config.before, "after": config.after, "holdout": config.holdout, "seed": config.seed}
    excluded = np.array([], dtype=np.int64)
    if config.where is not None:  # recorded in the run's config; the rollouts it leaves out are 'excluded'
        stage_config["where"] = where = check_where(store, config.where)
        kept = store.frame(f"SELECT rollout_key FROM rollouts WHERE ({where})")["rollout_key"]
        excluded = rollouts.filter(~pl.col("rollout_key").is_in(kept))["rollout_key"].to_numpy()
        rollouts = rollouts.filter(pl.col("rollout_key").is_in(kept))
        for name in (config.before, config.after):
            if rollouts.filter(pl.col("checkpoint") == name).height == 0:
                raise InputError(f"--where {where}: no rollouts of checkpoint {name!r} are left")
    input_hash = _rollouts_fingerprint(rollouts) + f"-{excluded.size}"
    if is_done(store, STAGE, stage_config, input_hash):
        log.info("split: unchanged, skipped")
        return 0
    with record_run(store, STAGE, stage_config, input_hash, config.seed) as record:
        with progress.track("split", 1) as advance:
            plan = plan_split(rollouts, *config.checkpoints, config.holdout, rng)
            frame = pl.DataFrame(
                {
                    "rollout_key": np.concatenate([plan.rollout_key, excluded]),
                    "split": np.concatenate([plan.split.astype(str), np.full(excluded.size, EXCLUDED)]),
                }
            )
            with store.transaction():
                store.set_rollout_column("split", frame)
                set_split_mode(store, plan.mode, plan.warning)
            advance(1)
        counts = frame.group_by("split").len()
        record.metrics.update(
            split_mode=plan.mode,
            split_warning=plan.warning,
            n_units=plan.n_units,
            n_shared_tasks=plan.n_shared_tasks,
            **{f"n_{row['split']}": row["len"] for row in counts.iter_rows(named=True)},
        )
    return int(plan.rollout_key.size)
