"""Benchmark: the vectorised within-task permutation test against per-feature loops, and hdbscan clustering.

    .venv/bin/python bench/stats.py [--features 20000] [--rollouts 2600] [--permutations 10000]

1. Vectorised: every feature's null (each rollout's rate, labels permuted within task) from one
   (permutations x rollouts) @ (rollouts x features) product, in chunks. Baselines in the same run, timed on a
   subset of features and extrapolated linearly (each feature is independent work in a loop): (a) a
   per-feature loop drawing its own within-task permutations and computing the statistic (what a per-feature
   call of a permutation-test routine does); (b)
   scipy.stats.permutation_test per feature, which cannot even respect tasks (it permutes freely).
2. Clustering: Jaccard co-activation over turns plus hdbscan for 2,000 significant features.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp
from scipy import stats

from engine import clusters
from engine.stats.design import CheckpointDesign
from engine.stats.permutation import PermutationBlock, permutation_pvalues


def simulate(rng: np.random.Generator, n_features: int, n_rollouts: int, per_task: int):
    """Counts of firing segments per rollout: tasks of `per_task` rollouts (half after), Poisson segments."""
    n_tasks = n_rollouts // per_task
    task = np.repeat(np.arange(n_tasks), per_task)
    is_after = np.tile(np.arange(per_task) >= per_task // 2, n_tasks)
    totals = rng.poisson(20, task.size) + 1
    rate = rng.beta(0.5, 8, n_features).astype(np.float32)
    counts = rng.binomial(totals[:, None], rate[None, :]).astype(np.float32)
    return counts, totals.astype(np.float32), is_after, task


def loop_pvalue(design: CheckpointDesign, counts: np.ndarray, totals: np.ndarray, rng, n_permutations: int):
    """Baseline (a): one feature at a time, its own permutations, the same statistic (the after-rollouts'
    sum of rates minus its within-task expectation)."""
    labels = design.permuted_labels(n_permutations, rng).astype(np.float64)
    rate = counts / totals
    centre = design.expected_after() @ rate
    null = np.abs(labels @ rate - centre)
    observed = abs(design.is_after.astype(np.float64) @ rate - centre)
    return (1 + np.sum(null >= observed * (1 - 1e-5))) / (n_permutations + 1)


def scipy_pvalue(counts: np.ndarray, totals: np.ndarray, is_after: np.ndarray, n_permutations: int, rng) -> float:
    """Baseline (b): scipy.stats.permutation_test on one feature (rollouts permuted freely)."""

    def statistic(rate_after, rate_before, axis):
        return rate_after.mean(axis=axis) - rate_before.mean(axis=axis)

    rate = counts / totals
    result = stats.permutation_test(
        (rate[is_after], rate[~is_after]),
        statistic,
        permutation_type="independent",
        n_resamples=n_permutations,
        vectorized=True,
        rng=rng,
    )
    return float(result.pvalue)


def bench_permutations(args: argparse.Namespace, rng: np.random.Generator) -> None:
    counts, totals, is_after, task = simulate(rng, args.features, args.rollouts, args.per_task)
    design = CheckpointDesign.from_labels(is_after, task)
    print(f"permutation test: {args.features:,} features x {args.rollouts:,} rollouts "
          f"({design.n_tasks} tasks) x {args.permutations:,} permutations")  # fmt: skip
    start = time.perf_counter()
    result = permutation_pvalues(PermutationBlock(counts, totals, design), rng, args.permutations)
    vectorised = time.perf_counter() - start
    print(f"  vectorised: {vectorised:.1f} s  ({args.features / vectorised:,.0f} features/s)")

    subset = args.loop_subset
    start = time.perf_counter()
    loop = [loop_pvalue(design, counts[:, j], totals, rng, args.permutations) for j in range(subset)]
    per_feature = (time.perf_counter() - start) / subset
    loop_total = per_feature * args.features
    agree = np.max(np.abs(np.array(loop) - result.p_value[:subset]))
    print(f"  per-feature loop, within task: {per_feature * 1000:.0f} ms/feature over {subset} features "
          f"-> {loop_total:,.0f} s for all; speedup {loop_total / vectorised:,.0f}x "
          f"(max |p difference| {agree:.3f}, Monte Carlo)")  # fmt: skip

    subset = args.scipy_subset
    start = time.perf_counter()
    for j in range(subset):
        scipy_pvalue(counts[:, j], totals, is_after, args.permutations, rng)
    per_feature = (time.perf_counter() - start) / subset
    scipy_total = per_feature * args.features
    print(f"  scipy.stats.permutation_test per feature (ignores tasks): {per_feature * 1000:.0f} ms/feature "
          f"-> {scipy_total:,.0f} s for all; speedup {scipy_total / vectorised:,.0f}x")  # fmt: skip


def bench_clusters(args: argparse.Namespace, rng: np.random.Generator) -> None:
    """2,000 significant features in behaviours of 1-20 features; a turn shows a behaviour's members."""
    n, n_turns = args.cluster_features, args.turns
    behaviour = np.sort(rng.integers(0, n // 10, n))
    rows, cols = [], []
    for b in np.unique(behaviour):
        members = np.flatnonzero(behaviour == b)
        turns = rng.choice(n_turns, size=int(rng.integers(50, 400)), replace=False)
        for j in members:  # each member fires in most of its behaviour's turns and a few others
            own = turns[rng.uniform(size=turns.size) < 0.7]
            noise = rng.choice(n_turns, size=int(rng.integers(5, 40)), replace=False)
            hits = np.union1d(own, noise)
            rows.append(hits)
            cols.append(np.full(hits.size, j))
    incidence = sp.csc_array(
        (np.ones(sum(r.size for r in rows)), (np.concatenate(rows), np.concatenate(cols))), shape=(n_turns, n)
    )
    start = time.perf_counter()
    distance = clusters.jaccard_distance(incidence)
    jaccard = time.perf_counter() - start
    start = time.perf_counter()
    labels, _ = clusters.cluster_labels(distance)
    fit = time.perf_counter() - start
    from sklearn.metrics import adjusted_rand_score  # installed with hdbscan

    found = np.unique(labels[labels >= 0]).size
    print(f"clustering: {n:,} significant features over {n_turns:,} turns: Jaccard {jaccard:.2f} s, "
          f"hdbscan {fit:.2f} s; {found} clusters, {np.mean(labels < 0):.0%} unclustered "
          f"({np.unique(behaviour).size} planted behaviours, adjusted Rand index "
          f"{adjusted_rand_score(behaviour, labels):.3f})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, default=20_000)
    parser.add_argument("--rollouts", type=int, default=2_600)
    parser.add_argument("--per-task", type=int, default=8, help="rollouts per task (half before, half after)")
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--loop-subset", type=int, default=20)
    parser.add_argument("--scipy-subset", type=int, default=5)
    parser.add_argument("--cluster-features", type=int, default=2_000)
    parser.add_argument("--turns", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    bench_permutations(args, rng)
    bench_clusters(args, rng)


if __name__ == "__main__":
    main()
