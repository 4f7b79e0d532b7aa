"""The analysis, stage by stage. Each stage is `run(store, config, rng, progress) -> rows written`."""

from __future__ import annotations

import importlib
import logging
from dataclasses import replace

import numpy as np

from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.progress import NullProgress, Progress
from engine.store import Store

log = logging.getLogger(__name__)

# (stage name, module exposing `run`). Modules are imported when their stage runs, so a failing optional
# dependency only breaks the stage that needs it.
STAGES: tuple[tuple[str, str], ...] = (
    ("split", "engine.split"),
    ("features", "engine.features.stage"),
    ("deltas", "engine.deltas"),
    ("clusters", "engine.clusters"),
    ("hypotheses", "engine.hypotheses.stage"),
)


def resolve_checkpoints(store: Store, config: AnalyzeConfig) -> AnalyzeConfig:
    """Fill in `before`/`after` from the store (first and second ingested) and check they exist."""
    names = store.checkpoints()
    before = config.before or (names[0] if names else None)
    after = config.after or (names[1] if len(names) > 1 else None)
    if before is None or after is None:
        raise InputError(
            f"{store.path}: analysis needs two checkpoints, the store has {len(names)} "
            f"({', '.join(names) or 'none'}); ingest rollouts with --checkpoint NAME first"
        )
    for name in (before, after):
        if name not in names:
            raise InputError(f"{store.path}: no checkpoint named {name!r} (have: {', '.join(names)})")
    if before == after:
        raise InputError("--before and --after name the same checkpoint")
    return replace(config, before=before, after=after)


def analyze(
    store: Store, config: AnalyzeConfig, progress: Progress | None = None, *, until: str | None = None
) -> dict[str, int]:
    """Run every stage in order (up to and including `until`); returns rows written per stage."""
    config = resolve_checkpoints(store, config)
    progress = progress or NullProgress()
    written: dict[str, int] = {}
    for stage, module in STAGES:
        rng = np.random.default_rng([config.seed, len(written)])
        log.info("stage %s", stage)
        written[stage] = importlib.import_module(module).run(store, config, rng, progress)
        if stage == until:
            break
    return written
