"""Benchmark: coverage of the labeler-corrected delta (`rldiff hypothesis calibrate`) by replication.

    .venv/bin/python bench/labeler_calibration.py [--studies 300] [--seed 1]

Each study: tasks x rollouts per checkpoint, each rollout with 5 to 40 labelled segments whose true rate
varies by task and by rollout (so a rollout's segments are not independent), +0.1 in every task after; a
labeler that misses 20% of positives and whose false positives differ by checkpoint (5% before, 25% after);
judge-style sampling weights (a quarter of the segments of every fifth task, weight 4); a hand sample of a
fixed size per (checkpoint, verdict) stratum. Printed per row: the coverage of the true delta of the estimand
(the mean over all studies of the true labels' held-out delta) by the shipped interval
(`engine.hypotheses.calibration.corrected_delta`) and, in the same run, by a reference that corrects the
pooled share of segments with every segment an independent unit (rollout clustering left out), with their mean
widths and the labeler's own, uncorrected delta.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
from scipy import stats

from engine.hypotheses.calibration import RolloutRates, checkpoint_estimate, corrected_delta, weighted_share

TRUE_DELTA = 0.1
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Side:
    """One checkpoint's labelled segments (labeler verdict, truth, weight) and its hand sample's indices."""

    verdict: np.ndarray
    truth: np.ndarray
    weight: np.ndarray
    hand: np.ndarray


@dataclass(frozen=True)
class Study:
    rates: RolloutRates  # the labeler's counts per rollout
    true_rates: RolloutRates  # the same rollouts' true-label counts
    sides: tuple[Side, Side]


def simulate(
    rng: np.random.Generator,
    *,
    n_tasks: int = 20,
    per_cell: int = 4,
    rollout_sd: float = 0.1,
    hand: int = 30,
    bases: tuple[float, float] = (0.2, 0.3),
    false_positives: tuple[float, float] = (0.05, 0.25),
) -> Study:
    """One study (module docstring): `bases` the checkpoints' mean true rates, `hand` labels per stratum."""
    task_effect = rng.normal(0, 0.08, n_tasks)
    counts, true_counts, totals, after, task, sides = [], [], [], [], [], []
    for side, (base, false_positive) in enumerate(zip(bases, false_positives, strict=True)):
        verdicts, truths, weights = [], [], []
        for g in range(n_tasks):
            sampled = g % 5 == 0
            for _ in range(per_cell):
                rate = base + task_effect[g] + rng.normal(0, rollout_sd)
                n = int(rng.integers(5, 41))
                truth = rng.random(n) < rate
                verdict = (truth & (rng.random(n) < 0.8)) | (~truth & (rng.random(n) < false_positive))
                kept = rng.random(n) < 0.25 if sampled else np.ones(n, bool)
                kept[0] = True  # every rollout keeps a labelled segment
                w = np.full(int(kept.sum()), 4.0 if sampled else 1.0)
                counts.append(float(w @ verdict[kept]))
                true_counts.append(float(w @ truth[kept]))
                totals.append(float(w.sum()))
                after.append(bool(side))
                task.append(g)
                verdicts.append(verdict[kept])
                truths.append(truth[kept])
                weights.append(w)
        v = np.concatenate(verdicts)
        picked = np.concatenate([rng.choice(np.flatnonzero(v == x), hand, replace=False) for x in (True, False)])
        sides.append(Side(v, np.concatenate(truths), np.concatenate(weights), picked))
    design = (np.array(totals), np.array(after), np.array(task))
    return Study(RolloutRates(np.array(counts), *design), RolloutRates(np.array(true_counts), *design), tuple(sides))


def shipped_interval(study: Study) -> tuple[float, float, float, float]:
    """(corrected delta, low, high, the labeler's own delta) from `corrected_delta`."""
    levels = study.rates.levels()[:2]
    estimates = [
        checkpoint_estimate(level, s.verdict.size, s.truth[s.hand], s.verdict[s.hand], s.weight[s.hand])
        for level, s in zip(levels, study.sides, strict=True)
    ]
    n = sum(s.hand.size for s in study.sides)
    result = corrected_delta(0, n, *estimates, study.rates)
    nan = float("nan")
    return (
        nan if result.delta is None else result.delta,
        nan if result.ci_low is None else result.ci_low,
        nan if result.ci_high is None else result.ci_high,
        nan if result.labeler_delta is None else result.labeler_delta,
    )


def independent_segment_reference(study: Study) -> tuple[float, float, float]:
    """(delta, low, high): the pooled share P_c of labeler yes corrected as P_c a_c1 + (1 - P_c) a_c0, its
    variance (a_c1 - a_c0)^2 P_c (1 - P_c) / N_c + P_c^2 var(a_c1) + (1 - P_c)^2 var(a_c0) with every segment
    an independent unit (N_c the Kish size), a normal interval."""
    thetas, variances = [], []
    for s in study.sides:
        p = float(s.weight @ s.verdict / s.weight.sum())
        var_p = p * (1 - p) * (s.weight**2).sum() / s.weight.sum() ** 2
        v, t, w = s.verdict[s.hand], s.truth[s.hand].astype(np.float64), s.weight[s.hand]
        (a1, var1), (a0, var0) = weighted_share(t[v], w[v]), weighted_share(t[~v], w[~v])
        thetas.append(p * a1 + (1 - p) * a0)
        variances.append((a1 - a0) ** 2 * var_p + p**2 * var1 + (1 - p) ** 2 * var0)
    delta = thetas[1] - thetas[0]
    half = float(stats.norm.ppf(0.5 + CONFIDENCE / 2)) * float(np.sqrt(sum(variances)))
    return delta, delta - half, delta + half


def run(studies: int, seed: int, rollout_sd: float, hand: int) -> str:
    rng = np.random.default_rng(seed)
    shipped, reference, truths = [], [], []
    for _ in range(studies):
        study = simulate(rng, rollout_sd=rollout_sd, hand=hand)
        shipped.append(shipped_interval(study))
        reference.append(independent_segment_reference(study))
        before, after = study.true_rates.levels()[:2]
        truths.append(after - before)
    truth = float(np.mean(truths))
    ours, ref = np.array(shipped), np.array(reference)

    def coverage(rows: np.ndarray) -> float:
        return float(np.mean((rows[:, 1] <= truth) & (truth <= rows[:, 2])))

    return (
        f"rollout sd {rollout_sd:.1f}, {hand:3d} hand labels a stratum: true delta {truth:+.3f}; "
        f"shipped {coverage(ours):.1%} (width {np.nanmean(ours[:, 2] - ours[:, 1]):.3f}, "
        f"estimate {np.nanmean(ours[:, 0]):+.3f}); independent segments {coverage(ref):.1%} "
        f"(width {np.mean(ref[:, 2] - ref[:, 1]):.3f}); labeler's own delta {np.nanmean(ours[:, 3]):+.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"labeler calibration, {args.studies} studies a row (target: coverage >= 94%)")
    for rollout_sd, hand in ((0.1, 30), (0.1, 120), (0.2, 30), (0.2, 120)):
        start = time.perf_counter()
        line = run(args.studies, args.seed, rollout_sd, hand)
        print(f"{line}  [{time.perf_counter() - start:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
