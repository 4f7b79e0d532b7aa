"""The expected chance that a feature fires anywhere in a rollout, under a per-rollout rate model.

A rollout r of task g with E_r segments the feature could fire on fires anywhere with probability
1 - (1 - p_r)^E_r given its own per-segment rate p_r. Rollouts of a task differ (one that starts summarising
keeps summarising), so p_r is drawn around the task's rate: p_r ~ Beta with mean mu_g and intra-rollout
correlation rho (the beta-binomial model), and the expected firing is

    1 - E[(1 - p)^E] = 1 - B(a, b + E) / B(a, b),   a = mu_g (1 - rho) / rho,  b = (1 - mu_g)(1 - rho) / rho.

With rho = 0 this is the constant-rate offset 1 - (1 - mu_g)^E; with rho > 0 it is lower, and more so for
large E (Jensen: (1 - p)^E is convex in p), which is where a constant rate overstates the firing of long
rollouts. mu_g is the task's firing segments over its exposure; rho is one method-of-moments estimate per
feature over all tasks, from the counts' deviations around their task's rate. Everything is pooled over the
two checkpoints and never looks at a label, so the offset is the same under every within-task relabelling
and the permutation test of (fires anywhere - offset) stays exact whatever the model's error.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from engine.stats.design import task_onehot

# Below this intra-rollout correlation the beta-binomial is the binomial to float precision (and its gamma
# functions of a + b ~ 1 / rho lose digits): the constant-rate formula is used.
MIN_RHO = 1e-6
# Cap on the estimated correlation: at rho -> 1 every rollout fires on all or none of its segments, and a
# moment estimate from a few rollouts can overshoot there; 0.95 keeps a + b >= 0.05.
MAX_RHO = 0.95


def task_rates(counts: np.ndarray, exposure: np.ndarray, onehot: sp.sparray) -> np.ndarray:
    """(n_tasks, n_features) firing segments over exposure, summed over each task's rollouts, in [0, 1]."""
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = (onehot @ counts) / np.maximum(onehot @ exposure, 1.0)
    return np.clip(rate, 0.0, 1.0)


def intra_rollout_correlation(
    counts: np.ndarray, exposure: np.ndarray, task: np.ndarray, onehot: sp.sparray
) -> np.ndarray:
    """(n_features,) the beta-binomial correlation rho of each feature, by the method of moments.

    Under the model var(c_r) = v0_r + rho v1_r with v0 = E mu (1 - mu), v1 = E (E - 1) mu (1 - mu). The
    residual c_r - E_r mu_g uses the task's own estimated rate (leverage h_r = E_r / sum_g E), so its
    expectation is (1 - 2 h_r) var_r + h_r^2 V_g with V_g the task's summed variance: linear in rho, solved
    over all rollouts. Clipped to [0, MAX_RHO]; 0 where the feature does not vary.
    """
    mu = task_rates(counts, exposure, onehot)
    task_exposure = np.maximum(onehot @ exposure, 1.0)
    h = exposure / task_exposure[task]
    spread = exposure * (mu * (1.0 - mu))[task]
    v0, v1 = spread, spread * np.maximum(exposure - 1.0, 0.0)
    h2 = onehot @ (h**2)  # (n_tasks, n_features) sum of squared leverages per task
    observed = ((counts - exposure * mu[task]) ** 2).sum(axis=0)
    base = ((1.0 - 2.0 * h) * v0).sum(axis=0) + (h2 * (onehot @ v0)).sum(axis=0)
    slope = ((1.0 - 2.0 * h) * v1).sum(axis=0) + (h2 * (onehot @ v1)).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(slope > 0, (observed - base) / slope, 0.0)
    return np.clip(np.nan_to_num(rho), 0.0, MAX_RHO)


def expected_any(counts: np.ndarray, exposure: np.ndarray, task: np.ndarray, n_tasks: int) -> np.ndarray:
    """(n_rollouts, n_features) each rollout's expected chance of firing anywhere, 1 - E[(1 - p)^E].

    counts: firing segments per rollout and feature; exposure: segments it could fire on; task: task code per
    rollout. Label-free (see the module docstring).
    """
    onehot = task_onehot(task, n_tasks)
    counts = np.asarray(counts, dtype=np.float64)
    exposure = np.asarray(exposure, dtype=np.float64)
    mu = task_rates(counts, exposure, onehot)[task]
    rho = np.broadcast_to(intra_rollout_correlation(counts, exposure, task, onehot), mu.shape)
    constant = 1.0 - (1.0 - mu) ** exposure
    mixed = (rho >= MIN_RHO) & (mu > 0.0) & (mu < 1.0)
    scale = np.where(mixed, (1.0 - rho) / np.where(mixed, rho, 1.0), 1.0)
    a, b = np.where(mixed, mu * scale, 1.0), np.where(mixed, (1.0 - mu) * scale, 1.0)
    log_none = gammaln(b + exposure) - gammaln(b) + gammaln(a + b) - gammaln(a + b + exposure)
    return np.where(mixed, -np.expm1(log_none), constant)
