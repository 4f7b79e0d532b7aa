"""Power of the within-task permutation test: the smallest effect it would reliably detect.

Used when a held-out hypothesis test is inconclusive: "no significant change" means little unless we say
how large a change the data could have shown. The statistic is x @ e (x the residualised label, e the
reduced model's residual rates, both summing to zero within each task); permuting x within task g draws
without replacement, so its null variance is known in closed form:

    Var(x @ e) = sum_g SSx_g * SSe_g / (n_g - 1),   SSx_g = sum_{r in g} x_r^2,  SSe_g = sum_{r in g} e_r^2,

and the effect x @ e / x'x has standard error sqrt(Var) / x'x. MDE = (z_{1 - alpha/2} + z_{power}) * SE: the
true effect a two-sided level-alpha test detects with probability `power`, under a normal approximation with
the null's spread. The level passed in should be the one the correction applies to a lone finding
(fdr / m under Benjamini-Hochberg with m tests), so the figure is honest for the whole family.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from engine.stats.design import CheckpointDesign, task_onehot
from engine.stats.rates import Contrast, rollout_rates
from engine.stats.strata import feature_strata, stratified_levels


def permutation_se(counts: np.ndarray, totals: np.ndarray, design: CheckpointDesign) -> np.ndarray:
    """(n_features,) standard deviation of the effect on rates under within-task permutation (closed form).

    counts and totals over the design's rollouts, as for `PermutationBlock`; NaN where no task is shared. With
    2-d totals the effect is over each feature's rollouts with segments for it (`engine.stats.strata`): the
    statistic's spread is the same, its weight that of those rollouts.
    """
    if design.n_tasks == 0:
        return np.full(np.shape(counts)[1], np.nan)
    contrast = Contrast(design)
    y = np.asarray(rollout_rates(counts, totals, design), dtype=np.float64)
    resid = contrast.null_residuals(y)
    onehot = task_onehot(design.task, design.n_tasks)
    n_g = np.bincount(design.task, minlength=design.n_tasks).astype(np.float64)
    ssx = onehot @ contrast.x**2
    sse = onehot @ resid**2
    variance = (ssx / np.maximum(n_g - 1, 1)) @ sse
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(np.maximum(variance, 0.0)) / contrast.xx
    if np.ndim(totals) == 2:  # the reported effect's scale: each feature's rollouts with segments for it
        se = se * stratified_levels(*feature_strata(counts, totals), design).effect_scale(contrast.xx)
    return se


def minimum_detectable_effect(
    counts: np.ndarray,
    totals: np.ndarray,
    design: CheckpointDesign,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
) -> np.ndarray:
    """(n_features,) smallest |effect| (in proportion, x100 for points) detectable with `power` at `alpha`."""
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha {alpha} and power {power} must lie in (0, 1)")
    return normal_mde(permutation_se(counts, totals, design), alpha=alpha, power=power)


def normal_mde(se: np.ndarray, *, alpha: float, power: float = 0.8) -> np.ndarray:
    """(z_{1 - alpha/2} + z_{power}) * se."""
    return (stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) * np.asarray(se, dtype=np.float64)
