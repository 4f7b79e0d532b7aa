"""What a perfect labeler would get: each planted behaviour tested as a hypothesis labelled by the ground truth.

A planted behaviour the pipeline misses is missed because nothing drafted it, because its labeler matched too
little of it or too much else, or because the study cannot confirm a change that size at all. The last needs no
drafting to measure: every segment of the behaviour's kind on the split a finding would be tested on is
labelled by the planting itself, and the hypotheses stage's own held-out test (`validate`) runs on those labels.
A small study's findings are tested on either fold (cross-fitting, docs/statistics.md section 12), so both
folds are tested. The benchmark prints these p-values beside each behaviour's F1.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from engine.hypotheses.population import load_population
from engine.hypotheses.validate import Claim, validate
from engine.kinds import DISCOVERY, HELDOUT, Split
from engine.planted import Behaviour, PlantedIds
from engine.store import Store

# Where a finding of each split mode is tested: a task split on held-out tasks, a small study's folds each on
# the other; with nothing held out nothing is tested.
SPLITS_TESTED: dict[str, tuple[Split, ...]] = {
    "task": (HELDOUT,),
    "environment": (HELDOUT,),
    "rollout": (HELDOUT, DISCOVERY),
}


def perfect_labeler_p(
    store: Store,
    planted: PlantedIds,
    behaviours: tuple[Behaviour, ...],
    *,
    fdr: float = 0.05,
    n_permutations: int = 2000,
    seed: int = 0,
) -> dict[str, list[float | None]]:
    """Per behaviour, the held-out test's p-value (one per split tested on, in `SPLITS_TESTED` order) with the
    planted segments (`planted`: split -> behaviour -> segment ids) as its labels, on the segments of its kind,
    in its planted direction, between the benchmark's checkpoints 'before' and 'after': what a labeler of
    exactly the behaviour would get. Empty lists where the store holds nothing out."""
    mode = str(store.meta("split_mode") or "")
    out: dict[str, list[float | None]] = {b.name: [] for b in behaviours}
    if not behaviours:
        return out
    for split in SPLITS_TESTED.get(mode, ()):
        population = load_population(store, "before", "after", split)
        ids = planted.get(split, {})
        labels = pl.concat(
            population.segments.filter(pl.col("kind") == b.kind).select(
                pl.lit(j).alias("hypothesis_id"),
                "segment_id",
                pl.col("segment_id").is_in(list(ids.get(b.name, set()))).alias("label"),
                pl.lit(1.0).alias("weight"),
            )
            for j, b in enumerate(behaviours)
        )
        claims = [Claim(j, b.direction) for j, b in enumerate(behaviours)]
        rng = np.random.default_rng([seed, SPLITS_TESTED[mode].index(split)])
        results = validate(
            population, labels, claims, rng, fdr=fdr, n_permutations=n_permutations, new_tasks=mode != "rollout"
        )
        for b, result in zip(behaviours, results, strict=True):
            out[b.name].append(result.p_value)
    return out
