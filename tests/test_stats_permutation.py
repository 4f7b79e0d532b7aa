"""The within-task permutation test: exactness, design handling, chunking and refinement."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from engine.stats import permutation
from engine.stats.design import CheckpointDesign, as_float32
from engine.stats.fdr import bh_qvalues
from engine.stats.permutation import PermutationBlock, permutation_pvalues, refined_pvalues
from engine.stats.prevalence import test_prevalence
from tests.factories_stats import simulate


def _exact_pvalue(counts, totals, is_after, task) -> float:
    """Enumerate every within-task relabelling (small designs only)."""
    design = CheckpointDesign.from_labels(is_after, task)
    per_task = []
    for g in range(design.n_tasks):
        idx = np.flatnonzero(design.task == g)
        m = int(design.is_after[idx].sum())
        per_task.append([idx[list(c)] for c in itertools.combinations(range(idx.size), m)])
    labels = []
    for choice in itertools.product(*per_task):
        row = np.zeros(design.n_rollouts, dtype=np.float32)
        row[np.concatenate(choice)] = 1
        labels.append(row)
    # The statistic written out directly: each rollout's rate, after-sum minus its expectation within task.
    y = counts[design.keep] / totals[design.keep]
    centre = sum(y[design.task == g].mean() * design.is_after[design.task == g].sum() for g in range(design.n_tasks))
    null = np.abs(np.array(labels) @ y - centre)
    obs = abs(design.is_after.astype(float) @ y - centre)
    return float(np.mean(null >= obs * (1 - 1e-9)))


def test_monte_carlo_pvalue_matches_full_enumeration():
    rng = np.random.default_rng(3)
    task = np.repeat([0, 1, 2], 6)
    is_after = np.tile([0, 0, 0, 1, 1, 1], 3).astype(bool)
    totals = rng.integers(3, 9, task.size)
    counts = np.minimum(totals, rng.integers(0, 4, task.size) + 2 * is_after)
    exact = _exact_pvalue(counts, totals, is_after, task)  # 20**3 relabellings
    p = test_prevalence(counts[:, None], totals, is_after, task, rng, 20000).p_value[0]
    assert exact < 0.2
    assert p == pytest.approx(exact, abs=0.01)


def test_unbalanced_tasks_and_one_sided_tasks():
    """Unequal rollout counts per task are handled; tasks seen by one checkpoint change nothing."""
    rng = np.random.default_rng(4)
    task = np.array([0] * 5 + [1] * 7 + [2] * 4)
    is_after = np.array([0, 0, 1, 1, 1] + [0, 1, 1, 1, 1, 1, 1] + [1, 1, 1, 1], dtype=bool)
    totals = rng.integers(2, 10, task.size)
    counts = rng.binomial(totals[:, None], 0.3, (task.size, 4))
    counts[task == 2] = totals[task == 2, None]  # task 2 (after only) fires everywhere
    with_extra = test_prevalence(counts, totals, is_after, task, np.random.default_rng(1), 500)
    keep = task != 2
    without = test_prevalence(counts[keep], totals[keep], is_after[keep], task[keep], np.random.default_rng(1), 500)
    for field in ("prevalence_before", "prevalence_after", "delta", "p_value", "ci_low", "ci_high"):
        np.testing.assert_allclose(getattr(with_extra, field), getattr(without, field))


def test_labels_are_permuted_within_task_only():
    task = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    is_after = np.array([0, 1, 1, 0, 1, 0, 0, 1, 1], dtype=bool)
    design = CheckpointDesign.from_labels(is_after, task)
    labels = design.permuted_labels(500, np.random.default_rng(0))
    for g in range(3):
        in_task = labels[:, design.task == g]
        assert (in_task.sum(axis=1) == design.is_after[design.task == g].sum()).all()
        assert in_task.std(axis=0).min() > 0  # every rollout takes both labels sometimes


def test_no_shared_task_gives_nan():
    task = np.array([0, 0, 1, 1])
    is_after = np.array([0, 0, 1, 1], dtype=bool)
    result = test_prevalence(np.ones((4, 2)), np.ones(4), is_after, task, np.random.default_rng(0), 50)
    assert np.isnan(result.p_value).all() and np.isnan(result.delta).all()


def test_chunking_and_sparse_input_do_not_change_results(monkeypatch):
    data = simulate(np.random.default_rng(2), n_tasks=10, n_features=37)
    design = CheckpointDesign.from_labels(data.is_after, data.task)
    dense = PermutationBlock(as_float32(data.counts), as_float32(data.totals), design)
    reference = permutation_pvalues(dense, np.random.default_rng(9), 300)
    monkeypatch.setattr(permutation, "CHUNK_ELEMENTS", 1000)  # 3 features per chunk
    sparse = PermutationBlock(sp.csr_array(data.counts), as_float32(data.totals), design)
    chunked = permutation_pvalues(sparse, np.random.default_rng(9), 300)
    np.testing.assert_array_equal(reference.p_value, chunked.p_value)
    np.testing.assert_allclose(reference.observed, chunked.observed)


def test_plus_one_correction_and_constant_features():
    data = simulate(np.random.default_rng(6), n_tasks=30, n_features=3)
    counts = data.counts.copy()
    counts[:, 0] = data.totals * data.is_after  # fires in every after segment, never before
    counts[:, 1] = 0  # never fires: undefined ratio? no: 0/total = 0 on both sides
    design = CheckpointDesign.from_labels(data.is_after, data.task)
    result = permutation_pvalues(
        PermutationBlock(counts, as_float32(data.totals), design), np.random.default_rng(0), 199
    )
    assert result.p_value[0] == pytest.approx(1 / 200)
    assert result.p_value[1] == 1.0


def test_refinement_lifts_the_monte_carlo_floor_only_where_it_binds():
    rng = np.random.default_rng(7)
    data = simulate(rng, n_tasks=40, n_features=400, shift=0.3, shifted_features=3, shifted_tasks=40)
    design = CheckpointDesign.from_labels(data.is_after, data.task)
    block = PermutationBlock(as_float32(data.counts), as_float32(data.totals), design)
    coarse = permutation_pvalues(block, np.random.default_rng(1), 99)
    # 99 permutations: floor 0.01, BH over 400 tests needs <= 0.05 * 3 / 400: nothing can be found.
    assert coarse.p_value[:3].min() == pytest.approx(0.01)
    [refined] = refined_pvalues([block], np.random.default_rng(1), 99, fdr=0.05, max_permutations=99_000)
    # Sequential Monte Carlo: a planted feature never exceeds, so it draws up to the cap (here the budget,
    # under 10 * 400 / 0.05), whatever BH says; its p-value counts all its draws.
    assert (bh_qvalues(refined.p_value)[:3] < 0.05).all()
    np.testing.assert_allclose(refined.p_value[:3], 1 / 99_001)
    assert (refined.n_permutations[:3] == 99_000).all()
    # Null features leave the refinement once they have MIN_EXCEEDANCES exceedances.
    assert (refined.n_permutations[3:] == 99).mean() > 0.8
    assert (refined.n_permutations[3:] <= 990).mean() > 0.97
    done = refined.n_permutations < 99_000
    assert (refined.exceedances[done] >= permutation.MIN_EXCEEDANCES).all()
    np.testing.assert_array_equal(refined.observed, coarse.observed)


def test_refinement_stops_at_the_family_cap():
    """A small family needs no finer resolution than ten times its smallest BH threshold."""
    data = simulate(np.random.default_rng(8), n_tasks=30, n_features=4, shift=0.3, shifted_features=2, shifted_tasks=30)
    design = CheckpointDesign.from_labels(data.is_after, data.task)
    block = PermutationBlock(as_float32(data.counts), as_float32(data.totals), design)
    [refined] = refined_pvalues([block], np.random.default_rng(2), 99, fdr=0.05, max_permutations=99_000)
    assert refined.n_permutations[:2].max() == 990  # cap 10 * 4 / 0.05 = 800: one round past it, then stop


def _borderline_feature(low: float, high: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """One task of 8 + 8 rollouts and one feature whose exact permutation p lies in [low, high]."""
    task = np.zeros(16, dtype=int)
    is_after = np.repeat([False, True], 8)
    for seed in range(500):
        rng = np.random.default_rng(seed)
        totals = rng.integers(3, 9, 16)
        counts = rng.binomial(totals, np.where(is_after, 0.45, 0.25))
        exact = _exact_pvalue(counts, totals, is_after, task)  # 12,870 relabellings
        if low <= exact <= high:
            return counts[:, None], totals, is_after, task, exact
    raise AssertionError("no borderline feature drawn")


def test_a_decision_near_the_bh_boundary_is_settled_whatever_the_draws():
    """A feature with exact p = 0.04-0.046 alone in its family (boundary 0.05): at 10 exceedances (the floor
    rule's stop, about 2,000 permutations) its estimate is known to about 10%, and whether it is significant
    would turn on the draws; settling draws on until the interval clears the boundary, so every stream
    decides as the exact p does."""
    counts, totals, is_after, task, exact = _borderline_feature(0.04, 0.046)
    block = PermutationBlock(counts, totals, CheckpointDesign.from_labels(is_after, task))
    for seed in range(12):
        [result] = refined_pvalues([block], np.random.default_rng(seed), 199, fdr=0.05, max_permutations=199_000)
        assert result.n_permutations[0] > 1990, seed  # past where the floor rule stops
        assert result.p_value[0] < 0.05 and result.p_value[0] == pytest.approx(exact, rel=0.05), seed


def test_unsettled_reaches_the_band_between_the_families_thresholds():
    """With R of m rejected, a feature is unsettled when its interval meets [fdr R / m, fdr (R + 1) / m]."""
    p = np.array([1e-4, 0.012, 0.0305, 0.5, 0.045])  # one family of 5: BH rejects 2 (0.012 <= 0.05 * 2 / 5)
    n = np.full(5, 100_000)
    settled = permutation.unsettled(p, np.round(p * n).astype(np.int64), n, np.zeros(5, dtype=int), 0.05)
    assert settled.tolist() == [False, False, True, False, False]  # 0.0305 +- 0.0014 meets the band [0.02, 0.03]
    few = permutation.unsettled(p, np.round(p * 1000).astype(np.int64), np.full(5, 1000), np.zeros(5, int), 0.05)
    assert few.tolist() == [False, True, True, False, True]  # at 1,000 draws 0.012 and 0.045 could be in it too
