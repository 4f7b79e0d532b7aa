"""Expected firing anywhere under the beta-binomial per-rollout rate model (`engine.stats.firing`)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from engine.stats.design import task_onehot
from engine.stats.firing import expected_any, intra_rollout_correlation


def _beta_binomial_study(rho: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(counts, exposure, task, true expected firing) of 200 tasks x 8 rollouts with rollout rates ~ Beta."""
    rng = np.random.default_rng(seed)
    task = np.repeat(np.arange(200), 8)
    mu = rng.uniform(0.05, 0.4, 200)[task]
    a, b = mu * (1 - rho) / rho, (1 - mu) * (1 - rho) / rho
    exposure = rng.poisson(10, task.size) + 1
    counts = rng.binomial(exposure, rng.beta(a, b))
    truth = 1 - stats.betabinom.pmf(0, exposure, a, b)
    return counts[:, None].astype(float), exposure[:, None].astype(float), task, truth


def test_correlation_is_recovered_and_zero_for_binomial_counts() -> None:
    counts, exposure, task, _ = _beta_binomial_study(0.2)
    rho = intra_rollout_correlation(counts, exposure, task, task_onehot(task, 200))
    assert abs(rho[0] - 0.2) < 0.03
    rng = np.random.default_rng(1)
    binomial = rng.binomial(exposure.astype(int), 0.2).astype(float)
    assert intra_rollout_correlation(binomial, exposure, task, task_onehot(task, 200))[0] < 0.01


def test_expected_firing_matches_the_beta_binomial_where_a_constant_rate_overstates() -> None:
    counts, exposure, task, truth = _beta_binomial_study(0.2)
    offset = expected_any(counts, exposure, task, 200)[:, 0]
    rate = np.bincount(task, counts[:, 0]) / np.bincount(task, exposure[:, 0])
    constant = 1 - (1 - rate[task]) ** exposure[:, 0]
    fired = (counts[:, 0] > 0).mean()
    # within 3 points of the model's truth: each task's rate is estimated from its 8 rollouts, and the
    # offset is concave in it, so the plug-in is a little low
    assert abs(offset.mean() - truth.mean()) < 0.03 and abs(offset.mean() - fired) < 0.05
    assert constant.mean() - fired > 0.08  # the constant-rate offset overstates firing (Jensen)


def test_binomial_counts_give_the_constant_rate_offset_and_labels_are_not_read() -> None:
    exposure = np.array([[2.0], [4.0], [6.0], [8.0], [1.0], [3.0]])
    counts = np.array([[1.0], [1.0], [1.0], [2.0], [0.0], [1.0]])  # no more spread than binomial: rho = 0
    task = np.array([0, 0, 0, 1, 1, 1])
    rate = np.array([3 / 12] * 3 + [3 / 12] * 3)
    np.testing.assert_allclose(expected_any(counts, exposure, task, 2)[:, 0], 1 - (1 - rate) ** exposure[:, 0])
    # a feature that fires on every segment or never: 1 and 0, whatever the exposure
    edge = expected_any(np.hstack([exposure, 0 * exposure]), np.hstack([exposure, exposure]), task, 2)
    np.testing.assert_allclose(edge, np.column_stack([np.ones(6), np.zeros(6)]))
