"""Reward association within checkpoint and within task."""

from __future__ import annotations

import numpy as np

from engine.stats.reward import reward_association


def test_within_task_association_ignores_task_difficulty():
    rng = np.random.default_rng(0)
    n_tasks, k = 60, 6
    task = np.repeat(np.arange(n_tasks), k)
    hard = rng.uniform(size=n_tasks) < 0.5
    # Feature 0 marks hard tasks (fires there, where reward is low) but says nothing within a task.
    marks_hard = (rng.uniform(size=task.size) < np.where(hard[task], 0.8, 0.1)).astype(float)
    # Feature 1 goes with success within every task.
    helps = (rng.uniform(size=task.size) < 0.5).astype(float)
    p_success = np.clip(np.where(hard[task], 0.2, 0.7) + 0.25 * helps, 0, 1)
    reward = (rng.uniform(size=task.size) < p_success).astype(float)
    assoc = reward_association(np.stack([marks_hard, helps], axis=1), reward, task)
    naive = np.corrcoef(marks_hard, reward)[0, 1]
    assert naive < -0.2
    assert abs(assoc[0]) < 0.1
    assert assoc[1] > 0.15


def test_missing_reward_and_constant_features():
    task = np.array([0, 0, 1, 1, 2, 2])
    reward = np.array([1.0, 0.0, np.nan, 1.0, 0.0, 1.0])
    fires = np.array([[1, 1, 0], [0, 1, 0], [1, 1, 1], [0, 1, 0], [0, 1, 1], [1, 1, 0]], dtype=float)
    assoc = reward_association(fires, reward, task)
    assert np.isnan(assoc[1])  # fires everywhere: no within-task variation
    assert assoc[0] > 0 and assoc[2] < 0
    assert np.isnan(reward_association(fires, np.full(6, np.nan), task)).all()
