"""Rates stratified over strata (tool calls: tools), shared by the deltas and the lexical n-gram sources."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from engine.stats.design import CheckpointDesign
from engine.stats.power import permutation_se
from engine.stats.prevalence import test_prevalence
from engine.stats.rates import Contrast, Effects, effects
from engine.stats.strata import feature_strata, stratified_levels, stratified_rates, stratum_weights


def stratified_effects(
    counts: list, totals: np.ndarray, support: np.ndarray, design: CheckpointDesign, *, by_task: bool
) -> Effects:
    """The cell estimator as the deltas stage and held-out tests run it: the effect of the stratified rates on
    the levels' scale (`effects` with `TaskLevels.effect_scale`)."""
    contrast = Contrast(design)
    scale = stratified_levels(counts, totals, support, design).effect_scale(contrast.xx)
    return effects(contrast, stratified_rates(counts, totals, support, design), by_task=by_task, scale=scale)


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


def test_levels_and_effect_count_only_the_rollouts_that_call_each_tool() -> None:
    """One task: the before rollouts never fire, the after rollouts fire on half their calls, and each rollout
    calls one of the feature's two tools. Among calls to a tool both checkpoints call the rate goes 0 -> 0.5;
    `stratified_rates` imputes each rollout's missing tool with the task's mean there, so x'y / x'x read
    0.125 -> 0.375 (an effect of 0.25) as if the missing tool were a cell of no change."""
    design = CheckpointDesign.from_labels(np.array([False, False, True, True]), np.zeros(4, dtype=int))
    totals = np.array([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0], [0.0, 2.0]])
    counts = [
        sp.csc_array(np.array([[0.0], [0.0], [1.0], [0.0]])),
        sp.csc_array(np.array([[0.0], [0.0], [0.0], [1.0]])),
    ]
    support = np.ones((2, 1))
    before, after = stratified_levels(counts, totals, support, design).standardised()
    np.testing.assert_allclose([before[0], after[0]], [0.0, 0.5])
    effect = stratified_effects(counts, totals, support, design, by_task=False)
    np.testing.assert_allclose(effect.estimate, [0.5])
    rates = stratified_rates(counts, totals, support, design)
    np.testing.assert_allclose(effects(Contrast(design), rates, by_task=False).estimate, [0.25])


def test_the_levels_difference_is_the_tested_statistic_over_its_weight() -> None:
    """Random strata, supports and missing tools: each task's weighted level difference adds up to x @ y, the
    statistic the permutation test uses, and the effect equals the standardised levels' difference; with one
    stratum every rollout has, effect and standard error are those of the unstratified rates."""
    rng = np.random.default_rng(5)
    design = CheckpointDesign.from_labels(rng.random(120) < 0.5, rng.integers(0, 12, 120))
    n = design.n_rollouts
    totals = (rng.poisson(1.0, (n, 4)) * (rng.random((n, 4)) < 0.6)).astype(np.float64)
    counts = [sp.csc_array(rng.binomial(totals[:, [s]].astype(int), 0.3, (n, 6)).astype(np.float64)) for s in range(4)]
    support = (rng.random((4, 6)) < 0.7).astype(np.float64)
    support[:, 0] = 1.0
    levels = stratified_levels(counts, totals, support, design)
    statistic = Contrast(design).x @ stratified_rates(counts, totals, support, design)
    difference = np.where(levels.weight > 0, levels.weight * (levels.after - levels.before), 0.0).sum(axis=0)
    np.testing.assert_allclose(difference, statistic, atol=1e-12)
    before, after = levels.standardised()
    for by_task in (True, False):
        effect = stratified_effects(counts, totals, support, design, by_task=by_task)
        np.testing.assert_allclose(effect.estimate, after - before, atol=1e-12)
        assert np.isfinite(effect.se).all()
    one = [sp.csc_array(rng.binomial(3, 0.4, (n, 6)).astype(np.float64))]
    everyone = np.full((n, 1), 3.0)
    stratified = stratified_effects(one, everyone, np.ones((1, 6)), design, by_task=True)
    plain = effects(Contrast(design), stratified_rates(one, everyone, np.ones((1, 6)), design), by_task=True)
    np.testing.assert_allclose(stratified.estimate, plain.estimate, atol=1e-12)
    np.testing.assert_allclose(stratified.se, plain.se, atol=1e-12)


def test_a_held_out_test_reads_each_claim_over_the_rollouts_it_labelled() -> None:
    """A judge labels a sample: in each task two rollouts a side have labelled segments, two a side none. The
    levels are the labelled rollouts' (0 -> 0.5 here; imputing the others with the task's mean read 0.125 ->
    0.375), and the MDE's standard error is that of this delta: its spread when labels are permuted within
    task (half as large on the imputed scale)."""
    rng = np.random.default_rng(0)
    n_tasks = 12
    task = np.repeat(np.arange(n_tasks), 8)
    is_after = np.tile(np.repeat([False, True], 4), n_tasks)
    labelled = np.tile([True, True, False, False], 2 * n_tasks)
    totals = np.column_stack([np.where(labelled, 2.0, 0.0), np.full(task.size, 2.0)])  # one denominator a claim
    counts = np.where(labelled & is_after, 1.0, 0.0)[:, None] * np.ones((1, 2))
    result = test_prevalence(counts, totals, is_after, task, rng, n_permutations=199)
    np.testing.assert_allclose([result.prevalence_before[0], result.prevalence_after[0]], [0.0, 0.5])
    np.testing.assert_allclose(result.delta[0], 0.5)
    noisy = rng.binomial(2, 0.4, counts.shape) * (totals > 0)  # a claim with variation under the null
    design = CheckpointDesign.from_labels(is_after, task)
    spread = np.std(
        [
            stratified_effects(*feature_strata(noisy, totals), replace(design, is_after=labels), by_task=False).estimate
            for labels in design.permuted_labels(400, rng).astype(bool)
        ],
        axis=0,
    )
    np.testing.assert_allclose(permutation_se(noisy, totals, design), spread, rtol=0.2)


def test_a_feature_with_no_cell_of_both_checkpoints_has_no_effect(recwarn: pytest.WarningsRecorder) -> None:
    """Only after-rollouts call the tool the feature fires on: no (task, tool) cell compares the checkpoints,
    so the levels and the effect are NaN (not 0, and not the product of a zero weight's infinite scale)."""
    design = CheckpointDesign.from_labels(np.array([False, False, True, True]), np.zeros(4, dtype=int))
    totals = np.array([[2.0, 0.0], [2.0, 0.0], [2.0, 1.0], [2.0, 2.0]])
    counts = [sp.csc_array(np.zeros((4, 1))), sp.csc_array(np.array([[0.0], [0.0], [1.0], [0.0]]))]
    support = np.array([[0.0], [1.0]])
    before, after = stratified_levels(counts, totals, support, design).standardised()
    effect = stratified_effects(counts, totals, support, design, by_task=False)
    assert np.isnan([before[0], after[0], effect.estimate[0], effect.se[0]]).all()
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
