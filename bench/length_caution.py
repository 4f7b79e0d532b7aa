"""Benchmark: the equal-length caution of held-out validation, by replication through the real `validate`.

    .venv/bin/python bench/length_caution.py [--studies 200] [--seed 0] [--tasks 20]

Each study simulates held-out text turns as bags of sentences: a turn has 1 + Poisson(mean - 1) sentences of
about 12 words, each of type A with a fixed chance, and the hypothesis "more turns contain an A sentence" is
labelled per turn (as a verifier or sentence labeler does) and validated with `engine.hypotheses.validate`.

- length: after-turns hold 6 sentences on average instead of 4, each A with the same 8% chance: no behaviour
  changed, but more turns contain an A. The raw test validates it; the caution should mark it.
- planted (planted_small): 30% (10%) of after-turns gain one A sentence; length otherwise unchanged. It should
  validate uncautioned.
- planted_longer: the planted A sentence, and after-turns also grow by other sentences (mean 6): both changed.
- other_grows: only other sentences are added after (mean 6) and A's rate per sentence halves: "fewer turns
  with A" is a real change against the length change, which the raw test is conservative for.

Printed per scenario: the share of studies validating the claim (raw, as the held-out test decides), the share
of those cautioned, and the share validated without a caution, the verdict a reader would take at face value.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import polars as pl

from engine.hypotheses.population import Population
from engine.hypotheses.validate import Claim, validate

WORDS_PER_SENTENCE = 12
LEVEL = 0.05


@dataclass(frozen=True)
class Scenario:
    name: str
    direction: str  # the claim tested
    mean_before: float = 4.0  # sentences per turn
    mean_after: float = 4.0
    rate_before: float = 0.08  # each sentence's chance of being an A
    rate_after: float = 0.08
    planted: float = 0.0  # share of after-turns given one more A sentence
    truth: str = "null"  # what a reader should conclude: 'null' or 'change'


SCENARIOS = (
    Scenario("length", "increase", mean_after=6.0),
    Scenario("planted", "increase", planted=0.3, truth="change"),
    Scenario("planted_small", "increase", planted=0.1, truth="change"),
    Scenario("planted_longer", "increase", mean_after=6.0, planted=0.3, truth="change"),
    Scenario("other_grows", "decrease", mean_after=6.0, rate_after=0.03, truth="change"),
)


def simulate(s: Scenario, rng: np.random.Generator, n_tasks: int, per_cell: int, turns: int) -> Population:
    """One held-out population of text turns, and its labels as the segments' `label` column."""
    rows, segs = [], []
    key = sid = 0
    for checkpoint in ("before", "after"):
        after = checkpoint == "after"
        mean, rate = (s.mean_after, s.rate_after) if after else (s.mean_before, s.rate_before)
        for t in range(n_tasks):
            for _ in range(per_cell):
                rows.append({"rollout_key": key, "checkpoint": checkpoint, "task_id": f"t{t}", "reward": 1.0})
                n = 1 + rng.poisson(mean - 1, turns)
                has_a = rng.binomial(n, rate) > 0
                if after and s.planted:
                    added = rng.random(turns) < s.planted
                    n, has_a = n + added, has_a | added
                for sentences, label in zip(n, has_a, strict=True):
                    words = int(rng.normal(WORDS_PER_SENTENCE, 3, sentences).clip(3).sum())
                    segs.append({"segment_id": sid, "rollout_key": key, "text": "w " * words, "label": bool(label)})
                    sid += 1
                key += 1
    segments = pl.DataFrame(segs).with_columns(
        kind=pl.lit("text"),
        tool_name=pl.lit(None, pl.Utf8),
        tool_args=pl.lit(None, pl.Utf8),
    )
    rollouts = pl.DataFrame(rows)
    segments = segments.join(rollouts.select("rollout_key", "checkpoint", "task_id"), on="rollout_key")
    return Population("heldout", "before", "after", rollouts, segments)


def run(s: Scenario, studies: int, seed: int, n_tasks: int, per_cell: int, turns: int) -> dict[str, float]:
    rng = np.random.default_rng([seed, SCENARIOS.index(s)])
    validated = cautioned = 0
    for _ in range(studies):
        population = simulate(s, rng, n_tasks, per_cell, turns)
        labels = population.segments.select("segment_id", "label", hypothesis_id=pl.lit(0), weight=pl.lit(1.0))
        [v] = validate(population, labels, [Claim(0, s.direction)], rng, n_permutations=200)
        if v.status == "validated":
            validated += 1
            cautioned += bool(v.equal_length and v.equal_length.caution)
    return {
        "validated": validated / studies,
        "cautioned": cautioned / max(validated, 1),
        "face_value": (validated - cautioned) / studies,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--per-cell", type=int, default=4)
    parser.add_argument("--turns", type=int, default=4, help="text turns per rollout")
    args = parser.parse_args()
    print(
        f"{args.tasks} tasks x {args.per_cell}+{args.per_cell} rollouts x {args.turns} text turns, "
        f"{args.studies} studies per scenario"
    )
    print(f"{'scenario':<16}{'truth':<8}{'claim':<10}{'validated':>10}{'cautioned':>11}{'face value':>12}{'s':>6}")
    for s in SCENARIOS:
        start = time.perf_counter()
        r = run(s, args.studies, args.seed, args.tasks, args.per_cell, args.turns)
        print(
            f"{s.name:<16}{s.truth:<8}{s.direction:<10}{r['validated']:>10.1%}{r['cautioned']:>11.1%}"
            f"{r['face_value']:>12.1%}{time.perf_counter() - start:>6.0f}"
        )
    print(
        "validated: share of studies whose held-out test validates the claim; cautioned: share of those marked "
        "'may be longer turns'; face value: validated without a caution (want ~0 under 'null', high under 'change')"
    )


if __name__ == "__main__":
    main()
