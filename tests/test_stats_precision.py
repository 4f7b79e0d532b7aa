"""Precision weights of tool-call rates (`engine.stats.precision`) and the weighted effect they feed."""

from __future__ import annotations

import numpy as np

from engine.stats.design import CheckpointDesign
from engine.stats.precision import intra_rollout_correlation, precision_weights
from engine.stats.rates import Contrast, effects, weighted_deviations


def _strata_counts(rho: float, seed: int = 0) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Two strata (tools) at different rates per task, calls ~ 1 + Poisson(2), rollout rates ~ Beta."""
    rng = np.random.default_rng(seed)
    task = np.repeat(np.arange(300), 8)
    totals = rng.poisson(2.0, (task.size, 2)) + 1.0
    counts = []
    for s, base in enumerate((0.1, 0.4)):
        mu = np.clip(base + rng.normal(0, 0.05, 300), 0.02, 0.9)[task]
        p = rng.beta(mu * (1 - rho) / rho, (1 - mu) * (1 - rho) / rho) if rho > 0 else mu
        counts.append(rng.binomial(totals[:, s].astype(int), p)[:, None].astype(float))
    return counts, totals, task


def test_correlation_is_recovered_over_strata_and_zero_for_binomial_calls() -> None:
    support = np.ones((2, 1))
    counts, totals, task = _strata_counts(0.3)
    assert abs(intra_rollout_correlation(counts, totals, support, task, 300)[0] - 0.3) < 0.05
    counts, totals, task = _strata_counts(0.0)
    assert intra_rollout_correlation(counts, totals, support, task, 300)[0] < 0.03


def test_weights_by_hand() -> None:
    totals = np.array([[1.0, 0.0], [4.0, 2.0], [0.0, 0.0]])
    stratum_weight = np.array([[0.5], [0.5]])
    variance = np.array([0.25 * 1.0, 0.25 * (1 + 3 * 0.2) / 4 + 0.25 * (1 + 1 * 0.2) / 2, np.inf])
    raw = 1 / variance
    np.testing.assert_allclose(precision_weights(totals, stratum_weight, np.array([0.2]))[:, 0], raw / raw.mean())


def test_weighted_effect_is_weighted_least_squares_and_its_test_statistic_its_numerator() -> None:
    rng = np.random.default_rng(3)
    task = np.repeat(np.arange(6), 6)
    is_after = np.tile(np.r_[np.zeros(3, bool), np.ones(3, bool)], 6)
    design = CheckpointDesign.from_labels(is_after, task)
    y, w = rng.random((36, 2)), rng.uniform(0.2, 3.0, (36, 2))
    for j in range(2):  # reference: weighted least squares on task dummies and the label
        design_matrix = np.column_stack([np.eye(6)[task], is_after.astype(float)])
        root = np.sqrt(w[:, j])
        coef = np.linalg.lstsq(design_matrix * root[:, None], y[:, j] * root, rcond=None)[0]
        weighted = effects(Contrast(design), y, by_task=True, weights=w)
        assert np.isclose(weighted.estimate[j], coef[-1])
    # unit weights give the unweighted effect exactly
    plain, unit = (
        effects(Contrast(design), y, by_task=True),
        effects(Contrast(design), y, by_task=True, weights=np.ones_like(y)),
    )
    np.testing.assert_allclose(unit.estimate, plain.estimate)
    np.testing.assert_allclose(unit.se, plain.se)
    # for any within-task relabelling, x @ (weighted deviations) is the weighted least-squares numerator
    z = weighted_deviations(design, y, w)
    for labels in design.permuted_labels(5, rng):
        other = CheckpointDesign.from_labels(labels.astype(bool), task)
        refit = effects(Contrast(other), y, by_task=True, weights=w)
        x = Contrast(other).x
        label = labels.astype(float)[:, None]
        centred = label - (np.bincount(task, (w * label)[:, 0]) / np.bincount(task, w[:, 0]))[task][:, None]
        np.testing.assert_allclose(x @ z[:, :1], refit.estimate[:1] * (w[:, :1] * centred**2).sum(axis=0))
