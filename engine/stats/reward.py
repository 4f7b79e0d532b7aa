"""Association of a rollout-level behaviour with reward, within one checkpoint and within tasks."""

from __future__ import annotations

import numpy as np

from engine.stats.design import task_onehot


def reward_association(fires: np.ndarray, reward: np.ndarray, task: np.ndarray) -> np.ndarray:
    """(n_features,) within-task point-biserial correlation of firing with reward.

    fires: (n_rollouts, n_features) 0/1 (fires at least once in the rollout); reward: (n_rollouts,), NaN
    for unknown; task: (n_rollouts,) codes. Both variables are centred on their task means before
    correlating (task fixed effects), so a feature that merely marks hard tasks is not credited with their
    failures. NaN where firing or reward does not vary within any task. In [-1, 1]; positive: rollouts
    where the feature fires earn more reward than others of the same task.
    """
    fires = np.asarray(fires, dtype=np.float64)
    reward = np.asarray(reward, dtype=np.float64)
    known = ~np.isnan(reward)
    x, y = fires[known], reward[known]
    _, code = np.unique(np.asarray(task)[known], return_inverse=True)
    n_tasks = int(code.max(initial=-1)) + 1
    if n_tasks == 0:
        return np.full(fires.shape[1], np.nan)
    size = np.bincount(code, minlength=n_tasks).astype(np.float64)
    y_centred = y - (np.bincount(code, weights=y, minlength=n_tasks) / size)[code]
    task_sums = task_onehot(code, n_tasks) @ x
    x_ss = (x * x).sum(axis=0) - (task_sums**2 / size[:, None]).sum(axis=0)
    y_ss = float(y_centred @ y_centred)
    with np.errstate(divide="ignore", invalid="ignore"):
        corr = (x.T @ y_centred) / np.sqrt(x_ss * y_ss)
    corr[(x_ss <= 1e-12) | (y_ss <= 1e-12)] = np.nan
    return np.clip(corr, -1.0, 1.0)
