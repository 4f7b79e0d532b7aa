"""The estimand every prevalence statistic shares: each rollout's own rate, compared within task.

A rollout's rate is y_r = c_r / t_r (firing segments of a kind over its segments of that kind). The checkpoint
effect is the coefficient of the after-label in a least-squares fit of y on task indicators, i.e. the stratified
(Mantel-Haenszel-type) delta

    delta = sum_g w_g (mean_after_g(y) - mean_before_g(y)) / sum_g w_g,   w_g = n_after_g n_before_g / n_g,

whose task weights depend on the design only, never on which checkpoint a rollout came from: a length
change cannot move it (rates, not pooled shares), and neither can task mix (the contrast is within task).
Every quantity below is linear in y, so all features go through one matrix product at a time:
statistic = x @ y with x the label minus its task mean; its within-task permutations give the null, and the
same residuals give cluster-robust standard errors. (Rollout-level rows enter as observed minus expected
firing, `engine.deltas.views.expected_firing`: still one value per rollout.)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TypeAlias

import numpy as np
import scipy.sparse as sp

from engine.stats.design import CheckpointDesign, as_float32, task_onehot

Matrix: TypeAlias = np.ndarray | sp.sparray | sp.spmatrix


def rollout_rates(counts: Matrix, totals: np.ndarray, design: CheckpointDesign) -> Matrix:
    """(n_rollouts, n_features) rates c / t over the design's rollouts; sparse stays sparse (1-d totals).

    1-d totals must be positive (the caller's design holds only rollouts with segments of the kind). With
    2-d totals (a denominator per feature), a rollout without segments for a feature gets that feature's
    task mean over the rollouts that have some (the mean over all tasks if none do): computed without the
    labels, so permuting
    labels stays exact, and such a rollout adds nothing to the within-task contrast.
    """
    totals = np.asarray(totals, dtype=np.float64)
    if totals.ndim == 1:
        if (totals <= 0).any():
            raise ValueError("1-d totals must be positive: leave rollouts without segments out of the design")
        inverse = sp.diags_array(1.0 / totals)
        if sp.issparse(counts):
            return sp.csc_array(inverse @ sp.csc_array(counts, dtype=np.float64))
        return np.asarray(counts, dtype=np.float64) / totals[:, None]
    dense = np.asarray(counts, dtype=np.float64) if isinstance(counts, np.ndarray) else counts.toarray()
    has = totals > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = np.where(has, dense / np.where(has, totals, 1.0), 0.0)
    onehot = task_onehot(design.task, design.n_tasks)
    n_has = onehot @ has.astype(np.float64)
    overall = rates.sum(axis=0) / np.maximum(has.sum(axis=0), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        fill = np.where(n_has > 0, (onehot @ rates) / np.maximum(n_has, 1), overall)
    return np.where(has, rates, fill[design.task])


@dataclass(frozen=True)
class Contrast:
    """The after-label minus its task mean: the contrast vector x of every within-task statistic x @ y."""

    design: CheckpointDesign

    @cached_property
    def x(self) -> np.ndarray:
        """(n_rollouts,) the label minus its task mean."""
        label = self.design.is_after.astype(np.float64)
        return label - self.design.task_means(label)

    @cached_property
    def xx(self) -> float:
        return float(self.x @ self.x)

    def statistic(self, x_rows: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(n_rows, n_features) x_rows @ y for rows of (permuted) contrast vectors, float64.

        Each row sums to zero within every task, so task means drop out.
        """
        return (as_float32(x_rows) @ as_float32(y)).astype(np.float64)

    def observed(self, y: np.ndarray) -> np.ndarray:
        """(n_features,) the observed statistic x @ y, in float64 throughout."""
        return self.x @ y

    def null_residuals(self, y: np.ndarray) -> np.ndarray:
        """(n_rollouts, n_features) residuals of the reduced model (task means, no label)."""
        return y - self.design.task_means(y)


@dataclass(frozen=True)
class Effects:
    """Per feature: the checkpoint effect on rates, its standard error and degrees of freedom."""

    estimate: np.ndarray
    se: np.ndarray
    df: float
    unit: str  # 'task' (cluster-robust over tasks) or 'rollout' (heteroscedasticity-robust, these tasks)


def effects(contrast: Contrast, y: np.ndarray, *, by_task: bool, scale: np.ndarray | None = None) -> Effects:
    """The effect x'y / x'x of dense rates y (n_rollouts, n_features) with a robust standard error, both times
    `scale` where given (per feature: `TaskLevels.effect_scale`, the levels' scale).

    by_task: cluster-robust over tasks with the G/(G-1) factor and G-1 degrees of freedom (speaks for new
    tasks like these). Otherwise heteroscedasticity-robust over rollouts, scaled by n/(n-p) with n-p degrees
    of freedom, p = tasks + 1 (speaks for these tasks). A zero standard error is returned as
    NaN: an interval of zero width is never a statement the data support.
    """
    design, x = contrast.design, contrast.x
    resid0 = contrast.null_residuals(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = (x @ resid0) / contrast.xx
    resid = resid0 - np.outer(x, beta)
    n, g = design.n_rollouts, design.n_tasks
    if by_task:
        scores = task_onehot(design.task, g) @ (x[:, None] * resid)
        variance = (scores**2).sum(axis=0) * g / max(g - 1, 1)
        df = float(g - 1)
    else:
        p = g + 1
        variance = ((x**2) @ (resid**2)) * n / max(n - p, 1)
        df = float(n - p)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(variance) / contrast.xx
    se[~(se > 1e-12)] = np.nan
    if df < 1:
        se[:] = np.nan
    if scale is not None:
        beta, se = beta * scale, se * scale
    return Effects(beta, se, df, "task" if by_task else "rollout")


@dataclass(frozen=True)
class TaskLevels:
    """Per task and feature: each checkpoint's mean rate and the task's weight in the within-task contrast.

    The weights make sum_g weight_g (after_g - before_g) = x @ y, the tested statistic, so the difference of
    the `standardised` levels is x @ y over the total weight: `effects` with `effect_scale`. A task with no
    contrast for a feature (weight 0) has NaN levels."""

    before: np.ndarray  # (n_tasks, n_features)
    after: np.ndarray
    weight: np.ndarray

    def contributions(self) -> np.ndarray:
        """(n_tasks, n_features) each task's weighted difference, weight (after - before); 0 without contrast."""
        with np.errstate(invalid="ignore"):
            return np.where(self.weight > 0, self.weight * (self.after - self.before), 0.0)

    def effect_scale(self, xx: float) -> np.ndarray:
        """(n_features,) x'x over the total weight: turns `effects`' x'y / x'x (and its standard error, the
        spread of x'y over x'x) into the levels' difference; 1 where every rollout is a cell, NaN where none is."""
        total = self.weight.sum(axis=0)
        return np.divide(xx, total, out=np.full(total.shape, np.nan), where=total > 0)

    def standardised(self) -> tuple[np.ndarray, np.ndarray]:
        """(before, after): the weighted means over tasks, NaN for a feature no task contrasts."""
        total = self.weight.sum(axis=0)
        out = []
        for level in (self.before, self.after):
            with np.errstate(divide="ignore", invalid="ignore"):
                out.append(np.where(self.weight > 0, self.weight * level, 0.0).sum(axis=0) / total)
        return out[0], out[1]


def contrast_weights(n_before: np.ndarray, n_after: np.ndarray) -> np.ndarray:
    """w = n_after n_before / n of each cell (elementwise; 0 where a side is empty): its weight in x'x."""
    n_all = n_before + n_after
    return np.divide(n_after * n_before, n_all, out=np.zeros_like(n_all, dtype=np.float64), where=n_all > 0)


def side_means(task: np.ndarray, n_tasks: int, y: Matrix) -> tuple[np.ndarray, np.ndarray]:
    """((n_tasks, n_features) per-task mean of y's rows, (n_tasks,) their number); `task` codes y's rows."""
    sums = task_onehot(task, n_tasks) @ y
    sums = sums.toarray() if sp.issparse(sums) else np.asarray(sums, dtype=np.float64)
    sizes = np.bincount(task, minlength=n_tasks).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return sums / sizes[:, None], sizes


def task_levels(design: CheckpointDesign, y: Matrix) -> TaskLevels:
    """Each task's mean rate per checkpoint, weighted w_g = n_after_g n_before_g / n_g (the contrast's)."""
    before, n_before = side_means(design.task[~design.is_after], design.n_tasks, y[~design.is_after])
    after, n_after = side_means(design.task[design.is_after], design.n_tasks, y[design.is_after])
    weight = np.broadcast_to(contrast_weights(n_before, n_after)[:, None], before.shape)
    return TaskLevels(before, after, weight)


def standardised_prevalence(design: CheckpointDesign, y: Matrix) -> tuple[np.ndarray, np.ndarray]:
    """(before, after): the task-weighted mean rate of each checkpoint, with the contrast's weights w_g.

    after - before equals the unadjusted effect; both are averages over the same task mix.
    """
    return task_levels(design, y).standardised()
