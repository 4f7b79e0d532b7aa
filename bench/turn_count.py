"""Benchmark: the turn-count caution of held-out validation, by replication through the real `validate`.

    .venv/bin/python bench/turn_count.py [--studies 200] [--seed 0] [--tasks 20]

Each study simulates held-out rollouts of 1 + Poisson(mean - 1) text turns. A greeting ("Hi! How can I help
you today?") is said in the first turn of a rollout with a fixed chance, and "fewer (more) turns contain the
greeting" is labelled per turn and validated with `engine.hypotheses.validate`. The claim is a share of each
rollout's turns, so a once-a-conversation sentence moves when conversations take more or fewer turns.

- more_turns: after-rollouts take 6 turns on average instead of 4, every rollout greets: no behaviour changed,
  but fewer turns greet. The raw test validates "fewer"; the caution should mark it.
- fewer_turns: the same the other way (4 -> 3 turns): "more" validates raw; the caution should mark it.
- greets_less: 40% of after-rollouts stop greeting, turns unchanged: a real change, uncautioned.
- greets_less_more_turns: both, a real change that comes with more turns: it should stay uncautioned.

Printed per scenario: the share of studies whose claim validated (raw), the share of those cautioned (by
either caution), and the share validated without one: what a reader takes at face value.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: `bench.` is the repository's

from bench.length_caution import WORDS_PER_SENTENCE, held_out, replicate_claim, replication_parser  # noqa: E402


@dataclass(frozen=True)
class Scenario:
    name: str
    direction: str  # the claim tested
    truth: str  # what a reader should conclude: 'null' or 'change'
    turns_after: float = 4.0  # mean text turns a rollout (4 before)
    greets_after: float = 1.0  # share of rollouts that greet (all before)


SCENARIOS = (
    Scenario("more_turns", "decrease", "null", turns_after=6.0),
    Scenario("fewer_turns", "increase", "null", turns_after=3.0),
    Scenario("greets_less", "decrease", "change", greets_after=0.6),
    Scenario("greets_less_more_turns", "decrease", "change", turns_after=6.0, greets_after=0.6),
)


def simulate(s: Scenario, rng: np.random.Generator, n_tasks: int, per_cell: int):
    """One held-out population and its labels (hypothesis 0: the turn greets)."""
    rows, segs, labels = [], [], []
    key = sid = 0
    for checkpoint in ("before", "after"):
        turns, greets = (s.turns_after, s.greets_after) if checkpoint == "after" else (4.0, 1.0)
        for t in range(n_tasks):
            for _ in range(per_cell):
                rows.append({"rollout_key": key, "checkpoint": checkpoint, "task_id": f"t{t}", "reward": 1.0})
                greeting = rng.random() < greets
                for turn in range(1 + rng.poisson(turns - 1)):
                    words = int(rng.normal(3 * WORDS_PER_SENTENCE, 6))
                    segs.append({"segment_id": sid, "rollout_key": key, "text": "w " * max(words, 3)})
                    labels.append((sid, 0, bool(greeting and turn == 0)))
                    sid += 1
                key += 1
    return held_out(rows, segs, labels)


def run(s: Scenario, studies: int, seed: int, n_tasks: int, per_cell: int) -> dict[str, float]:
    rng = np.random.default_rng([seed, SCENARIOS.index(s)])
    validated, cautioned = replicate_claim(
        lambda: simulate(s, rng, n_tasks, per_cell), s.direction, studies, rng,
        lambda v: any(t is not None and t.caution for t in (v.turn_count, v.equal_length)),
    )  # fmt: skip
    return {
        "validated": validated / studies,
        "cautioned": cautioned / max(validated, 1),
        "face_value": (validated - cautioned) / studies,
    }


def main() -> None:
    args = replication_parser(__doc__).parse_args()
    print(f"{args.tasks} tasks x {args.per_cell}+{args.per_cell} rollouts, {args.studies} studies per scenario")
    print(f"{'scenario':<24}{'truth':<8}{'claim':<10}{'validated':>10}{'cautioned':>11}{'face value':>12}{'s':>6}")
    for s in SCENARIOS:
        start = time.perf_counter()
        r = run(s, args.studies, args.seed, args.tasks, args.per_cell)
        print(
            f"{s.name:<24}{s.truth:<8}{s.direction:<10}{r['validated']:>10.1%}{r['cautioned']:>11.1%}"
            f"{r['face_value']:>12.1%}{time.perf_counter() - start:>6.0f}"
        )
    print(
        "validated: share of studies whose claim the held-out test validates; cautioned: share of those marked "
        "'may be turn count' or 'turn length'; face value: validated without a caution (want ~0 under 'null', "
        "high under 'change')"
    )


if __name__ == "__main__":
    main()
