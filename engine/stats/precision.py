"""Precision weights of rollouts whose rates rest on different numbers of segments (tool calls per tool).

A rollout's rate on a stratum with n segments has variance mu (1 - mu)(1 + (n - 1) rho) / n when its segments
share a rollout effect with intra-rollout correlation rho (the beta-binomial variance): a rollout with one
call says less than one with five, but not five times less when rho > 0. For a rate stratified over strata
with weights w_s (`engine.stats.strata`) the variance is proportional to

    v_r = sum_s w_s^2 (1 + (n_rs - 1) rho) / n_rs      over the strata with n_rs > 0,

and the rollout's weight is 1 / v_r (0 for a rollout without segments in any stratum of the feature: its rate
is imputed). rho is one method-of-moments estimate per feature over all (task, stratum) cells, from the counts'
deviations around the cell's own rate; counts, segments and cells are pooled over both checkpoints, so the
weights never look at a label and permuting labels keeps the test exact.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.stats.design import task_onehot
from engine.stats.rates import Matrix

# Cap on the estimated correlation: a moment estimate from a few rollouts can overshoot toward 1, where every
# rollout would weigh the same whatever its calls; 0.95 keeps some of the calls' information.
MAX_RHO = 0.95


def _moment_terms(counts: np.ndarray, exposure: np.ndarray, cell: np.ndarray, n_cells: int) -> np.ndarray:
    """(2, n_features) the sums (observed - binomial part, slope in rho) of the moment equation over rows.

    Under the model var(c_r) = v0_r + rho v1_r with v0 = E mu (1 - mu), v1 = E (E - 1) mu (1 - mu). The
    residual c_r - E_r mu_cell uses the cell's own estimated rate (leverage h_r = E_r / sum_cell E), so its
    expectation is (1 - 2 h_r) var_r + h_r^2 V_cell with V_cell the cell's summed variance: linear in rho.
    """
    onehot = task_onehot(cell, n_cells)
    cell_exposure = np.maximum(onehot @ exposure, 1.0)
    mu = np.clip((onehot @ counts) / cell_exposure, 0.0, 1.0)
    h = exposure / cell_exposure[cell]
    v0 = exposure * (mu * (1.0 - mu))[cell]
    v1 = v0 * np.maximum(exposure - 1.0, 0.0)
    h2 = onehot @ (h**2)
    observed = ((counts - exposure * mu[cell]) ** 2).sum(axis=0)
    base = ((1.0 - 2.0 * h) * v0).sum(axis=0) + (h2 * (onehot @ v0)).sum(axis=0)
    slope = ((1.0 - 2.0 * h) * v1).sum(axis=0) + (h2 * (onehot @ v1)).sum(axis=0)
    return np.vstack([observed - base, slope])


def intra_rollout_correlation(
    counts: Sequence[Matrix], totals: np.ndarray, support: np.ndarray, task: np.ndarray, n_tasks: int
) -> np.ndarray:
    """(n_features,) each feature's correlation rho between the segments of a rollout, pooled over strata.

    counts[s]: (n_rollouts, n_features) firing segments of stratum s; totals: (n_rollouts, n_strata);
    support: (n_strata, n_features), 1 where the feature occurs. Clipped to [0, MAX_RHO]; 0 where the
    feature does not vary.
    """
    terms = np.zeros((2, support.shape[1]))
    for s, stratum_counts in enumerate(counts):
        columns = np.flatnonzero(support[s] > 0)
        if columns.size == 0:
            continue
        dense = np.asarray(
            stratum_counts[:, columns].toarray() if hasattr(stratum_counts, "toarray") else stratum_counts[:, columns],
            dtype=np.float64,
        )
        exposure = np.broadcast_to(totals[:, s : s + 1], dense.shape).astype(np.float64)
        terms[:, columns] += _moment_terms(dense, exposure, task, n_tasks)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(terms[1] > 0, terms[0] / terms[1], 0.0)
    return np.clip(np.nan_to_num(rho), 0.0, MAX_RHO)


def precision_weights(totals: np.ndarray, stratum_weight: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """(n_rollouts, n_features) 1 / v_r of the module docstring, scaled to mean 1 per feature.

    totals: (n_rollouts, n_strata) segments per stratum; stratum_weight: (n_strata, n_features) the
    strata's weights w_s (`engine.stats.strata.stratum_weights`); rho: (n_features,).
    """
    variance = np.zeros((totals.shape[0], stratum_weight.shape[1]))
    for s in range(totals.shape[1]):
        n = totals[:, s : s + 1]
        term = stratum_weight[s] ** 2 * (1.0 + (n - 1.0) * rho) / np.maximum(n, 1.0)
        variance += np.where(n > 0, term, 0.0)
    weight = np.divide(1.0, variance, out=np.zeros_like(variance), where=variance > 0)
    mean = weight.mean(axis=0)
    return np.divide(weight, mean, out=np.zeros_like(weight), where=mean > 0)
