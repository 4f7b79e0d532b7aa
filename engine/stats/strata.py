"""Rollout rates stratified over strata within a kind (tool calls: one stratum per tool), so a change in the
strata mix (a new tool) cannot move a feature's rate on the others.

    y_r = sum_s w_s * (c_rs / t_rs),   w_s = (segments of stratum s, all rollouts) / same summed over S_f

over the strata S_f a feature occurs in (its support). The weights are pooled over both checkpoints, so they are
the same under every relabelling and the permutation test stays exact. A rollout without segments of s gets the
feature's task mean rate on s (`rollout_rates`' label-free imputation): it adds nothing to s's within-task
contrast, and a stratum only one checkpoint has in a task contributes no contrast there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.stats.design import CheckpointDesign
from engine.stats.rates import Matrix, rollout_rates


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
