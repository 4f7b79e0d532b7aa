"""Calibration by simulation: no false findings on null data, planted shifts found with honest intervals."""

from __future__ import annotations

import numpy as np
from scipy import stats

from engine.stats.fdr import bh_qvalues
from engine.stats.prevalence import test_prevalence
from tests.factories_stats import simulate


def test_null_with_task_effects_and_clustering_is_calibrated():
    rng = np.random.default_rng(11)
    data = simulate(rng, n_tasks=40, n_features=400)
    result = test_prevalence(data.counts, data.totals, data.is_after, data.task, rng, 999)
    q = bh_qvalues(result.p_value)
    # Under the global null, BH bounds the chance of any finding by the nominal level: expect none.
    assert np.mean(q < 0.05) <= 0.05
    assert (q < 0.05).sum() == 0
    # p-values are uniform: goodness of fit over 400 features, and the 5% tail holds about 5%.
    assert stats.kstest(result.p_value, "uniform").pvalue > 0.01
    assert 0.02 <= np.mean(result.p_value < 0.05) <= 0.08


def test_segments_as_independent_rows_inflate_false_findings():
    """The same null data analysed as pooled segments (a 2x2 test per feature) finds many 'changes'."""
    rng = np.random.default_rng(11)
    data = simulate(rng, n_tasks=40, n_features=400)
    p = np.empty(data.counts.shape[1])
    for j in range(p.size):
        fired = np.array([data.counts[data.is_after == side, j].sum() for side in (False, True)])
        segments = np.array([data.totals[data.is_after == side].sum() for side in (False, True)])
        p[j] = stats.chi2_contingency(np.stack([fired, segments - fired]), correction=False).pvalue
    assert np.mean(p < 0.05) > 0.10  # about three times the nominal 5%
    assert (bh_qvalues(p) < 0.05).sum() >= 1  # false "findings" survive FDR control
    assert stats.kstest(p, "uniform").pvalue < 1e-4


def test_planted_shift_in_some_tasks_is_found_and_covered():
    rng = np.random.default_rng(5)
    data = simulate(rng, n_tasks=40, n_features=200, shift=0.25, shifted_features=20, shifted_tasks=24)
    result = test_prevalence(data.counts, data.totals, data.is_after, data.task, rng, 1999)
    q = bh_qvalues(result.p_value)
    planted = slice(0, 20)
    assert (q[planted] < 0.05).all()
    assert (q[20:] < 0.05).sum() <= 2
    covered = (result.ci_low[planted] <= data.true_delta[planted]) & (
        data.true_delta[planted] <= result.ci_high[planted]
    )
    assert covered.sum() >= 16  # nominal 95% of 20; P(<= 15 covered) < 0.001 when calibrated
    np.testing.assert_allclose(data.true_delta[planted], 0.15)
    np.testing.assert_allclose(result.delta[planted].mean(), 0.15, atol=0.02)


def test_few_tasks_resample_rollouts_within_task_and_cover():
    """Four tasks, many rollouts (the tau2 shape): the within-task bootstrap covers a shift in every task."""
    rng = np.random.default_rng(8)
    data = simulate(
        rng,
        n_tasks=4,
        rollouts_per_checkpoint=16,
        n_features=60,
        shift=0.15,
        shifted_features=20,
        shifted_tasks=4,
        task_sd=1.0,
        rollout_sd=0.7,
    )
    result = test_prevalence(data.counts, data.totals, data.is_after, data.task, rng, 1999)
    q = bh_qvalues(result.p_value)
    planted = slice(0, 20)
    assert (q[planted] < 0.05).sum() >= 18
    assert (q[20:] < 0.05).sum() <= 1
    covered = (result.ci_low[planted] <= 0.15) & (0.15 <= result.ci_high[planted])
    assert covered.sum() >= 16
