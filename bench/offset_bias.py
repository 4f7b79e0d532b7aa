"""Benchmark: bias of the rollout-level ('any') rows' offset by the kind of exposure a feature has.

    .venv/bin/python bench/offset_bias.py [--studies 80] [--seed 5] [--scenarios length,task_length,...]

Simulates studies of `bench/calibration.py`'s scenarios and, for every null 'any' row, computes the
cluster-robust t of observed minus expected firing (`engine.deltas.views.KindView`, `engine.stats.rates.effects`,
the deltas stage's own functions; no permutations). Printed per scenario: the mean t and the share of |t| > 2.7
(1.0% nominal on 39 degrees of freedom) for text features (about 10 segments a rollout) and tool-call features
(about 2.3 calls to their tool), and by how often the feature fires anywhere. A mean t away from 0 in one group
is a bias of the offset that the family's size can hide when groups of opposite sign are pooled
(docs/statistics.md, section 10).
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.calibration import SCENARIOS, simulate
from engine.deltas import ANY
from engine.deltas.views import KindView
from engine.stats.rates import Contrast, effects

# |t| above these is about 1% and 0.12% of a t distribution on 39 degrees of freedom (40 tasks): the second is
# near where BH at 5% over the rollout family's ~30 rows of a study rejects.
T_TAILS = (2.7, 3.5)
# Bands of the share of rollouts in which a feature fires anywhere.
BANDS = ((0.0, 0.3), (0.3, 0.6), (0.6, 0.9), (0.9, 1.01))


def null_t(scenario: str, studies: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t, is a text feature, share of rollouts firing) of every null 'any' row over `studies` studies."""
    spec = SCENARIOS[scenario]
    out: list[list[np.ndarray]] = [[], [], []]
    for _ in range(studies):
        data, _, any_truth = simulate(spec, rng)
        view = KindView.of(data, ANY)
        assert view.offsets is not None
        columns = np.flatnonzero(any_truth == 0)
        fired = view.rates[:, columns].toarray()
        effect = effects(Contrast(view.design), fired - view.offsets[:, columns], by_task=not view.design.few_tasks)
        out[0].append(effect.estimate / effect.se)
        out[1].append(columns < spec.n_text)
        out[2].append(fired.mean(axis=0))
    t, text, share = (np.concatenate(part) for part in out)
    return t, text, share


def report(scenario: str, t: np.ndarray, text: np.ndarray, share: np.ndarray) -> list[str]:
    lines = [f"{scenario}: {t.size} null 'any' rows"]
    groups = [("text features", text), ("tool-call features", ~text)]
    groups += [(f"fires anywhere in {lo:.0%}-{min(hi, 1):.0%}", (share >= lo) & (share < hi)) for lo, hi in BANDS]
    for name, rows in groups:
        part = t[rows & np.isfinite(t)]
        if part.size:
            tails = "  ".join(f"|t| > {c} {(np.abs(part) > c).mean():6.2%}" for c in T_TAILS)
            lines.append(f"  {name:<28} n {part.size:5d}  mean t {part.mean():+.3f}  {tails}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=80)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--scenarios", default="clean,length,task_length,few_tasks")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    for name in args.scenarios.split(","):
        print("\n".join(report(name, *null_t(name, args.studies, rng))), flush=True)


if __name__ == "__main__":
    main()
