"""The prevalence test shared by deltas, clusters and hypothesis validation."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from engine.stats.bootstrap import bootstrap_ci
from engine.stats.design import CheckpointDesign, as_float32
from engine.stats.permutation import PermutationBlock, permutation_pvalues

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrevalenceTest:
    """Per feature: prevalence in each checkpoint, delta (after - before), its CI and permutation p-value."""

    prevalence_before: np.ndarray  # (n_features,)
    prevalence_after: np.ndarray
    delta: np.ndarray  # after - before
    ci_low: np.ndarray
    ci_high: np.ndarray
    p_value: np.ndarray


def checkpoint_prevalence(
    counts: np.ndarray, totals: np.ndarray, is_after: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(prevalence_before, prevalence_after): sum(counts) / sum(totals) over each checkpoint's rollouts."""
    labels = as_float32(np.stack([~np.asarray(is_after, dtype=bool), is_after]))
    sums = (labels @ as_float32(counts)).astype(np.float64)
    tots = (labels @ as_float32(totals)).astype(np.float64)
    if tots.ndim == 1:
        tots = tots[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        prevalence = sums / tots
    return prevalence[0], prevalence[1]


def test_prevalence(
    counts: np.ndarray,
    totals: np.ndarray,
    is_after: np.ndarray,
    task: np.ndarray,
    rng: np.random.Generator,
    n_permutations: int = 2000,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
) -> PrevalenceTest:
    """Compare feature prevalence between two checkpoints, respecting tasks and rollouts.

    counts: (n_rollouts, n_features) weighted count of positive segments per rollout; totals: (n_rollouts,)
    or (n_rollouts, n_features) weighted segment counts; is_after: (n_rollouts,) bool; task: (n_rollouts,)
    int codes. Prevalence per checkpoint = sum(counts)/sum(totals) over its rollouts (segments stay with
    their rollout). Only tasks with rollouts of both checkpoints count (prevalences included): the others
    carry no within-task contrast. p: two-sided permutation test permuting checkpoint labels among rollouts
    WITHIN each task, (b + 1) / (B + 1), vectorised as one matrix product (permutations x rollouts) @
    (rollouts x features). CI: percentile bootstrap over tasks (rollouts within task and checkpoint when
    fewer than MIN_TASKS tasks are shared). All NaN when no task is shared.
    """
    counts = np.asarray(counts)
    totals = np.asarray(totals)
    if counts.ndim != 2 or counts.shape[0] != np.shape(is_after)[0]:
        raise ValueError(f"counts {counts.shape}: want (rollouts, features); is_after {np.shape(is_after)}")
    design = CheckpointDesign.from_labels(is_after, task)
    if design.n_rollouts < np.size(is_after):
        log.info(
            "%d rollouts of tasks seen by one checkpoint only left out of the test",
            np.size(is_after) - design.n_rollouts,
        )
    counts, totals = as_float32(counts[design.keep]), as_float32(totals[design.keep])
    before, after = checkpoint_prevalence(counts, totals, design.is_after)
    if design.n_tasks == 0:
        nan = np.full(counts.shape[1], np.nan)
        return PrevalenceTest(nan, nan.copy(), nan.copy(), nan.copy(), nan.copy(), nan.copy())
    result = permutation_pvalues(PermutationBlock(counts, totals, design), rng, n_permutations)
    ci_low, ci_high = bootstrap_ci(counts, totals, design, rng, n_bootstrap, confidence)
    return PrevalenceTest(before, after, after - before, ci_low, ci_high, result.p_value)


# Not a pytest test despite the name: keep collection from picking it up where it is imported.
test_prevalence.__test__ = False  # type: ignore[attr-defined]
