"""The task-level test for held-out tasks: per-task effects with random signs (new tasks, not these tasks).

When held-out rollouts are split by task, a finding should hold for tasks the study did not see. Under the
null that the effect has mean zero over tasks (each task's delta symmetric about 0), flipping the sign of each
task's weighted delta is exact; the within-task permutation test instead treats the tasks as fixed and rejects
too often when tasks differ in their own effects. Exact over all 2^G sign patterns when that is at most the
permutation budget, Monte Carlo ((b + 1) / (B + 1)) otherwise. Its floor, 2 / 2^G, is reported so that a
design that cannot reach the level says so instead of pretending to a power it lacks.
"""

from __future__ import annotations

import itertools

import numpy as np

# Sign patterns are drawn in chunks of this many rows.
SIGN_CHUNK = 4096


def signflip_floor(n_tasks: int) -> float:
    """The smallest two-sided p-value a sign-flip test over n_tasks tasks can give."""
    return min(1.0, 2.0 / 2.0**n_tasks) if n_tasks else 1.0


def signflip_pvalues(contributions: np.ndarray, rng: np.random.Generator, n_flips: int) -> tuple[np.ndarray, int]:
    """(p (n_features,), number of sign patterns used): two-sided sign-flip test of sum_g c_g, the tasks'
    contributions (G, n_features) w_g d_g (`engine.stats.rates.TaskLevels.contributions`)."""
    n_tasks = contributions.shape[0]
    observed = np.abs(contributions.sum(axis=0)) * (1 - 1e-9)
    exact = 2**n_tasks <= n_flips
    total = 2**n_tasks if exact else n_flips
    exceed = np.zeros(contributions.shape[1], dtype=np.int64)
    if exact:
        patterns = np.array(list(itertools.product((1.0, -1.0), repeat=n_tasks)))
        exceed += (np.abs(patterns @ contributions) >= observed).sum(axis=0)
        return exceed / total, total
    done = 0
    while done < n_flips:
        n = min(SIGN_CHUNK, n_flips - done)
        signs = rng.choice((-1.0, 1.0), size=(n, n_tasks))
        exceed += (np.abs(signs @ contributions) >= observed).sum(axis=0)
        done += n
    return (exceed + 1) / (n_flips + 1), total
