"""Rollout rates stratified over strata within a kind (tool calls: one stratum per tool), so a change in the
strata mix (a new tool) cannot move a feature's rate on the others.

    y_r = sum_s w_s * (c_rs / t_rs),   w_s = (segments of stratum s, all rollouts) / same summed over S_f

over the strata S_f a feature occurs in (its support). The weights are pooled over both checkpoints, so they are
the same under every relabelling and the permutation test stays exact. A rollout without segments of s gets the
feature's task mean rate on s (`rollout_rates`' label-free imputation): it adds nothing to s's within-task
contrast, and a stratum only one checkpoint has in a task contributes no contrast there.

So the tested statistic x @ y is a sum over (task, stratum) cells of w_s W_gs (after - before), the cell's mean
rates over its rollouts with segments of s and W_gs = a_gs b_gs / (a_gs + b_gs) their contrast weight
(`stratified_levels`): the effect and the levels shown are that sum's weighted means (`rates.effects` with
`TaskLevels.effect_scale`), not x @ y / x'x, which would count every rollout without segments of s (and every
task without s) as a cell of no change. Its interval is the robust spread of x @ y over the same weight. Scores
centred per (task, stratum) cell were tried: with few rollouts a cell their residuals shrink, and 95% intervals
covered 90% at 4 tasks x 4+4 with a rollout calling a tool with probability 0.3, against 95% for these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np

from engine.stats.design import CheckpointDesign
from engine.stats.rates import Matrix, TaskLevels, contrast_weights, rollout_rates, side_means

# The estimators' arguments: per stratum, firing counts (n_rollouts, n_features); (n_rollouts, n_strata) segments
# of each stratum; (n_strata, n_features) 1 where a feature occurs on a stratum.
Strata: TypeAlias = tuple[Sequence[Matrix], np.ndarray, np.ndarray]


def stratum_weights(totals: np.ndarray, support: np.ndarray) -> np.ndarray:
    """(n_strata, n_features) each stratum's weight per feature: pooled segments of the stratum among the
    feature's support (1 where it occurs), summing to 1 per feature (0 for a feature with no support)."""
    weight = np.asarray(support, dtype=np.float64) * np.asarray(totals, dtype=np.float64).sum(axis=0)[:, None]
    total = weight.sum(axis=0)
    return np.divide(weight, total, out=np.zeros_like(weight), where=total > 0)


def stratified_rates(
    counts: Sequence[Matrix], totals: np.ndarray, support: np.ndarray, design: CheckpointDesign
) -> np.ndarray:
    """(n_rollouts, n_features) rates stratified over strata, with `stratum_weights`.

    counts[s]: (n_rollouts, n_features) firing segments of stratum s; totals: (n_rollouts, n_strata) segments
    of each stratum; support: (n_strata, n_features); rows are the design's rollouts.
    """
    weight = stratum_weights(totals, support)
    n_rollouts = totals.shape[0]
    out = np.zeros((n_rollouts, weight.shape[1]))
    for s, stratum_counts in enumerate(counts):
        columns = np.flatnonzero(weight[s] > 0)
        if columns.size == 0:
            continue
        stratum_totals = np.broadcast_to(totals[:, s : s + 1], (n_rollouts, columns.size))
        out[:, columns] += weight[s, columns] * rollout_rates(stratum_counts[:, columns], stratum_totals, design)
    return out


def stratified_levels(
    counts: Sequence[Matrix], totals: np.ndarray, support: np.ndarray, design: CheckpointDesign
) -> TaskLevels:
    """Per task, each checkpoint's rate as `stratified_rates` contrasts it: the mean rate among its rollouts
    with segments of each stratum, averaged over strata with weight w_s W_gs (`stratum_weights` times the
    cell's contrast weight), NaN where no stratum of the feature has rollouts of both checkpoints in the task.
    Arguments as `stratified_rates`'; sum_g weight (after - before) equals x @ stratified_rates(...)."""
    weight = stratum_weights(totals, support)
    shape = (design.n_tasks, weight.shape[1])
    before, after, total = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for s, stratum_counts in enumerate(counts):
        columns = np.flatnonzero(weight[s] > 0)
        has = totals[:, s] > 0
        if columns.size == 0 or not has.any():
            continue
        rates = rollout_rates(stratum_counts[:, columns][has], totals[has, s], design)
        task, is_after = design.task[has], design.is_after[has]
        mean_b, n_b = side_means(task[~is_after], design.n_tasks, rates[~is_after])
        mean_a, n_a = side_means(task[is_after], design.n_tasks, rates[is_after])
        cell = contrast_weights(n_b, n_a)[:, None] * weight[s, columns][None, :]
        total[:, columns] += cell
        before[:, columns] += np.where(cell > 0, cell * mean_b, 0.0)
        after[:, columns] += np.where(cell > 0, cell * mean_a, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return TaskLevels(before / total, after / total, total)


def feature_strata(counts: Matrix, totals: np.ndarray) -> Strata:
    """Counts with a denominator per feature ((n_rollouts, n_features) each) as one stratum per feature, for
    the estimators above: a rollout without segments for a feature is then not one of its cells (where
    `rollout_rates` imputes it, the contrast is the same and x'y / x'x would count it as a rollout of no
    change)."""
    n_features = np.shape(counts)[1]
    return [counts] * n_features, totals, np.eye(n_features)
