"""The smallest p-value a design lets a feature reach (Tarone): test only what can become significant.

Under within-task permutation the statistic is a sum over tasks of (sum of the after-rollouts' values - a
constant), so its maximum is reached exactly when every task puts its n_after largest values in the after
group. The number of labellings that reach it is prod_g C(u_g, j_g), where u_g is how often the n_after-th
largest value occurs in task g and j_g how many of those copies the after group needs; likewise for the
minimum. Any observed labelling has a two-sided p-value of at least min(count_max, count_min) / prod_g
C(n_g, n_after_g), so a feature whose bound exceeds the level can never be significant: leaving it out of the
Benjamini-Hochberg count loses nothing and, because the bound depends on the pooled values only (not on the
labels), keeps every remaining p-value valid. Rollout-level rows are tested on observed minus expected firing,
not exactly these values, and the bound of the unadjusted rates serves there as an approximate filter.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from engine.stats.design import CheckpointDesign
from engine.stats.permutation import dense_columns, feature_spans
from engine.stats.rates import Matrix


def _log_choose(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def _log_extreme_count(values: np.ndarray, n_after: int) -> np.ndarray:
    """(n_features,) log number of ways to give the after group its largest possible sum, summed over the
    tasks of one shape: values (tasks, rollouts_per_task, features)."""
    ordered = -np.sort(-values, axis=1)
    pivot = ordered[:, n_after - 1 : n_after, :]
    copies = (values == pivot).sum(axis=1)
    needed = n_after - (values > pivot).sum(axis=1)
    return _log_choose(copies, needed).sum(axis=0)


def attainable_pvalue(rates: Matrix, design: CheckpointDesign) -> np.ndarray:
    """(n_features,) a lower bound on the two-sided within-task permutation p-value any labelling can give."""
    n_features = int(rates.shape[1])
    log_total = sum(
        float(_log_choose(np.array(index.shape[1]), np.array(m)) * index.shape[0]) for index, m in design.groups
    )
    out = np.ones(n_features)
    for start, stop in feature_spans(n_features, design.n_rollouts):
        y = dense_columns(rates, start, stop)
        log_max = np.zeros(stop - start)
        log_min = np.zeros(stop - start)
        for index, m in design.groups:
            log_max += _log_extreme_count(y[index], m)
            log_min += _log_extreme_count(-y[index], m)
        out[start:stop] = np.exp(np.minimum(log_max, log_min) - log_total)
    return np.minimum(out, 1.0)
