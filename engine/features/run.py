"""What every step of the features stage shares: one frozen record of the run, instead of parameter trains."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from engine.features.settings import FeatureSettings
from engine.kinds import DISCOVERY
from engine.progress import Progress
from engine.store import Store

STATUS_EVERY_S = 0.5  # how often a step's rate status is refreshed
CANDIDATES_PER_EXAMPLE = 4  # top-activation candidates per example kept, before copies of one text are dropped

# The segments of the two compared checkpoints; parameters: the checkpoints.
SEGMENTS = "FROM segments s JOIN rollouts r USING (rollout_key) WHERE r.checkpoint IN (?, ?)"
# The rollouts `r` whose segments train, label and give examples: the discovery split (all of them before the
# split is drawn), so nothing held out reaches labels or drafting.
DISCOVERY_ROLLOUTS = f"coalesce(r.split, '{DISCOVERY}') = '{DISCOVERY}'"
# Rows of `feature_kind_labels`: a feature's label drawn from its top discovery examples of one segment kind.
KIND_LABEL_SCHEMA = {"feature_id": pl.Int64, "kind": pl.String, "label": pl.String}
LabelKey = tuple[int, str | None]  # (feature id, segment kind) of a label: None for the feature's own


@dataclass(frozen=True)
class FeatureRun:
    """One run of the features stage: where it reads and writes, with what, and what it reports."""

    store: Store
    staging: str  # the scratch schema every step writes into; published in one transaction at the end
    checkpoints: tuple[str, str]  # (before, after)
    settings: FeatureSettings
    device: str
    rng: np.random.Generator
    progress: Progress
    run_id: str
    metrics: dict[str, Any]  # the run record's metrics, which each step adds to

    @property
    def params(self) -> list[str]:
        """The checkpoints as query parameters (for `SEGMENTS`)."""
        return list(self.checkpoints)


@contextmanager
def rates(progress: Progress, description: str, total: int) -> Iterator[Callable[[int, int], None]]:
    """Progress with segments/s and tokens/s in the status."""
    started = last = time.perf_counter()
    done = [0, 0]
    with progress.track(description, total) as advance:

        def step(segments: int, tokens: int) -> None:
            nonlocal last
            done[0] += segments
            done[1] += tokens
            now = time.perf_counter()
            status = None
            if now - last >= STATUS_EVERY_S or done[0] == total:
                last = now
                elapsed = max(now - started, 1e-9)
                status = f"{done[0] / elapsed:,.0f} segments/s, {done[1] / elapsed:,.0f} tokens/s"
            advance(segments, status=status)

        yield step


def ranked_examples(
    candidates: pl.DataFrame, distinct: str, top: int, groups: tuple[str, ...] = ("feature_id", "checkpoint")
) -> pl.DataFrame:
    """The `top` strongest examples per group (feature and checkpoint; and kind for per-kind labels), one per
    distinct `distinct` value, ranked from 1, from a bounded top-n aggregate's `best` list column (ties to the
    lower segment id, then to the list's order: the aggregate's own tie-break, such as a segment's first
    sentence among copies of it). The sort keeps the list's order among ties: polars' default multi-key sort
    does not, and the same study gave a repeated sentence's second span on one run and its first on another."""
    return (
        candidates.explode("best")
        .unnest("best")
        .sort(
            [*groups, "activation", "segment_id"],
            descending=[*(False for _ in groups), True, False],
            maintain_order=True,
        )
        .unique([*groups, distinct], keep="first", maintain_order=True)
        .with_columns(rank=pl.int_range(1, pl.len() + 1, dtype=pl.Int32).over(*groups))
        .filter(pl.col("rank") <= top)
    )
