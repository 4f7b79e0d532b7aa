"""The closed-form permutation standard error and the minimum detectable effect."""

from __future__ import annotations

import numpy as np
import pytest

from engine.stats.design import CheckpointDesign
from engine.stats.power import minimum_detectable_effect, permutation_se
from engine.stats.prevalence import test_prevalence
from tests.factories_stats import simulate


def _design(data) -> CheckpointDesign:
    return CheckpointDesign.from_labels(data.is_after, data.task)


def test_closed_form_se_matches_the_permutation_distribution():
    rng = np.random.default_rng(0)
    data = simulate(rng, n_tasks=25, n_features=40)
    design = _design(data)
    se = permutation_se(data.counts, data.totals, design)
    # The null distribution of the effect, drawn directly: each rollout's rate, within-task relabelling.
    y = data.counts / data.totals[:, None]
    labels = design.permuted_labels(4000, rng).astype(np.float64)
    n_after = np.bincount(design.task, weights=design.is_after)
    n_all = np.bincount(design.task)
    centred = labels - (n_after / n_all)[design.task]
    null = centred @ y / (n_after * (n_all - n_after) / n_all).sum()
    np.testing.assert_allclose(se, null.std(axis=0), rtol=0.1)


def test_mde_shrinks_with_more_tasks_and_a_planted_mde_is_mostly_found():
    rng = np.random.default_rng(1)
    small = simulate(rng, n_tasks=10, n_features=50)
    large = simulate(rng, n_tasks=40, n_features=50)
    mde_small = minimum_detectable_effect(small.counts, small.totals, _design(small))
    mde_large = minimum_detectable_effect(large.counts, large.totals, _design(large))
    assert np.median(mde_large) < 0.7 * np.median(mde_small)
    # Plant a shift of the median MDE (as a probability shift in every task): power should be near 80%.
    shift = float(np.median(mde_large))
    planted = simulate(
        np.random.default_rng(2), n_tasks=40, n_features=200, shift=shift, shifted_features=200, shifted_tasks=40
    )
    p = test_prevalence(planted.counts, planted.totals, planted.is_after, planted.task, np.random.default_rng(3), 499)
    assert 0.6 <= np.mean(p.p_value < 0.05) <= 0.95


def test_rejects_bad_levels_and_empty_designs():
    data = simulate(np.random.default_rng(0), n_tasks=3, n_features=2)
    with pytest.raises(ValueError):
        minimum_detectable_effect(data.counts, data.totals, _design(data), power=1.0)
    one_sided = CheckpointDesign.from_labels(np.zeros_like(data.is_after), data.task)
    assert np.isnan(permutation_se(data.counts[:0], data.totals[:0], one_sided)).all()
