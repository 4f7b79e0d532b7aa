"""What a perfect labeler would get: each planted behaviour tested as a hypothesis labelled by the ground truth.

A planted behaviour the pipeline misses is missed because nothing drafted it, because its labeler matched too
little of it or too much else, or because the study cannot confirm a change that size at all. The last needs no
drafting to measure: every segment of the behaviour's kind on the split a finding would be tested on is
labelled by the planting itself, and the hypotheses stage's own held-out test (`validate`) runs on those labels.
A small study's findings are tested on either fold (cross-fitting, docs/statistics.md section 12), so both
folds are tested. The benchmark prints these p-values beside each behaviour's F1.

Whether anything drafted it is the first question, and the best a drafter can start from is the feature row
that fires most like the behaviour on discovery (`best_source_f1`): a miss whose best row isolates little of
it is the sources' (a concept that catches part of a paraphrased behaviour), not the drafting's or the test's.
"""

from __future__ import annotations

from dataclasses import dataclass

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


# Per behaviour, the tested feature row of one kind whose firing on one split's segments of that kind best
# matches its planted segments (F1), and that F1.
_BEST_SOURCE = """
WITH planted AS (SELECT unnest(?::VARCHAR[]) AS behaviour, unnest(?::BIGINT[]) AS segment_id),
fired AS (
    SELECT sf.feature_id, sf.segment_id FROM segment_features sf JOIN features f USING (feature_id)
    JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key)
    WHERE sf.activation > f.threshold AND r.split = ? AND s.kind = ?
    AND sf.feature_id IN (SELECT feature_id FROM feature_deltas WHERE kind = ? AND tested)
),
sizes AS (SELECT feature_id, count(*) AS fired FROM fired GROUP BY ALL),
wanted AS (SELECT behaviour, count(*) AS n FROM planted GROUP BY ALL),
hits AS (SELECT p.behaviour, f.feature_id, count(*) AS tp FROM fired f JOIN planted p USING (segment_id) GROUP BY ALL),
scored AS (SELECT behaviour, feature_id, 2.0 * tp / (fired + n) AS f1 FROM hits JOIN sizes USING (feature_id)
           JOIN wanted USING (behaviour))
SELECT behaviour, arg_max(feature_id, (f1, -feature_id)) AS feature_id, max(f1) AS f1 FROM scored GROUP BY ALL
"""


@dataclass(frozen=True)
class Source:
    """The tested feature row that fires most like a behaviour on discovery (none where no row of its kind
    fires on any of it), and its F1."""

    feature_id: int | None
    f1: float


def best_sources(store: Store, planted: PlantedIds, behaviours: tuple[Behaviour, ...]) -> dict[str, Source | None]:
    """Per behaviour, the tested feature row of its kind (a latent, concept, group or structural feature: what
    drafting draws its sources from) whose firing on discovery segments of that kind best matches the
    behaviour's planted discovery segments (`planted`: split -> behaviour -> segment ids), by F1; None where
    none of it lies on discovery. In a small study discovery is the first fold, the one drafted from first."""
    on_discovery = planted.get(DISCOVERY, {})
    out: dict[str, Source | None] = {b.name: None for b in behaviours}
    for kind in dict.fromkeys(b.kind for b in behaviours):
        ids = [(b.name, sid) for b in behaviours if b.kind == kind for sid in on_discovery.get(b.name, ())]
        if not ids:
            continue
        names, segments = zip(*ids, strict=True)
        found = store.frame(_BEST_SOURCE, [list(names), list(segments), DISCOVERY, kind, kind])
        best = {name: Source(int(fid), float(f1)) for name, fid, f1 in found.iter_rows()}
        out |= {name: best.get(name, Source(None, 0.0)) for name in dict.fromkeys(names)}
    return out


def best_source_f1(store: Store, planted: PlantedIds, behaviours: tuple[Behaviour, ...]) -> dict[str, float | None]:
    """`best_sources`' F1 per behaviour: how well the study's best source isolates it (None: none of it on
    discovery)."""
    return {name: s.f1 if s else None for name, s in best_sources(store, planted, behaviours).items()}
