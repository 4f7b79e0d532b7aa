"""The prevalence test shared by deltas, clusters and hypothesis validation: rollout rates, within task."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from engine.stats.attainable import attainable_pvalue
from engine.stats.design import CheckpointDesign
from engine.stats.intervals import CONFIDENCE, effect_interval
from engine.stats.permutation import PermutationBlock, refined_pvalues
from engine.stats.rates import Effects, TaskLevels, effects, task_levels
from engine.stats.signflip import signflip_floor, signflip_pvalues
from engine.stats.strata import feature_strata, stratified_levels

log = logging.getLogger(__name__)

CONTRIBUTION_TOLERANCE = 1e-12  # a task's contribution (a weighted difference of rates) below this is none


@dataclass(frozen=True)
class PrevalenceTest:
    """Per feature: task-weighted mean rollout rate per checkpoint, delta (after - before), its CI, p-value,
    the smallest p-value the test can give it whatever the checkpoint labels (`floor`: 2 / 2^k over the k
    tasks whose contribution is not 0 for the sign-flip, any labelling of its rates within task for the
    permutation test; the test conditions on both), the pooled shares sum(c)/sum(t), and what the test
    speaks for ('these tasks' for the within-task test, 'new tasks' for the sign-flip over tasks); and the
    per-task levels the delta is the weighted mean of, with the task of each."""

    prevalence_before: np.ndarray  # (n_features,)
    prevalence_after: np.ndarray
    delta: np.ndarray  # after - before
    ci_low: np.ndarray
    ci_high: np.ndarray
    p_value: np.ndarray
    floor: np.ndarray
    pooled_before: np.ndarray
    pooled_after: np.ndarray
    scope: str
    levels: TaskLevels | None = None  # per task (rows) and feature: the levels and weights the delta averages
    tasks: np.ndarray | None = None  # (n_tasks,) the task of each of `levels`' rows, as the caller coded it


def pooled_shares(counts: np.ndarray, totals: np.ndarray, is_after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(before, after): sum(counts) / sum(totals) over each checkpoint's rollouts (weights long rollouts more)."""
    out = []
    t2 = totals if totals.ndim == 2 else totals[:, None]
    for side in (~is_after, is_after):
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append(counts[side].sum(axis=0) / t2[side].sum(axis=0))
    return out[0], out[1]


@dataclass(frozen=True)
class RateEffect:
    """`test_prevalence`'s estimand without its test: the rates' permutation block, the checkpoints' levels
    (task-weighted mean rollout rates) and the effect after - before with its robust standard error and degrees
    of freedom."""

    block: PermutationBlock
    levels: TaskLevels
    effect: Effects


def _design(
    counts: np.ndarray, totals: np.ndarray, is_after: np.ndarray, task: np.ndarray
) -> tuple[CheckpointDesign, np.ndarray, np.ndarray, np.ndarray]:
    """The design of the rollouts with segments in tasks both checkpoints share, their counts and totals, and
    the caller's task of each of the design's task codes."""
    counts = np.asarray(counts, dtype=np.float64)
    totals = np.asarray(totals, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[0] != np.shape(is_after)[0]:
        raise ValueError(f"counts {counts.shape}: want (rollouts, features); is_after {np.shape(is_after)}")
    is_after = np.asarray(is_after, dtype=bool)
    has = totals > 0 if totals.ndim == 1 else (totals > 0).any(axis=1)
    design = CheckpointDesign.from_labels(is_after[has], np.asarray(task)[has])
    if design.n_rollouts < has.sum():
        log.info("%d rollouts of tasks seen by one checkpoint only left out", int(has.sum()) - design.n_rollouts)
    kept = np.asarray(task)[has][design.keep]
    tasks = np.empty(design.n_tasks, dtype=kept.dtype)
    tasks[design.task] = kept
    return design, counts[has][design.keep], totals[has][design.keep], tasks


def _rate_effect(design: CheckpointDesign, counts: np.ndarray, totals: np.ndarray) -> RateEffect:
    block = PermutationBlock(counts, totals, design)
    y = np.asarray(block.rates)
    # with 2-d totals a rollout without segments for a feature is not one of its cells
    levels = stratified_levels(*feature_strata(counts, totals), design) if totals.ndim == 2 else task_levels(design, y)
    scale = levels.effect_scale(block.contrast.xx)
    return RateEffect(block, levels, effects(block.contrast, y, by_task=not design.few_tasks, scale=scale))


def rate_effect(counts: np.ndarray, totals: np.ndarray, is_after: np.ndarray, task: np.ndarray) -> RateEffect | None:
    """The levels and effect `test_prevalence` reports, for the same arguments, without testing; None when no
    task is shared."""
    design, counts, totals, _ = _design(counts, totals, is_after, task)
    return _rate_effect(design, counts, totals) if design.n_tasks else None


def test_prevalence(
    counts: np.ndarray,
    totals: np.ndarray,
    is_after: np.ndarray,
    task: np.ndarray,
    rng: np.random.Generator,
    n_permutations: int = 2000,
    confidence: float = CONFIDENCE,
    *,
    new_tasks: bool = False,
    fdr: float = 0.05,
    max_permutations: int | None = None,
) -> PrevalenceTest:
    """Compare feature prevalence between two checkpoints, respecting tasks and rollouts.

    counts: (n_rollouts, n_features) weighted count of positive segments per rollout; totals: (n_rollouts,)
    or (n_rollouts, n_features) weighted segment counts; is_after: (n_rollouts,) bool; task: (n_rollouts,)
    codes. The unit is each rollout's rate c/t (engine.stats.rates); rollouts with no segments (1-d totals)
    and tasks seen by one checkpoint leave the design. p: within-task permutation test ("these tasks"), or
    with `new_tasks` the sign-flip test over tasks ("new tasks"); p-values at the Monte Carlo floor are refined
    sequentially up to `max_permutations` (sign patterns: that many at once). CI: cluster-robust t over tasks
    from MIN_TASKS tasks, heteroscedasticity-robust within task below. With 2-d totals the levels, delta and CI
    are over each feature's rollouts with segments for it (`feature_strata`). All NaN when no task is shared.
    """
    design, counts, totals, tasks = _design(counts, totals, is_after, task)
    pooled_b, pooled_a = pooled_shares(counts, totals, design.is_after)
    nan = np.full(counts.shape[1], np.nan)
    if design.n_tasks == 0:
        return PrevalenceTest(nan, nan, nan, nan, nan, nan, nan, pooled_b, pooled_a, "none")
    fit = _rate_effect(design, counts, totals)
    effect, levels = fit.effect, fit.levels
    before, after = levels.standardised()
    low, high = effect_interval(effect.estimate, effect.se, effect.df, confidence)
    if new_tasks:
        contributions = levels.contributions()
        p = signflip_pvalues(contributions, rng, max_permutations or n_permutations)[0]
        # a task with no contribution (no rollout of one checkpoint with segments of the kind, or equal rates)
        # flips nothing: the floor is over the others, which the test conditions on (|contribution|)
        moving = (np.abs(contributions) > CONTRIBUTION_TOLERANCE).sum(axis=0)
        floor = np.array([signflip_floor(int(k)) for k in moving])
        scope = "new tasks"
    else:
        budget = max_permutations or n_permutations
        p = refined_pvalues([fit.block], rng, n_permutations, fdr=fdr, max_permutations=budget)[0].p_value
        floor = np.maximum(attainable_pvalue(np.asarray(fit.block.rates), design), 1 / (budget + 1))
        scope = "these tasks"
    return PrevalenceTest(before, after, after - before, low, high, p, floor, pooled_b, pooled_a, scope, levels, tasks)


# Not a pytest test despite the name: keep collection from picking it up where it is imported.
test_prevalence.__test__ = False  # type: ignore[attr-defined]
