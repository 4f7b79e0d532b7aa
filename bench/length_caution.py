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

- length, 8 findings: as length, with eight sentence types A1..A8 (each 8% of sentences) tested together, as
  the findings of one study are: a reader takes the study at face value when no claim validates uncautioned.

Printed per scenario: the share of claims validated (raw, as the held-out test decides), the share of those
cautioned, the share validated without a caution (the verdict a reader would take at face value), and the share
of studies with any claim at face value. `--tasks 50 --turns 6` is a study of 2,400 turns a side, where
within-bin length differences show.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from engine.hypotheses.population import Population
from engine.hypotheses.validate import Claim, Validation, validate

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
    claims: int = 1  # sentence types tested together, each with the rates above (planted: the first only)


SCENARIOS = (
    Scenario("length", "increase", mean_after=6.0),
    Scenario("length, 8 findings", "increase", mean_after=6.0, claims=8),
    Scenario("planted", "increase", planted=0.3, truth="change"),
    Scenario("planted_small", "increase", planted=0.1, truth="change"),
    Scenario("planted_longer", "increase", mean_after=6.0, planted=0.3, truth="change"),
    Scenario("other_grows", "decrease", mean_after=6.0, rate_after=0.03, truth="change"),
)


def simulate(
    s: Scenario, rng: np.random.Generator, n_tasks: int, per_cell: int, turns: int
) -> tuple[Population, pl.DataFrame]:
    """One held-out population of text turns, and its labels (segment_id, hypothesis_id = sentence type)."""
    rows, segs, labels = [], [], []
    key = sid = 0
    for checkpoint in ("before", "after"):
        after = checkpoint == "after"
        mean, rate = (s.mean_after, s.rate_after) if after else (s.mean_before, s.rate_before)
        for t in range(n_tasks):
            for _ in range(per_cell):
                rows.append({"rollout_key": key, "checkpoint": checkpoint, "task_id": f"t{t}", "reward": 1.0})
                n = 1 + rng.poisson(mean - 1, turns)
                has_a = rng.binomial(n[:, None], rate, (turns, s.claims)) > 0
                if after and s.planted:
                    added = rng.random(turns) < s.planted
                    n, has_a[:, 0] = n + added, has_a[:, 0] | added
                for sentences, label in zip(n, has_a, strict=True):
                    words = int(rng.normal(WORDS_PER_SENTENCE, 3, sentences).clip(3).sum())
                    segs.append({"segment_id": sid, "rollout_key": key, "text": "w " * words})
                    labels += [(sid, claim, bool(a)) for claim, a in enumerate(label)]
                    sid += 1
                key += 1
    return held_out(rows, segs, labels)


def held_out(rows: list[dict], segs: list[dict], labels: list[tuple]) -> tuple[Population, pl.DataFrame]:
    """A held-out population of text turns from rollout rows (rollout_key, checkpoint, task_id, reward), segment
    rows (segment_id, rollout_key, text) and labels (segment_id, hypothesis_id, label), each of weight 1."""
    segments = pl.DataFrame(segs).with_columns(
        kind=pl.lit("text"),
        tool_name=pl.lit(None, pl.Utf8),
        tool_args=pl.lit(None, pl.Utf8),
    )
    rollouts = pl.DataFrame(rows)
    segments = segments.join(rollouts.select("rollout_key", "checkpoint", "task_id"), on="rollout_key")
    frame = pl.DataFrame(labels, schema=["segment_id", "hypothesis_id", "label"], orient="row")
    return Population("heldout", "before", "after", rollouts, segments), frame.with_columns(weight=pl.lit(1.0))


def run(s: Scenario, studies: int, seed: int, n_tasks: int, per_cell: int, turns: int) -> dict[str, float]:
    rng = np.random.default_rng([seed, SCENARIOS.index(s)])
    validated = cautioned = studies_at_face_value = 0
    claims = [Claim(i, s.direction) for i in range(s.claims)]
    for _ in range(studies):
        population, labels = simulate(s, rng, n_tasks, per_cell, turns)
        found = [v for v in validate(population, labels, claims, rng, n_permutations=200) if v.status == "validated"]
        cautions = sum(bool(v.equal_length and v.equal_length.caution) for v in found)
        validated, cautioned = validated + len(found), cautioned + cautions
        studies_at_face_value += len(found) > cautions
    return {
        "validated": validated / (studies * s.claims),
        "cautioned": cautioned / max(validated, 1),
        "face_value": (validated - cautioned) / (studies * s.claims),
        "studies": studies_at_face_value / studies,
    }


def replicate_claim(
    simulate: Callable[[], tuple[Population, pl.DataFrame]],
    direction: str,
    studies: int,
    rng: np.random.Generator,
    cautioned: Callable[[Validation], bool],
) -> tuple[int, int]:
    """(validated, cautioned): over `studies` simulated held-out populations, how often one claim (hypothesis 0)
    validates through the real `validate` (200 permutations a test), and how often a validated one is
    `cautioned`."""
    validated = marked = 0
    for _ in range(studies):
        population, labels = simulate()
        [v] = validate(population, labels, [Claim(0, direction)], rng, n_permutations=200)
        if v.status == "validated":
            validated += 1
            marked += cautioned(v)
    return validated, marked


def replication_parser(doc: str) -> argparse.ArgumentParser:
    """The options of a bench that replicates studies through `validate`: studies, seed, tasks, rollouts a cell."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--per-cell", type=int, default=4)
    return parser


def main() -> None:
    parser = replication_parser(__doc__)
    parser.add_argument("--turns", type=int, default=4, help="text turns per rollout")
    args = parser.parse_args()
    print(
        f"{args.tasks} tasks x {args.per_cell}+{args.per_cell} rollouts x {args.turns} text turns, "
        f"{args.studies} studies per scenario"
    )
    header = f"{'scenario':<20}{'truth':<8}{'claim':<10}{'validated':>10}{'cautioned':>11}{'face value':>12}"
    print(f"{header}{'studies':>9}{'s':>6}")
    for s in SCENARIOS:
        start = time.perf_counter()
        r = run(s, args.studies, args.seed, args.tasks, args.per_cell, args.turns)
        print(
            f"{s.name:<20}{s.truth:<8}{s.direction:<10}{r['validated']:>10.1%}{r['cautioned']:>11.1%}"
            f"{r['face_value']:>12.1%}{r['studies']:>9.1%}{time.perf_counter() - start:>6.0f}"
        )
    print(
        "validated: share of claims the held-out test validates; cautioned: share of those marked 'may be longer "
        "turns'; face value: claims validated without a caution (want ~0 under 'null', high under 'change'); "
        "studies: share of studies with any claim at face value"
    )


if __name__ == "__main__":
    main()
