"""Rates stratified over strata (tool calls: tools), shared by the deltas and the lexical n-gram sources."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from engine.stats.design import CheckpointDesign
from engine.stats.rates import Contrast, effects
from engine.stats.strata import stratified_rates, stratum_weights


def test_weights_are_pooled_segments_among_the_support() -> None:
    totals = np.array([[3.0, 1.0, 0.0], [1.0, 1.0, 4.0]])  # 2 rollouts x 3 strata
    support = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])  # feature 0 on strata 0-1, feature 1 on 0 only
    weight = stratum_weights(totals, support)
    np.testing.assert_allclose(weight[:, 0], [4 / 6, 2 / 6, 0.0])
    np.testing.assert_allclose(weight[:, 1], [1.0, 0.0, 0.0])


def test_hand_computed_rate_with_a_missing_stratum_imputed_from_its_task() -> None:
    design = CheckpointDesign.from_labels(np.array([False, True, False, True]), np.array([0, 0, 0, 0]))
    totals = np.array([[2.0, 1.0], [2.0, 0.0], [2.0, 1.0], [2.0, 3.0]])
    counts = [sp.csc_array(np.array([[1.0], [2.0], [0.0], [1.0]])), sp.csc_array(np.array([[1.0], [0], [0], [3]]))]
    rates = stratified_rates(counts, totals, np.ones((2, 1)), design)
    w0, w1 = 8 / 13, 5 / 13
    # rollout 1 has no calls to stratum 1: it gets the task mean over rollouts that have some, (1 + 0 + 1) / 3
    expected = [w0 * 0.5 + w1 * 1.0, w0 * 1.0 + w1 * 2 / 3, w0 * 0.0 + w1 * 0.0, w0 * 0.5 + w1 * 1.0]
    np.testing.assert_allclose(rates[:, 0], expected)


def test_a_shift_in_the_strata_mix_does_not_move_the_stratified_rate() -> None:
    """The same per-stratum rates (10% on tool A, 60% on tool B), the after side calls B four times as often:
    the pooled share rises by about 15 points (20% -> 35%), the stratified effect stays within noise of 0."""
    rng = np.random.default_rng(0)
    n_tasks, per_cell = 30, 6
    task = np.repeat(np.arange(n_tasks), 2 * per_cell)
    is_after = np.tile(np.repeat([False, True], per_cell), n_tasks)
    calls_b = np.where(is_after, 8, 2)
    totals = np.column_stack([np.full(task.size, 8), calls_b]).astype(np.float64)
    fired = [rng.binomial(8, 0.1, task.size), rng.binomial(calls_b, 0.6)]
    counts = [sp.csc_array(f.astype(np.float64)[:, None]) for f in fired]
    design = CheckpointDesign.from_labels(is_after, task)
    rates = stratified_rates(counts, totals, np.ones((2, 1)), design)
    effect = effects(Contrast(design), rates, by_task=True)
    pooled = (fired[0] + fired[1]) / totals.sum(axis=1)
    assert pooled[is_after].mean() - pooled[~is_after].mean() > 0.1
    assert abs(effect.estimate[0]) < 3 * effect.se[0]
