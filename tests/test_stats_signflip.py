"""The task-level sign-flip test: exact enumeration, its floor, and calibration under task heterogeneity."""

from __future__ import annotations

import numpy as np
import pytest

from engine.stats.prevalence import test_prevalence
from engine.stats.signflip import signflip_floor, signflip_pvalues
from tests.factories_stats import simulate


def test_exact_enumeration_matches_a_hand_count():
    contributions = np.array([[0.1], [0.2], [0.3], [0.4]])  # each task's weight (1) times its delta
    p, used = signflip_pvalues(contributions, np.random.default_rng(0), 10_000)
    assert used == 16 and p[0] == pytest.approx(2 / 16)  # only all-plus and all-minus reach |1.0|
    assert signflip_floor(4) == pytest.approx(0.125) and signflip_floor(20) < 1e-5


def test_a_few_tasks_cannot_reach_the_level_and_say_so():
    data = simulate(np.random.default_rng(1), n_tasks=4, n_features=3, shift=0.4, shifted_features=3, shifted_tasks=4)
    result = test_prevalence(
        data.counts, data.totals, data.is_after, data.task, np.random.default_rng(2), new_tasks=True
    )
    assert result.scope == "new tasks"
    assert (result.floor == 0.125).all() and (result.p_value >= 0.125).all()


def test_mean_zero_task_heterogeneity_is_a_null_for_new_tasks():
    """Each task's own effect, mean zero over tasks: the sign-flip test holds its size, within-task does not."""
    rng = np.random.default_rng(3)
    n_tasks, k, n_features = 20, 4, 10
    task = np.repeat(np.arange(n_tasks), 2 * k)
    is_after = np.tile(np.r_[np.zeros(k, bool), np.ones(k, bool)], n_tasks)
    p_flip, p_within = [], []
    for _ in range(60):
        # Each task's after-rate moves by its own +-0.15 (independent per feature): mean zero over tasks.
        swing = rng.choice([-0.15, 0.15], size=(n_tasks, n_features))[task] * is_after[:, None]
        prob = 0.4 + rng.uniform(-0.1, 0.1, (n_tasks, n_features))[task] + swing
        totals = rng.poisson(11, task.size) + 1
        counts = rng.binomial(totals[:, None], prob)
        for out, new in ((p_flip, True), (p_within, False)):
            out.append(test_prevalence(counts, totals, is_after, task, rng, 499, new_tasks=new).p_value)
    size_flip, size_within = np.mean(np.concatenate(p_flip) < 0.05), np.mean(np.concatenate(p_within) < 0.05)
    # 600 independent tests: P(more than 7.5% below 0.05) < 0.01 at a true 5%.
    assert size_flip <= 0.075
    assert size_within > 2 * size_flip, (size_flip, size_within)
