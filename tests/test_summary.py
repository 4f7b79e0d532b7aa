"""The study summary: counts per checkpoint and a success rate whose CI is cluster-robust over tasks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from engine.stats.intervals import clustered_mean_ci
from engine.store import Store
from engine.store.queries import study_summary


def test_clustered_ci_by_hand() -> None:
    ci = clustered_mean_ci(np.array([3.0, 2.0, 3.0, 3.0]), np.array(["a", "a", "b", "b"]))
    # residual sums per task: -0.5 and 0.5; se = sqrt(0.5 * 2/1) / 4 = 0.25 on 1 degree of freedom
    half = stats.t.ppf(0.975, 1) * 0.25
    assert (ci.mean, ci.n) == (2.75, 4)
    assert ci.low == pytest.approx(2.75 - half) and ci.high == pytest.approx(2.75 + half)


def test_a_rate_interval_stays_within_0_and_1() -> None:
    """Two tasks give a t quantile of 12.7: unclipped, this success rate's CI would be 0.75 +- 3.2."""
    ci = clustered_mean_ci(np.array([1.0, 0.0, 1.0, 1.0]), np.array(["a", "a", "b", "b"]))
    assert (ci.mean, ci.low, ci.high) == (0.75, 0.0, 1.0)


def test_clustering_widens_the_interval() -> None:
    """Rollouts of a task that agree with each other carry less information than independent ones."""
    rng = np.random.default_rng(0)
    task_rate = rng.uniform(0, 1, 20)
    tasks = np.repeat(np.arange(20), 10)
    values = (rng.uniform(size=200) < task_rate[tasks]).astype(float)
    clustered = clustered_mean_ci(values, tasks)
    independent = clustered_mean_ci(values, np.arange(200))
    assert clustered.high - clustered.low > 1.5 * (independent.high - independent.low)


def test_single_task_has_no_interval() -> None:
    ci = clustered_mean_ci(np.array([1.0, 0.0]), np.array(["t", "t"]))
    assert math.isnan(ci.low) and math.isnan(ci.high)


def test_summary_of_the_sample_pair(tau2_store: Store) -> None:
    summary = study_summary(tau2_store.cursor())
    assert [c.checkpoint for c in summary.checkpoints] == ["standard", "tighter"]
    standard = summary.checkpoints[0]
    assert (standard.n_tasks, standard.n_rollouts, summary.n_shared_tasks) == (4, 66, 4)
    assert standard.mean_reward == pytest.approx(20 / 66)
    assert sum(standard.segments_by_kind.values()) == tau2_store.scalar(
        "SELECT count(*) FROM segments JOIN rollouts USING (rollout_key) WHERE checkpoint = 'standard'"
    )
