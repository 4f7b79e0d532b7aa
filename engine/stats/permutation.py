"""Permutation p-values for checkpoint effects on rollout rates: labels permuted among rollouts within each task.

Every feature's null distribution comes from one matrix product, (permutations x rollouts) @ (rollouts x
features), in chunks of permutations and features so memory stays bounded whatever the sizes. Segments stay
with their rollout: a rollout's rate moves as a whole when its label moves.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from scipy import stats

from engine.stats.design import CheckpointDesign, as_float32
from engine.stats.fdr import bh_qvalues
from engine.stats.rates import Contrast, Matrix, rollout_rates

log = logging.getLogger(__name__)

# Elements of one (permutations x features) block; a handful of float64 temporaries of this size are alive
# at once, so 4M elements keep a chunk near 200 MB whatever the problem size (213 MB measured, bench/stats.py).
CHUNK_ELEMENTS = 4_000_000
PERMUTATION_CHUNK = 1000
# A p-value resting on fewer exceedances than this is at the Monte Carlo floor and may be refined.
MIN_EXCEEDANCES = 10
# A feature's Benjamini-Hochberg decision is settled when this Clopper-Pearson interval of its exceedance rate
# stays on one side of its family's boundary (`unsettled`).
SETTLE_CONFIDENCE = 0.99
# Relative tolerance under which a permuted statistic counts as a tie with the observed one: the products
# run in float32 (relative rounding near 1e-7 over a few hundred terms), so equal sums taken in another order
# must still tie.
TIE_TOLERANCE = 1e-5


@dataclass(frozen=True)
class PermutationResult:
    """Observed deltas and two-sided permutation p-values, (features,) each."""

    observed: np.ndarray
    p_value: np.ndarray
    exceedances: np.ndarray
    n_permutations: np.ndarray


@dataclass(frozen=True)
class PermutationBlock:
    """Features sharing one design: counts (rollouts x features, dense or sparse) and totals over the design's
    rollouts (1-d: segments of the kind, all positive; 2-d: a denominator per feature)."""

    counts: Matrix
    totals: np.ndarray
    design: CheckpointDesign

    @classmethod
    def of_rates(cls, rates: Matrix, design: CheckpointDesign) -> PermutationBlock:
        """A block of rates computed elsewhere (e.g. stratified over tools): the rates with totals of 1."""
        return cls(rates, np.ones(design.n_rollouts), design)

    @property
    def n_features(self) -> int:
        return int(self.counts.shape[1])

    @cached_property
    def rates(self) -> Matrix:
        return rollout_rates(self.counts, self.totals, self.design)

    @cached_property
    def contrast(self) -> Contrast:
        return Contrast(self.design)

    def select(self, columns: np.ndarray) -> PermutationBlock:
        """The block of `columns` only."""
        dense = isinstance(self.counts, np.ndarray)
        counts = self.counts[:, columns] if dense else sp.csc_array(self.counts)[:, columns]
        totals = self.totals if self.totals.ndim == 1 else self.totals[:, columns]
        return PermutationBlock(counts, totals, self.design)


def dense_columns(counts: Matrix, start: int, stop: int) -> np.ndarray:
    """Columns start:stop of a dense or sparse matrix as dense float64."""
    block = counts[:, start:stop]
    return np.asarray(block if isinstance(block, np.ndarray) else block.toarray(), dtype=np.float64)


def feature_spans(n_features: int, rows: int) -> list[tuple[int, int]]:
    """Column spans of at most CHUNK_ELEMENTS // rows features each."""
    chunk = max(1, CHUNK_ELEMENTS // max(rows, 1))
    return [(s, min(s + chunk, n_features)) for s in range(0, n_features, chunk)]


def permutation_pvalues(block: PermutationBlock, rng: np.random.Generator, n_permutations: int) -> PermutationResult:
    """Two-sided within-task permutation test of every feature's checkpoint effect on rollout rates.

    The statistic is x @ residual(y) with x the residualised label (`Contrast`); its null centre is 0. A
    permuted statistic at least as far from 0 as the observed one counts as an exceedance;
    p = (exceedances + 1) / (n_permutations + 1). `observed` is the effect (statistic / x'x).
    """
    design, contrast = block.design, block.contrast
    n_features = block.n_features
    rates = block.rates if isinstance(block.rates, np.ndarray) else sp.csc_array(block.rates)
    observed = np.full(n_features, np.nan)
    spans = feature_spans(n_features, min(PERMUTATION_CHUNK, max(n_permutations, 1)))
    exceed = np.zeros(n_features, dtype=np.int64)
    if design.n_rollouts == 0 or contrast.xx <= 1e-12:
        return PermutationResult(observed, np.full(n_features, np.nan), exceed, np.zeros(n_features, np.int64))
    columns = []
    for start, stop in spans:
        y = dense_columns(rates, start, stop)
        stat = contrast.observed(y)
        observed[start:stop] = stat / contrast.xx
        columns.append((as_float32(y), np.abs(stat) * (1 - TIE_TOLERANCE)))
    done = 0
    while done < n_permutations:
        n = min(PERMUTATION_CHUNK, n_permutations - done)
        permuted = design.permuted(contrast.x, n, rng)
        for (start, stop), (y, bar) in zip(spans, columns, strict=True):
            exceed[start:stop] += (np.abs(contrast.statistic(permuted, y)) >= bar).sum(axis=0)
        done += n
    p = (exceed + 1) / (n_permutations + 1)
    return PermutationResult(observed, p, exceed, np.full(n_features, n_permutations))


def refined_pvalues(
    blocks: Sequence[PermutationBlock],
    rng: np.random.Generator,
    n_permutations: int,
    *,
    fdr: float,
    max_permutations: int,
    families: Sequence[np.ndarray] | None = None,
) -> list[PermutationResult]:
    """Permutation p-values for several blocks tested together, refined where the Monte Carlo floor binds.

    With m tests, Benjamini-Hochberg needs p near fdr * k / m, far below the floor 1 / (B + 1) of B
    permutations when m is large. Sequential Monte Carlo (Besag and Clifford, 1991): a feature keeps drawing
    permutations, in rounds growing tenfold up to `max_permutations`, until it has MIN_EXCEEDANCES
    exceedances; its p-value is (exceedances + 1) / (permutations + 1) over all its draws. Whether a feature
    continues depends on its own exceedances only. (Continuing only the features BH has not yet rejected, as an
    earlier version did, gives boundary features a second chance: 8.5% of clean null studies then had a false
    finding in a 20-test family instead of 5%.) A feature also stops once its resolution is ten times finer
    than the smallest threshold BH can use in its family (fdr / m_family; `families` labels each block's
    columns, one family when None): a cap fixed before any draw, so it keeps the p-values valid.

    Then the decisions are settled: a feature whose BH decision in its family the Monte Carlo error could still
    flip (`unsettled`: its interval reaches the family's boundary) draws again up to ten times the permutations
    it has, at most `max_permutations`, on either side of the boundary alike, until none is unsettled. At 10
    exceedances a p-value is known to about 30%, so whether a feature near the boundary was validated turned on
    the draws; refining both sides moves the decisions toward those of the exact permutation p-values, which BH
    controls (refining only the side not yet rejected was the two-chances rule above).
    """
    results = [permutation_pvalues(block, rng, n_permutations) for block in blocks]
    if not results:
        return results
    offsets = np.cumsum([0] + [block.n_features for block in blocks])
    exceed = np.concatenate([r.exceedances for r in results])
    n_used = np.concatenate([r.n_permutations for r in results])
    p = np.concatenate([r.p_value for r in results])
    family = np.concatenate(families) if families else np.zeros(p.size, dtype=np.int64)
    names, code = np.unique(family, return_inverse=True)
    m_family = np.bincount(code, weights=np.isfinite(p), minlength=names.size)[code]
    cap = np.minimum(max_permutations, MIN_EXCEEDANCES * m_family / fdr)
    n_next = n_permutations * 10
    while n_next <= max_permutations:
        candidates = (exceed < MIN_EXCEEDANCES) & (n_used < cap) & ~np.isnan(p)
        if not candidates.any():
            break
        log.info("refining %d p-values up to %d permutations", int(candidates.sum()), n_next)
        for i, block in enumerate(blocks):
            columns = np.flatnonzero(candidates[offsets[i] : offsets[i + 1]])
            if columns.size == 0:
                continue
            extra = permutation_pvalues(block.select(columns), rng, n_next - n_permutations)
            exceed[offsets[i] + columns] += extra.exceedances
            n_used[offsets[i] + columns] = n_next
        n_permutations = n_next
        p = np.where(np.isnan(p), np.nan, (exceed + 1) / (n_used + 1))
        n_next *= 10
    while (todo := unsettled(p, exceed, n_used, code, fdr) & (n_used < max_permutations)).any():
        log.info("settling %d p-values near their families' BH boundary", int(todo.sum()))
        for i, block in enumerate(blocks):
            columns = np.flatnonzero(todo[offsets[i] : offsets[i + 1]])
            for n in np.unique(n_used[offsets[i] + columns]):  # each draws up to ten times what it has
                chosen = columns[n_used[offsets[i] + columns] == n]
                target = min(max_permutations, 10 * int(n))
                extra = permutation_pvalues(block.select(chosen), rng, target - int(n))
                exceed[offsets[i] + chosen] += extra.exceedances
                n_used[offsets[i] + chosen] = target
        p = np.where(np.isnan(p), np.nan, (exceed + 1) / (n_used + 1))
    return [
        PermutationResult(r.observed, *(a[offsets[i] : offsets[i + 1]] for a in (p, exceed, n_used)))
        for i, r in enumerate(results)
    ]


def unsettled(p: np.ndarray, exceed: np.ndarray, n_used: np.ndarray, family: np.ndarray, fdr: float) -> np.ndarray:
    """Features whose Benjamini-Hochberg decision in their family the Monte Carlo error could flip: with R of
    the family's m finite p-values rejected, the boundary lies between fdr R / m (the last rejected p is at
    most this) and fdr (R + 1) / m (the next would need this), and a feature is unsettled when the
    SETTLE_CONFIDENCE Clopper-Pearson interval of its exceedance rate reaches that band."""
    alpha = 1 - SETTLE_CONFIDENCE
    finite = np.isfinite(p)
    e, n = exceed.astype(np.float64), n_used.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(e > 0, stats.beta.ppf(alpha / 2, e, n - e + 1), 0.0)
        high = np.where(e < n, stats.beta.ppf(1 - alpha / 2, e + 1, n - e), 1.0)
    out = np.zeros(p.size, dtype=bool)
    for name in np.unique(family[finite]):
        rows = finite & (family == name)
        m = int(rows.sum())
        rejected = int((bh_qvalues(p[rows]) < fdr).sum())
        out[rows] = (low[rows] <= fdr * (rejected + 1) / m) & (high[rows] >= fdr * rejected / m)
    return out
