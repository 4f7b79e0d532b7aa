"""The features stage: reader activations (cached), the SAE, segment features, top examples, labels.

Each step has its file and shares one `FeatureRun` (engine.features.run):
1. Read (`reading`): every distinct segment text of the two checkpoints that the activation cache lacks goes
   through the truncated reader once; activations are cached as they come (`engine.features.cache`).
2. SAE (`training`): `--sae train` trains on a sample of discovery-split token activations (all rollouts when
   the split is not drawn) or reuses the SAE this study trained before on the same inputs; else the given SAE.
3. Encode (`sae_features`): cached activations stream through the SAE; each segment's per-latent maximum is
   staged in `segment_features` (non-zero only).
4. Examples and labels (`sae_features`): thresholds, top discovery examples, per-token activations, labels.
5. Structural features (`structural_features`) from the rollouts' structure (`engine.features.structural`).
6. Sentences of text and reasoning segments, and (unless `--no-sentence-features`) concept and behaviour-group
   features over their embeddings (`engine.features.sentence_features`, docs/concepts.md).
Every step writes into a staging database; one transaction then removes the previous features of these
sources and sentences and publishes the new ones.
"""

from __future__ import annotations

import logging
import time
from contextlib import closing
from typing import TYPE_CHECKING

import numpy as np

from engine.config import AnalyzeConfig
from engine.features import sentence_features
from engine.features.cache import ActivationCache, side_dir
from engine.features.inputs import INPUT_FORMAT
from engine.features.reader import reader_dtype, resolve_device
from engine.features.reader_spec import resolve_reader
from engine.features.reading import fill_cache
from engine.features.run import SEGMENTS, FeatureRun
from engine.features.sae import check_sae, hook_layer, load_folder, load_pretrained, parse_sae_spec, sparse_codes
from engine.features.sae_features import write_sae_features
from engine.features.settings import FeatureSettings
from engine.features.structural_features import write_structural
from engine.features.training import trained_sae
from engine.kinds import SOURCES
from engine.progress import Progress
from engine.runs import invalidate_downstream, is_done, record_run
from engine.store import Store
from engine.store.queries.study import SAE_SOURCE_KEY

if TYPE_CHECKING:
    from sae_lens import SAE

log = logging.getLogger(__name__)

STAGE = "features"
VERSION = 2  # bump when the stage's outputs change meaning (2: per-kind labels)
OUTPUTS = ("features", "segment_features", "feature_examples", "feature_kind_labels", "sentences")  # it replaces
_SOURCES = f"({', '.join(repr(s) for s in SOURCES)})"
_OURS = f"SELECT feature_id FROM features WHERE source IN {_SOURCES}"


def run(store: Store, config: AnalyzeConfig, rng: np.random.Generator, progress: Progress) -> int:
    """Pipeline entry point: settings from the device and the SAE options, then `extract`."""
    device = resolve_device(config.device)
    settings = FeatureSettings.for_device(device).with_sae(config.sae_width, config.sae_k, config.sae_steps)
    return extract(store, config, rng, progress, settings, device)


def extract(
    store: Store,
    config: AnalyzeConfig,
    rng: np.random.Generator,
    progress: Progress,
    settings: FeatureSettings,
    device: str,
) -> int:
    """Fill `features`, `segment_features` and `feature_examples` for `config.before` / `config.after`."""
    checkpoints = list(config.checkpoints)
    stage_config = {
        "before": config.before,
        "after": config.after,
        "reader": config.reader,
        "layer": config.layer,
        "sae": config.sae,
        "seed": config.seed,
        "device": "cuda" if device.startswith("cuda") else "cpu",
        "settings": settings.as_dict(),
        "version": VERSION,
        "input_format": INPUT_FORMAT,
        "sentence_features": config.sentence_features,
        "concept_sae": config.concept_sae,
    }
    input_hash = store.scalar(
        "SELECT coalesce(sha256(string_agg(s.segment_id::VARCHAR || ':' || s.content_hash || ':' || r.checkpoint "
        f"|| ':' || coalesce(r.split, ''), ',' ORDER BY s.segment_id)), '') {SEGMENTS}",
        checkpoints,
    )
    if is_done(store, STAGE, stage_config, input_hash):
        log.info("features: up to date, skipped")
        return 0
    seed = int(rng.integers(2**31 - 1))
    with (
        record_run(store, STAGE, stage_config, input_hash, config.seed) as record,
        store.staging(OUTPUTS) as staging,
    ):
        run = FeatureRun(
            store, staging, config.checkpoints, settings, device, rng, progress, record.run_id, record.metrics
        )
        started = time.perf_counter()
        sae, sae_source = _given_sae(config.sae, device)
        layer = config.layer if config.layer is not None or sae is None else hook_layer(sae)
        spec = resolve_reader(config.reader, layer, settings)
        if sae is not None:
            check_sae(sae, spec.hidden_size, spec.layer, f"--sae {config.sae}")
        dtype = str(reader_dtype(device)).removeprefix("torch.")
        cache = ActivationCache(side_dir(store.path) / "cache", spec.cache_key(dtype, settings), spec.hidden_size)
        with closing(cache):
            run.metrics.update(
                reader=spec.name,
                reader_source=spec.source,
                layer=spec.layer,
                hook=spec.hook_name,
                window=spec.window,
                dtype=dtype,
                device=device,
                cache=str(cache.dir),
            )
            fill_cache(run, spec, cache)
            index = cache.index()
            if sae is None:
                trained = trained_sae(run, spec, cache, index, seed)
                sae, sae_source = trained.sae, trained.metrics.get("folder", "")
                run.metrics.update({k: v for k, v in trained.metrics.items() if k != "folder"})
            sae = sparse_codes(sae)
            run.metrics.update(sae_source=sae_source, sae_width=int(sae.cfg.d_sae))
            base = write_sae_features(run, _first_free_id(store), sae, cache, index)
            base = write_structural(run, base)
            sentence_features.extract(store, staging, base, checkpoints, config, spec, device, settings, rng,
                                      progress, record.run_id, record.metrics)  # fmt: skip
            written = _publish(store, staging, sae_source)
            run.metrics["cache_bytes"] = cache.size_bytes()
        run.metrics["seconds"] = round(time.perf_counter() - started, 2)
        log.info("features: %d rows in %.1fs", written, run.metrics["seconds"])
    return written


def _given_sae(value: str, device: str) -> tuple[SAE | None, str]:
    spec = parse_sae_spec(value)
    if spec.kind == "folder":
        assert spec.path is not None
        return load_folder(spec.path, device), str(spec.path)
    if spec.kind == "pretrained":
        assert spec.release is not None and spec.sae_id is not None
        return load_pretrained(spec.release, spec.sae_id, device), value
    return None, ""


def _first_free_id(store: Store) -> int:
    """Feature ids start after any feature this stage does not own (its own are replaced)."""
    return int(store.scalar(f"SELECT coalesce(max(feature_id) + 1, 0) FROM features WHERE feature_id NOT IN ({_OURS})"))


def _publish(store: Store, staging: str, sae_source: str) -> int:
    """Replace the previous SAE and structural features by the staged ones, in one transaction that also
    invalidates the statistics computed from the old ones and records where the SAE came from."""
    with store.transaction():
        invalidate_downstream(store, STAGE)
        store.set_meta(SAE_SOURCE_KEY, sae_source)
        store.scalar(f"DELETE FROM segment_features WHERE feature_id IN ({_OURS})")
        store.scalar(f"DELETE FROM feature_examples WHERE feature_id IN ({_OURS})")
        store.scalar(f"DELETE FROM feature_kind_labels WHERE feature_id IN ({_OURS})")
        store.scalar(f"DELETE FROM features WHERE source IN {_SOURCES}")
        store.scalar("DELETE FROM sentences")
        return store.publish_staged(staging, OUTPUTS)
