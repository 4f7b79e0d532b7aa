"""Step 2 of the features stage under `--sae train`: the study's SAE, trained on a sample of discovery-split
token activations (all rollouts when the split is not drawn), or the one this study trained before on the same
inputs, reused."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from engine.errors import InputError
from engine.features.cache import ActivationCache, side_dir
from engine.features.reader_spec import ReaderSpec
from engine.features.run import DISCOVERY_ROLLOUTS, SEGMENTS, FeatureRun
from engine.features.sae import TrainedSae, load_trained, train_sae

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


def trained_sae(
    run: FeatureRun, spec: ReaderSpec, cache: ActivationCache, index: pl.DataFrame, seed: int
) -> TrainedSae:
    """The SAE trained on the discovery split: reused when this study trained it before on the same inputs."""
    discovery = run.store.frame(
        f"SELECT DISTINCT s.content_hash {SEGMENTS} AND {DISCOVERY_ROLLOUTS} ORDER BY 1",
        run.params,
    )
    settings = run.settings
    sae_settings = {k: v for k, v in settings.as_dict().items() if k.startswith(("sae_", "max_train", "tokens_per"))}
    key = hashlib.sha256(
        json.dumps(
            {
                "reader": cache.dir.name,
                "settings": sae_settings,
                "seed": seed,
                "discovery": hashlib.sha256("\n".join(discovery["content_hash"]).encode()).hexdigest(),
            },
            sort_keys=True,
        ).encode()
    ).hexdigest()[:16]
    folder = side_dir(run.store.path) / "sae" / f"trained-{key}"
    reused = load_trained(folder, run.device)
    if reused is not None:
        log.info("reusing the SAE trained before: %s", folder)
        return TrainedSae(reused.sae, {**reused.metrics, "sae_trained": False, "folder": str(folder)})
    sample = training_sample(cache, index.join(discovery, on="content_hash"), settings.max_train_tokens, seed)
    if sample.shape[0] < 2:
        before, after = run.checkpoints
        raise InputError(
            f"checkpoints {before} and {after}: too little discovery text to "
            "train an SAE; ingest more rollouts or pass --sae FOLDER"
        )
    started = time.perf_counter()
    trained = train_sae(
        sample,
        hook_name=spec.hook_name,
        model_name=spec.name,
        settings=settings,
        device=run.device,
        seed=seed,
        folder=folder,
        progress=run.progress,
    )
    seconds = round(time.perf_counter() - started, 2)
    log.info(
        "SAE: %d latents, explained variance %.3f, L0 %.1f, dead %.1f%% (%.1fs)",
        trained.metrics["sae_width"],
        trained.metrics["explained_variance"],
        trained.metrics["l0"],
        100 * trained.metrics["dead_share"],
        seconds,
    )
    return TrainedSae(
        trained.sae, {**trained.metrics, "sae_trained": True, "sae_seconds": seconds, "folder": str(folder)}
    )


def training_sample(cache: ActivationCache, segments: pl.DataFrame, cap: int, seed: int) -> torch.Tensor:
    """At most `cap` token activations drawn uniformly from the given cached segments, bf16 [tokens, hidden].

    The draw and the rows' order follow the segments' content hashes, never where the cache holds them:
    shards are named at random and fill in the order segments were read, so a draw over the cache's layout
    trained another SAE each time the same study was analysed afresh (planted seed 22: 19 of 766 latents
    alike across two runs)."""
    import torch

    segments = segments.sort("content_hash")
    lengths = segments["n_tokens"].to_numpy().astype(np.int64)
    total = int(lengths.sum())
    if total <= cap:
        picks = np.arange(total, dtype=np.int64)
    else:
        picks = np.sort(np.random.default_rng(seed).choice(total, size=cap, replace=False))
    ends = np.cumsum(lengths)
    owner = np.searchsorted(ends, picks, side="right")
    rows = segments["start"].to_numpy()[owner] + (picks - (ends - lengths)[owner])
    shards = segments["shard"].to_numpy()[owner]
    sample = torch.empty(len(picks), cache.hidden_size, dtype=torch.bfloat16)
    for shard in np.unique(shards):
        mine = np.flatnonzero(shards == shard)
        mine = mine[np.argsort(rows[mine], kind="stable")]  # `take` returns a shard's rows in ascending order
        sample[torch.from_numpy(mine)] = cache.take(shard, rows[mine])
    return sample
