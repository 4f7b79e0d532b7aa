"""Simulated nested rollout data for the statistics tests: tasks, rollouts per checkpoint, segments."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Simulated:
    counts: np.ndarray  # (rollouts, features) firing segments
    totals: np.ndarray  # (rollouts,) segments
    is_after: np.ndarray
    task: np.ndarray
    true_delta: np.ndarray  # (features,) expected pooled delta given the design


def simulate(
    rng: np.random.Generator,
    *,
    n_tasks: int = 40,
    rollouts_per_checkpoint: int = 3,
    n_features: int = 300,
    segments_mean: float = 12.0,
    task_sd: float = 1.0,
    rollout_sd: float = 1.0,
    shift: float = 0.0,
    shifted_features: int = 0,
    shifted_tasks: int = 0,
) -> Simulated:
    """Segments fire with probability 0.6 * sigmoid(feature base + task effect + rollout effect).

    Task effects make tasks differ; rollout effects make a rollout's segments fire together (clustering).
    The first `shifted_features` features get `shift` added to their firing probability in the after
    checkpoint of the first `shifted_tasks` tasks; `true_delta` is the resulting expected pooled delta.
    """
    k = rollouts_per_checkpoint
    task = np.repeat(np.arange(n_tasks), 2 * k)
    is_after = np.tile(np.r_[np.zeros(k, bool), np.ones(k, bool)], n_tasks)
    n = task.size
    base = rng.normal(-1.0, 0.7, n_features)
    logit = base + rng.normal(0, task_sd, (n_tasks, n_features))[task] + rng.normal(0, rollout_sd, (n, n_features))
    prob = 0.6 / (1 + np.exp(-logit))
    planted = (task < shifted_tasks)[:, None] & is_after[:, None] & (np.arange(n_features) < shifted_features)
    prob = prob + shift * planted
    totals = rng.poisson(segments_mean - 1, n) + 1
    counts = rng.binomial(totals[:, None], prob)
    true_delta = np.zeros(n_features)
    true_delta[:shifted_features] = shift * shifted_tasks / n_tasks
    return Simulated(counts, totals, is_after, task, true_delta)
