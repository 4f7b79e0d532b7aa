"""Bootstrap confidence intervals for prevalence deltas, resampling the design's units.

Many shared tasks: resample tasks with replacement (a task brings all its rollouts of both checkpoints),
so the interval speaks for new tasks like these. Few tasks (`CheckpointDesign.few_tasks`): resample
rollouts with replacement within each task and checkpoint, so the interval speaks for these tasks only.
Percentile intervals; every feature's replicates come from one matrix product per chunk.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from engine.stats.design import CheckpointDesign, as_float32, weighted_delta
from engine.stats.permutation import CHUNK_ELEMENTS, dense_columns


def _resample(units: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, units) weights: units - 1 draws with replacement, scaled by units / (units - 1).

    Drawing one fewer than the sample size makes the bootstrap variance of a mean unbiased (a plain
    bootstrap shrinks it by (units - 1) / units, a quarter with 4 rollouts a cell); a lone unit keeps weight 1.
    """
    if units == 1:
        return np.ones((n, 1))
    return rng.multinomial(units - 1, np.full(units, 1 / units), size=n) * (units / (units - 1))


def bootstrap_weights(design: CheckpointDesign, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, n_rollouts) float32 weight of each rollout in each bootstrap replicate."""
    if not design.few_tasks:
        return as_float32(_resample(design.n_tasks, n, rng)[:, design.task])
    weights = np.zeros((n, design.n_rollouts), dtype=np.float32)
    cell = design.task * 2 + design.is_after
    for code in np.unique(cell):
        members = np.flatnonzero(cell == code)
        weights[:, members] = _resample(members.size, n, rng)
    return weights


def bootstrap_ci(
    counts: np.ndarray | sp.sparray | sp.spmatrix,
    totals: np.ndarray,
    design: CheckpointDesign,
    rng: np.random.Generator,
    n_bootstrap: int,
    confidence: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of the pooled prevalence delta per feature: (ci_low, ci_high), (features,) each.

    counts: (n_rollouts, n_features) over the design's rollouts; totals (n_rollouts,) or like counts.
    Replicates with an undefined delta (a checkpoint without segments) are left out.
    """
    n_features = int(counts.shape[1])
    low, high = np.full(n_features, np.nan), np.full(n_features, np.nan)
    if n_features == 0 or design.n_rollouts == 0:
        return low, high
    weights = bootstrap_weights(design, n_bootstrap, rng)
    after = weights * as_float32(design.is_after)
    before = weights - after
    matrix = counts.tocsc() if sp.issparse(counts) else counts
    tail = (1 - confidence) / 2
    chunk = max(1, CHUNK_ELEMENTS // n_bootstrap)
    for start in range(0, n_features, chunk):
        stop = min(start + chunk, n_features)
        block = dense_columns(matrix, start, stop)
        block_totals = as_float32(totals if totals.ndim == 1 else totals[:, start:stop])
        replicates = weighted_delta(after, block, block_totals, before)
        defined = ~np.isnan(replicates).all(axis=0)
        if defined.any():
            bounds = np.nanquantile(replicates[:, defined], [tail, 1 - tail], axis=0)
            low[start:stop][defined], high[start:stop][defined] = bounds
    return low, high
