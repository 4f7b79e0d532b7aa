"""Calibration by replication with binomial bounds: many independent tests, so a miscalibrated method fails.

Features of `tests.factories_stats.simulate` are independent given the design, so their tests are independent
Bernoulli trials and binomial bounds apply. Each bound is set so a calibrated method fails with probability
below 0.3% and the miscalibration the issue measured (size 7%, coverage 85-91.5%) passes with probability below
1%. The full scenarios, with correlated features, run in bench/calibration.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bench.calibration import SCENARIOS, run_study
from engine.stats.prevalence import pooled_shares, test_prevalence
from tests.factories_stats import simulate

pytestmark = pytest.mark.slow


def _size_bound(n: int) -> int:
    """Largest count of p < 0.05 accepted out of n null tests: the 99.7% binomial quantile at 5%."""
    return int(stats.binom.ppf(0.997, n, 0.05))


def test_length_only_change_is_at_nominal_size():
    """After-rollouts 1.6x longer, same per-segment rates: 4,000 independent null tests."""
    rng = np.random.default_rng(20)
    p = []
    for _ in range(10):
        data = simulate(rng, n_tasks=40, rollouts_per_checkpoint=4, n_features=400, after_length=1.6)
        p.append(test_prevalence(data.counts, data.totals, data.is_after, data.task, rng, 499).p_value)
    p = np.concatenate(p)
    assert (p < 0.05).sum() <= _size_bound(p.size)  # 5.9% of 4,000: a true 7% passes with probability < 1%


def test_intervals_cover_at_ten_tasks():
    """1,000 independent 95% intervals at 10 tasks x 4+4 with a planted shift of 0.1 in every task."""
    rng = np.random.default_rng(21)
    covered, total = 0, 0
    for _ in range(10):
        data = simulate(rng, n_tasks=10, n_features=100, rollouts_per_checkpoint=4, shift=0.1, shifted_features=100,
                        shifted_tasks=10)  # fmt: skip
        result = test_prevalence(data.counts, data.totals, data.is_after, data.task, rng, 99)
        covered += int(((result.ci_low <= 0.1) & (0.1 <= result.ci_high)).sum())
        total += 100
    # 99.7% lower binomial bound at 95%: 93.3%; a true 91.5% passes with probability < 1%.
    assert covered >= stats.binom.ppf(0.003, total, 0.95)


def test_pooled_share_moves_with_task_varying_length_and_the_rate_does_not():
    """4 tasks x 16+16, the length change differing by task and tied to its rate (the tau2 shape)."""
    rng = np.random.default_rng(22)
    n_tasks, k = 4, 16
    task = np.repeat(np.arange(n_tasks), 2 * k)
    is_after = np.tile(np.r_[np.zeros(k, bool), np.ones(k, bool)], n_tasks)
    base = np.array([0.05, 0.15, 0.3, 0.45])
    length = np.where(is_after, np.array([1.0, 1.5, 2.2, 3.0])[task], 1.0)
    deltas, pooled = [], []
    for _ in range(200):
        totals = rng.poisson(10 * length) + 1
        counts = rng.binomial(totals, base[task])[:, None]
        result = test_prevalence(counts, totals, is_after, task, rng, 9)
        deltas.append(result.delta[0])
        before, after = pooled_shares(counts.astype(float), totals.astype(float), is_after)
        pooled.append(after[0] - before[0])
    # The rate estimand is unbiased (its mean within 3 standard errors of 0); the pooled share drifts upward.
    deltas, pooled = np.array(deltas), np.array(pooled)
    assert abs(deltas.mean()) < 3 * deltas.std() / np.sqrt(deltas.size)
    assert pooled.mean() > 0.03


@pytest.mark.parametrize("scenario", ["length", "task_length", "composition"])
def test_length_and_composition_through_compute_deltas(scenario):
    """The bench's scenarios through the real stage function: the 'any' rows (length-adjusted, also when the
    length change differs by task) and the tool-call rows (rates among calls to the same tool) hold their
    size. Rows of one study are correlated, so the bound is loose; it still fails the unadjusted statistics
    (58% and about 100% in the issue)."""
    rng = np.random.default_rng(23)
    rows = [run_study(SCENARIOS[scenario], rng, 199)[0] for _ in range(15)]
    for family in ("rollout", "latent_rollout", "structural"):
        p = np.concatenate([r.filter(r["family"] == family)["p_value"].to_numpy() for r in rows])
        assert p.size > 150 and (p < 0.05).mean() <= 0.09, (family, (p < 0.05).mean())
