"""Power of the within-task permutation test: the smallest delta it would reliably detect.

Used when a held-out hypothesis test is inconclusive: "no significant change" means little unless we say
how large a change the data could have shown. The permutation distribution of the pooled delta is, to
first order, that of a sum of within-task sampled residuals, whose variance is known in closed form:

    delta ~= (1/T_after + 1/T_before) * sum_r a_r x_r + const,   x_r = c_r - p * t_r,
    Var = (1/T_after + 1/T_before)^2 * sum_g [m_g (n_g - m_g) / (n_g (n_g - 1))] * SS_g,
    SS_g = sum_{r in g} (x_r - mean_g x)^2

(T = expected total segments per checkpoint, p = pooled prevalence, task g with n_g rollouts of which
m_g are after). MDE = (z_{1 - alpha/2} + z_{power}) * SE: the true delta a two-sided level-alpha test
detects with probability `power`, under a normal approximation with the null's spread.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from engine.stats.design import CheckpointDesign, task_onehot


def permutation_se(counts: np.ndarray, totals: np.ndarray, is_after: np.ndarray, task: np.ndarray) -> np.ndarray:
    """(n_features,) standard deviation of the pooled delta under within-task permutation (closed form).

    Same inputs as `engine.stats.prevalence.test_prevalence`; NaN where no task is shared or no segments.
    """
    design = CheckpointDesign.from_labels(is_after, task)
    c = np.asarray(counts, dtype=np.float64)[design.keep]
    t = np.asarray(totals, dtype=np.float64)[design.keep]
    t2 = t if t.ndim == 2 else t[:, None]
    if design.n_tasks == 0:
        return np.full(c.shape[1], np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        pooled = c.sum(axis=0) / t2.sum(axis=0)
    residual = c - pooled * t2
    n_g = np.bincount(design.task, minlength=design.n_tasks).astype(np.float64)
    m_g = np.bincount(design.task, weights=design.is_after, minlength=design.n_tasks)
    # Within-task sum of squared deviations, via sums and sums of squares per task.
    onehot = task_onehot(design.task, design.n_tasks)
    s1, s2 = onehot @ residual, onehot @ residual**2
    ss = s2 - s1**2 / n_g[:, None]
    factor = np.where(n_g > 1, m_g * (n_g - m_g) / (n_g * np.maximum(n_g - 1, 1)), 0.0)
    variance = factor @ ss
    t_after = design.expected_after() @ t2
    t_before = t2.sum(axis=0) - t_after
    with np.errstate(divide="ignore", invalid="ignore"):
        return (1 / t_after + 1 / t_before) * np.sqrt(np.maximum(variance, 0.0))


def minimum_detectable_effect(
    counts: np.ndarray,
    totals: np.ndarray,
    is_after: np.ndarray,
    task: np.ndarray,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
) -> np.ndarray:
    """(n_features,) smallest |delta| (in proportion, x100 for points) detectable with `power` at `alpha`.

    Inputs as in `test_prevalence`. With several hypotheses corrected by Benjamini-Hochberg, pass the
    per-test level the correction implies (e.g. alpha * rank / m) for a stricter, honest figure.
    """
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha {alpha} and power {power} must lie in (0, 1)")
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    return z * permutation_se(counts, totals, is_after, task)
