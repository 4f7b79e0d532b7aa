"""Benchmark: the one-task caution of held-out validation, by replication through the real `validate`.

    .venv/bin/python bench/task_spread.py [--studies 200] [--seed 0] [--tasks 20] [--per-cell 4]

Each study simulates held-out rollouts of four text turns in every task; a phrase is said in a turn with a
per-task, per-checkpoint chance, and "more turns say the phrase" is labelled per turn and validated with
`engine.hypotheses.validate`. The tested delta is a weighted mean of per-task changes; the caution marks a
validated claim whose change, without its top task, keeps less than a quarter of itself (`TaskSpread`).

- one_task: one task's after-rollouts say it in 60% of turns, no other rollout does (a greeting with one task's
  passenger's name): the caution should mark it.
- every_task: every task goes 10% -> 30% of turns: a habit of the model's, uncautioned.
- varied: every task changes, by a per-task amount drawn from 0 to +40 points: a habit whose size varies by
  task, uncautioned as far as the tasks allow.
- half_the_tasks: half of the tasks go 10% -> 40%, the others stay: several tasks carry it, uncautioned.
- one_heavy_task: every_task, with a first task of four times the rollouts (as task 24 of the tau2 policy pair
  is): the other tasks' change is measured on fewer rollouts, and still a habit.

Printed per scenario: the share of studies whose claim validated, and the share of those cautioned.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: `bench.` is the repository's

from bench.length_caution import held_out, replicate_claim, replication_parser  # noqa: E402

TURNS = 4
Rates = Callable[[int, int, np.random.Generator], tuple[float, float]]  # (task, n_tasks, rng) -> before, after


@dataclass(frozen=True)
class Scenario:
    name: str
    truth: str  # what a reader should conclude: 'one task' or 'habit'
    rates: Rates
    heavy: int = 1  # the first task's rollouts a cell, as a multiple of the others'


SCENARIOS = (
    Scenario("one_task", "one task", lambda t, n, rng: (0.0, 0.6 if t == 0 else 0.0)),
    Scenario("every_task", "habit", lambda t, n, rng: (0.1, 0.3)),
    Scenario("varied", "habit", lambda t, n, rng: (0.1, 0.1 + rng.uniform(0.0, 0.4))),
    Scenario("half_the_tasks", "habit", lambda t, n, rng: (0.1, 0.4 if t < n // 2 else 0.1)),
    Scenario("one_heavy_task", "habit", lambda t, n, rng: (0.1, 0.3), heavy=4),
)


def simulate(s: Scenario, rng: np.random.Generator, n_tasks: int, per_cell: int):
    """One held-out population and its labels (hypothesis 0: the turn says the phrase)."""
    rows, segs, labels = [], [], []
    key = sid = 0
    rates = [s.rates(t, n_tasks, rng) for t in range(n_tasks)]
    for side, checkpoint in enumerate(("before", "after")):
        for t in range(n_tasks):
            for _ in range(per_cell * (s.heavy if t == 0 else 1)):
                rows.append({"rollout_key": key, "checkpoint": checkpoint, "task_id": f"t{t}", "reward": 1.0})
                for _ in range(TURNS):
                    segs.append({"segment_id": sid, "rollout_key": key, "text": "w " * 20})
                    labels.append((sid, 0, bool(rng.random() < rates[t][side])))
                    sid += 1
                key += 1
    return held_out(rows, segs, labels)


def run(s: Scenario, studies: int, seed: int, n_tasks: int, per_cell: int) -> dict[str, float]:
    rng = np.random.default_rng([seed, SCENARIOS.index(s)])
    validated, cautioned = replicate_claim(
        lambda: simulate(s, rng, n_tasks, per_cell), "increase", studies, rng,
        lambda v: bool(v.task_spread and v.task_spread.caution),
    )  # fmt: skip
    return {"validated": validated / studies, "cautioned": cautioned / max(validated, 1)}


def main() -> None:
    args = replication_parser(__doc__).parse_args()
    print(f"{args.tasks} tasks x {args.per_cell}+{args.per_cell} rollouts, {args.studies} studies per scenario")
    print(f"{'scenario':<16}{'truth':<10}{'validated':>10}{'cautioned':>11}{'s':>6}")
    for s in SCENARIOS:
        start = time.perf_counter()
        r = run(s, args.studies, args.seed, args.tasks, args.per_cell)
        seconds = time.perf_counter() - start
        print(f"{s.name:<16}{s.truth:<10}{r['validated']:>10.1%}{r['cautioned']:>11.1%}{seconds:>6.0f}")
    print(
        "validated: share of studies whose claim the held-out test validates; cautioned: share of those marked "
        "'may be one task's' (want ~100% under 'one task', ~0 under 'habit')"
    )


if __name__ == "__main__":
    main()
