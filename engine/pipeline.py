"""The analysis, stage by stage. Each stage is `run(store, config, rng, progress) -> rows written`.

1. split: tasks (or rollouts within a task) into discovery and held-out;
2. features: the reader and its SAE, sentence concepts and groups, structural features, on every segment;
3. deltas: each feature's change between the checkpoints on discovery, tested within its family;
4. clusters: related features grouped;
5. hypotheses: drafted from what changed, each tested on held-out by an independent labeler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from engine import clusters, deltas, split
from engine.config import AnalyzeConfig
from engine.features import stage as features
from engine.hypotheses import stage as hypotheses
from engine.progress import NullProgress, Progress
from engine.store import Store
from engine.study import record_config, resolve_checkpoints, stream

log = logging.getLogger(__name__)

Stage = Callable[[Store, AnalyzeConfig, np.random.Generator, Progress], int]

STAGES: tuple[tuple[str, Stage], ...] = (
    ("split", split.run),
    ("features", features.run),
    ("deltas", deltas.run),
    ("clusters", clusters.run),
    ("hypotheses", hypotheses.run),
)


def analyze(
    store: Store, config: AnalyzeConfig, progress: Progress | None = None, *, until: str | None = None
) -> dict[str, int]:
    """Run every stage in order (up to and including `until`); returns rows written per stage."""
    config = resolve_checkpoints(store, config)
    record_config(store, config)
    progress = progress or NullProgress()
    written: dict[str, int] = {}
    for name, run in STAGES:
        log.info("stage %s", name)
        written[name] = run(store, config, stream(config.seed, name), progress)
        if name == until:
            break
    return written
