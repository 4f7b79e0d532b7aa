"""Permutation p-values for prevalence deltas: checkpoint labels permuted among rollouts within each task.

Every feature's null distribution comes from one matrix product, (permutations x rollouts) @ (rollouts x
features), in chunks of permutations and features so memory stays bounded whatever the sizes. Segments stay
with their rollout: a rollout's counts move as a whole when its label moves.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from engine.stats.design import CheckpointDesign, as_float32, weighted_delta
from engine.stats.fdr import bh_qvalues

log = logging.getLogger(__name__)

# Elements of one (permutations x features) block; a handful of float64 temporaries of this size are alive
# at once, so 4M elements keep a chunk near 200 MB whatever the problem size (213 MB measured, bench/stats.py).
CHUNK_ELEMENTS = 4_000_000
PERMUTATION_CHUNK = 1000
# A p-value resting on fewer exceedances than this is at the Monte Carlo floor and may be refined.
MIN_EXCEEDANCES = 10
# Relative tolerance under which a permuted deviation counts as a tie with the observed one.
TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class PermutationResult:
    """Observed deltas and two-sided permutation p-values, (features,) each."""

    observed: np.ndarray
    p_value: np.ndarray
    exceedances: np.ndarray
    n_permutations: np.ndarray


@dataclass(frozen=True)
class PermutationBlock:
    """Features sharing one design: counts (rollouts x features, dense or sparse), totals; kept rows."""

    counts: np.ndarray | sp.sparray | sp.spmatrix
    totals: np.ndarray
    design: CheckpointDesign

    @property
    def n_features(self) -> int:
        return int(self.counts.shape[1])


def dense_columns(counts: np.ndarray | sp.sparray | sp.spmatrix, start: int, stop: int) -> np.ndarray:
    """Columns start:stop of a dense or sparse matrix as dense float32."""
    block = counts[:, start:stop]
    return as_float32(block.toarray() if sp.issparse(block) else block)


def _totals_columns(totals: np.ndarray, start: int, stop: int) -> np.ndarray:
    return as_float32(totals if totals.ndim == 1 else totals[:, start:stop])


def permutation_pvalues(block: PermutationBlock, rng: np.random.Generator, n_permutations: int) -> PermutationResult:
    """Two-sided within-task permutation test of the pooled prevalence delta for every feature of `block`.

    A permuted delta counts as at least as extreme when its distance from the null centre (the delta at
    each rollout's expected label) is at least the observed distance; permutations whose prevalence is
    undefined count as extreme (conservative). p = (exceedances + 1) / (n_permutations + 1).
    """
    design = block.design
    n_features = block.n_features
    matrix = block.counts.tocsc() if sp.issparse(block.counts) else block.counts
    labels_observed = as_float32(design.is_after)[None, :]
    labels_expected = as_float32(design.expected_after())[None, :]
    observed = np.empty(n_features)
    distance = np.empty(n_features)
    feature_chunk = max(1, CHUNK_ELEMENTS // min(PERMUTATION_CHUNK, max(n_permutations, 1)))
    spans = [(s, min(s + feature_chunk, n_features)) for s in range(0, n_features, feature_chunk)]
    centres = []
    for start, stop in spans:
        counts = dense_columns(matrix, start, stop)
        totals = _totals_columns(block.totals, start, stop)
        observed[start:stop] = weighted_delta(labels_observed, counts, totals)[0]
        centre = weighted_delta(labels_expected, counts, totals)[0]
        distance[start:stop] = np.abs(observed[start:stop] - centre)
        centres.append(centre)
    exceed = np.zeros(n_features, dtype=np.int64)
    done = 0
    while done < n_permutations:
        n = min(PERMUTATION_CHUNK, n_permutations - done)
        labels = design.permuted_labels(n, rng)
        for (start, stop), centre in zip(spans, centres, strict=True):
            counts = dense_columns(matrix, start, stop)
            totals = _totals_columns(block.totals, start, stop)
            null = np.abs(weighted_delta(labels, counts, totals) - centre)
            bar = distance[start:stop] * (1 - TIE_TOLERANCE)
            exceed[start:stop] += ((null >= bar) | np.isnan(null)).sum(axis=0)
        done += n
    p = (exceed + 1) / (n_permutations + 1)
    p[np.isnan(observed)] = np.nan
    return PermutationResult(observed, p, exceed, np.full(n_features, n_permutations))


def refined_pvalues(
    blocks: Sequence[PermutationBlock],
    rng: np.random.Generator,
    n_permutations: int,
    *,
    fdr: float,
    max_permutations: int,
) -> list[PermutationResult]:
    """Permutation p-values for several blocks tested together, refined where the Monte Carlo floor binds.

    With m tests, Benjamini-Hochberg needs p near fdr * k / m, far below the floor 1 / (B + 1) of B
    permutations when m is large. After a first round of `n_permutations`, features with fewer than
    MIN_EXCEEDANCES exceedances that BH does not already reject are re-tested with ten times as many fresh
    permutations, up to `max_permutations`. Each refined p-value comes from its fresh permutations alone,
    which are independent of the selection, so it stays a valid p-value.
    """
    results = [permutation_pvalues(block, rng, n_permutations) for block in blocks]
    if not results:
        return results
    offsets = np.cumsum([0] + [block.n_features for block in blocks])
    p = np.concatenate([r.p_value for r in results])
    exceed = np.concatenate([r.exceedances for r in results])
    n_used = np.full(p.size, n_permutations)
    n_next = n_permutations * 10
    while n_next <= max_permutations:
        q = bh_qvalues(p)
        candidates = (exceed < MIN_EXCEEDANCES) & ~(q < fdr) & ~np.isnan(p)
        if not candidates.any():
            break
        log.info("refining %d p-values with %d permutations", int(candidates.sum()), n_next)
        for i, block in enumerate(blocks):
            columns = np.flatnonzero(candidates[offsets[i] : offsets[i + 1]])
            if columns.size == 0:
                continue
            sub = PermutationBlock(_select_columns(block.counts, columns), _select_totals(block, columns), block.design)
            fresh = permutation_pvalues(sub, rng, n_next)
            p[offsets[i] + columns] = fresh.p_value
            exceed[offsets[i] + columns] = fresh.exceedances
            n_used[offsets[i] + columns] = n_next
        n_next *= 10
    return [
        PermutationResult(r.observed, *(a[offsets[i] : offsets[i + 1]] for a in (p, exceed, n_used)))
        for i, r in enumerate(results)
    ]


def _select_columns(counts: np.ndarray | sp.sparray | sp.spmatrix, columns: np.ndarray):
    return counts.tocsc()[:, columns] if sp.issparse(counts) else counts[:, columns]


def _select_totals(block: PermutationBlock, columns: np.ndarray) -> np.ndarray:
    return block.totals if block.totals.ndim == 1 else block.totals[:, columns]
