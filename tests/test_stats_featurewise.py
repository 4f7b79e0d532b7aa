"""The per-feature Freedman-Lane contrast agrees, feature by feature, with the shared-covariate one."""

from __future__ import annotations

import numpy as np

from engine.stats.design import CheckpointDesign
from engine.stats.featurewise import FeatureContrast
from engine.stats.rates import Contrast, effects


def _design(rng: np.random.Generator) -> CheckpointDesign:
    task = np.repeat(np.arange(12), 7)
    is_after = rng.random(task.size) < 0.5
    is_after[::7], is_after[1::7] = True, False  # both checkpoints in every task
    return CheckpointDesign.from_labels(is_after, task)


def test_statistics_and_effects_match_one_contrast_per_feature() -> None:
    rng = np.random.default_rng(3)
    design = _design(rng)
    n = design.n_rollouts
    offsets = rng.random((n, 4))
    offsets[:, 3] = 0.5  # no variation: that feature is tested without a covariate
    y = (rng.random((n, 4)) < offsets * 0.8).astype(np.float64)
    featurewise = FeatureContrast(design, offsets)
    index = featurewise.draw(50, rng)
    gamma = featurewise.gamma(y)
    stat = featurewise.statistic(index, y, gamma)
    both = effects(featurewise, y, by_task=True)
    for f in range(4):
        covariate = None if f == 3 else offsets[:, f : f + 1]
        one = Contrast(design, covariate)
        yf = y[:, f : f + 1]
        np.testing.assert_allclose(featurewise.observed(y, gamma)[f], one.observed(yf, one.gamma(yf))[0])
        np.testing.assert_allclose(stat[:, f], one.statistic(one.x[index], yf, one.gamma(yf))[:, 0], atol=1e-5)
        single = effects(one, yf, by_task=True)
        np.testing.assert_allclose([both.estimate[f], both.se[f]], [single.estimate[0], single.se[0]])


def test_draw_permutes_within_tasks() -> None:
    rng = np.random.default_rng(0)
    design = _design(rng)
    index = FeatureContrast(design, np.zeros((design.n_rollouts, 1))).draw(20, rng)
    assert all(np.array_equal(np.sort(row), np.arange(design.n_rollouts)) for row in index)
    assert (design.task[index] == design.task[None, :]).all()
