"""The study: the checkpoints it compares, the configuration of its last analysis, and its random streams.

Stages, the hypothesis ledger, the CLI and the TUI ask here rather than rebuilding a configuration from a
stage's run record, and no randomness depends on a stage's position in the pipeline.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace

import numpy as np

from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.store import Store
from engine.store.queries.study import CONFIG_KEY, analysis_config, checkpoint_names, default_pair

# Named random streams with fixed ids, so that adding a stage or a command moves no other stream. The first
# five ids are the stages' former positions: stores analysed before the streams had names reproduce exactly.
STREAMS: dict[str, int] = {
    "split": 0,
    "features": 1,
    "deltas": 2,
    "clusters": 3,
    "hypotheses": 4,
    "revalidation": 5,
    "hypothesis_test": 6,
    "null_check": 7,
    "crossfit": 8,  # a small study's second fold, drafted on held-out (hypotheses stage)
}


def stream(seed: int, name: str, *key: int) -> np.random.Generator:
    """The random generator of stream `name` (and sub-key, e.g. a hypothesis id) for this seed."""
    return np.random.default_rng([seed, STREAMS[name], *key])


def resolve_checkpoints(store: Store, config: AnalyzeConfig) -> AnalyzeConfig:
    """Fill in `before`/`after` from the store (first and second ingested) and check they exist."""
    names = checkpoint_names(store)
    before, after = default_pair(names, config.before, config.after)
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


def record_config(store: Store, config: AnalyzeConfig) -> None:
    """Keep `config` as the study's last analysis configuration."""
    store.set_meta(CONFIG_KEY, json.dumps(config.as_dict(), default=str))


def last_config(store: Store) -> AnalyzeConfig:
    """The configuration of the study's last analysis, checkpoints resolved; defaults if none ran.

    Read through `queries.study.analysis_config`, the same record the TUI reads the compared checkpoints from;
    fields a fallback record (older stores) never held come back as defaults.
    """
    known = {f.name for f in fields(AnalyzeConfig)}
    config = AnalyzeConfig(**{k: v for k, v in analysis_config(store).items() if k in known})
    return resolve_checkpoints(store, config)
