"""The calibration bench's reference test (segments as independent units, Cochran-Mantel-Haenszel by task)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from bench.calibration import SCENARIOS, _cmh_p, simulate
from engine.deltas import ANY


def test_one_stratum_is_the_pearson_test_scaled_by_n_minus_1_over_n():
    """With one task the CMH statistic is (N - 1) / N times Pearson's chi-square on the pooled 2 x 2 table."""
    counts = np.array([[3.0], [5.0], [1.0], [9.0], [7.0]])
    totals = np.array([[10.0], [10.0], [8.0], [12.0], [9.0]])
    after = np.array([False, False, False, True, True])
    fired = np.array([counts[~after].sum(), counts[after].sum()])
    n = np.array([totals[~after].sum(), totals[after].sum()])
    table = np.column_stack([fired, n - fired])
    pearson = stats.chi2_contingency(table, correction=False)[0]
    expected = stats.chi2.sf(pearson * (n.sum() - 1) / n.sum(), 1)
    p = _cmh_p(counts, totals, np.zeros(5, dtype=int), after)
    assert np.isclose(p[0], expected)


def test_strata_are_compared_within_task_only():
    """A task with a high rate in both checkpoints and a task with a low rate: the same counts in each
    checkpoint within each task give no evidence (z = 0), whatever the pooled mix of tasks."""
    counts = np.array([[8.0], [8.0], [8.0], [1.0], [1.0], [1.0]])
    totals = np.array([[10.0], [10.0], [10.0], [10.0], [10.0], [10.0]])
    task = np.array([0, 0, 0, 1, 1, 1])
    after = np.array([False, True, True, False, False, True])
    assert np.isclose(_cmh_p(counts, totals, task, after)[0], 1.0)


def test_event_features_move_the_share_of_rollouts_by_their_planted_shift():
    """The rollout-family scenarios' event features: their 'any' truth is the planted shift (alternating signs),
    and the realised change in the share of rollouts they fire in matches it (clipping near 0 or 1 can only
    shrink it a little)."""
    scenario = SCENARIOS["rollout_4x8"]
    rng = np.random.default_rng(3)
    realised = []
    for _ in range(40):
        data, truth, any_truth = simulate(scenario, rng)
        events = slice(truth.size - scenario.n_events, truth.size)
        fires = data.counts[ANY][:, events].toarray()
        after = data.is_after
        realised.append(fires[after].mean(axis=0) - fires[~after].mean(axis=0))
        assert np.isnan(truth[events]).all()
    planted = any_truth[-scenario.n_events :]
    assert np.allclose(planted, [0.3, -0.3, 0.3, -0.3])
    assert (any_truth[: scenario.n_text + scenario.n_tool] == 0).all()  # nothing else planted: null 'any' rows
    assert np.abs(np.mean(realised, axis=0) - planted).max() < 0.08
