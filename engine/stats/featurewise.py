"""A Freedman-Lane contrast with one covariate per feature: the after-label residualised on task indicators and
on that feature's own within-task centred covariate.

`Contrast` shares one covariate set across a block of features, so one permuted label serves them all. When the
covariate is a feature's own model-based offset (rollout-level rows: its expected chance of firing anywhere given
its exposure and its task's per-segment rate), every feature has its own residualised label x_f = x0 - c_f z_f,
with x0 the within-task centred label, z_f the centred covariate and c_f = z_f'x0 / z_f'z_f. A permutation pi of
rollouts within tasks then gives, for every feature at once,

    (P x_f)' e_f = (P x0)' e_f - c_f (P z_f)' e_f,

the first term one matrix product as in `Contrast`, the second a gather of the covariates by the permutation's
indices. The observed statistic is x_f' y_f (x_f is orthogonal to the task indicators and to z_f).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from engine.stats.design import CheckpointDesign, as_float32

# Elements of one (permutations x rollouts x features) gather of covariates; float32, so about 64 MB at once.
GATHER_ELEMENTS = 16_000_000
# A covariate with less within-task variation than this (sum of squares) is left out for its feature.
MIN_VARIATION = 1e-12


@dataclass(frozen=True)
class FeatureContrast:
    """The after-label residualised on task and on each feature's own covariate, (n_rollouts, n_features)."""

    design: CheckpointDesign
    covariates: np.ndarray  # (n_rollouts, n_features), column f is feature f's covariate

    @cached_property
    def x0(self) -> np.ndarray:
        """(n_rollouts,) the label minus its task mean."""
        label = self.design.is_after.astype(np.float64)
        return label - self.design.task_means(label)

    @cached_property
    def z(self) -> np.ndarray:
        """(n_rollouts, n_features) within-task centred covariates; zero columns where one does not vary."""
        z = np.asarray(self.covariates, dtype=np.float64)
        z = z - self.design.task_means(z)
        z[:, (z**2).sum(axis=0) <= MIN_VARIATION] = 0.0
        return z

    @cached_property
    def zz(self) -> np.ndarray:
        """(n_features,) z_f'z_f, 1 where the covariate was left out (so its slopes are 0)."""
        zz = (self.z**2).sum(axis=0)
        return np.where(zz > 0, zz, 1.0)

    @cached_property
    def c(self) -> np.ndarray:
        """(n_features,) the label's slope on each covariate."""
        return (self.z.T @ self.x0) / self.zz

    @cached_property
    def x(self) -> np.ndarray:
        """(n_rollouts, n_features) each feature's residualised label."""
        return self.x0[:, None] - self.z * self.c

    @cached_property
    def xx(self) -> np.ndarray:
        return (self.x**2).sum(axis=0)

    @property
    def n_covariates(self) -> int:
        return 1

    def columns(self, start: int, stop: int) -> FeatureContrast:
        """The contrast of features start:stop only."""
        return FeatureContrast(self.design, self.covariates[:, start:stop])

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """(n, n_rollouts) rollout indices, each row a permutation within every task."""
        return self.design.permuted(np.arange(self.design.n_rollouts), n, rng).astype(np.int64)

    def gamma(self, y: np.ndarray) -> np.ndarray:
        """(n_features,) each feature's covariate slope in the reduced (null) model."""
        return (self.z * y).sum(axis=0) / self.zz

    def null_residuals(self, y: np.ndarray, gamma: np.ndarray) -> np.ndarray:
        """(n_rollouts, n_features) residuals of the reduced model (task means and own covariate, no label)."""
        return y - self.design.task_means(y) - self.z * gamma

    def observed(self, y: np.ndarray, gamma: np.ndarray) -> np.ndarray:
        """(n_features,) the observed statistic x_f' y_f in float64."""
        return (self.x * y).sum(axis=0)

    def statistic(self, index: np.ndarray, y: np.ndarray, gamma: np.ndarray) -> np.ndarray:
        """(n_permutations, n_features) (P x_f)' e_f for the permutations `index` (rows of `draw`)."""
        e = self.null_residuals(np.asarray(y, dtype=np.float64), gamma)
        stat = (as_float32(self.x0[index]) @ as_float32(e)).astype(np.float64)
        z, e32 = as_float32(self.z), as_float32(e)
        n_rollouts, n_features = e.shape
        step = max(1, GATHER_ELEMENTS // max(n_rollouts * n_features, 1))
        for start in range(0, index.shape[0], step):
            gathered = z[index[start : start + step]]  # (b, n_rollouts, n_features)
            stat[start : start + step] -= np.einsum("brf,rf->bf", gathered, e32) * self.c
        return stat

    def project(self, values: np.ndarray) -> np.ndarray:
        """(n_features,) x_f' v_f for (n_rollouts, n_features) values."""
        return (self.x * values).sum(axis=0)
