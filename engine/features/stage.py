"""The features stage: reader activations (cached), the SAE, segment features, top examples, labels.

1. Read: every distinct segment text of the two checkpoints that the activation cache lacks goes through the
   truncated reader once; activations are written to the cache as they come (`engine.features.cache`).
2. SAE: `--sae train` trains on a sample of discovery-split token activations (all rollouts when the split
   is not drawn) or reuses the SAE this study trained before on the same inputs; otherwise the given SAE.
3. Encode: cached activations stream through the SAE; each segment's per-latent maximum is appended to
   `segment_features` (non-zero only). Thresholds, top examples, per-token activations and labels follow
   from SQL over what was written.
4. Structural features from the rollouts' structure (`engine.features.structural`).
5. Sentences of text and reasoning segments, and (unless `--no-sentence-features`) concept and behaviour-group
   features over their embeddings (`engine.features.sentence_features`, docs/concepts.md).
All writes happen in one transaction that first removes the previous features of these sources and sentences.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.features import sentence_features, structural
from engine.features.cache import ActivationCache, side_dir
from engine.features.encode import gather, segment_maxima, token_activations
from engine.features.inputs import INPUT_FORMAT
from engine.features.labels import Example, context_ngrams, corpus_frequencies, label_feature
from engine.features.reader import Reader, ReaderSpec, reader_dtype, resolve_device, resolve_reader
from engine.features.sae import (
    TrainedSae,
    check_sae,
    hook_layer,
    load_folder,
    load_pretrained,
    load_trained,
    parse_sae_spec,
    sparse_codes,
    train_sae,
)
from engine.features.settings import FeatureSettings
from engine.features.thresholds import strong_activations
from engine.progress import Progress
from engine.runs import invalidate_downstream, is_done, record_run
from engine.store import Store

if TYPE_CHECKING:
    import torch
    from sae_lens import SAE

log = logging.getLogger(__name__)

STAGE = "features"
VERSION = 1  # bump when the stage's outputs change meaning
ROLLOUT_BLOCK = 500  # rollouts whose messages are read at once for structural features
CORPUS_SAMPLE = 20_000  # segments sampled for corpus n-gram frequencies (labels)
CANDIDATES_PER_EXAMPLE = 4  # top-activation candidates per example kept, before copies of one text are dropped
STATUS_EVERY_S = 0.5

_SEGMENTS = "FROM segments s JOIN rollouts r USING (rollout_key) WHERE r.checkpoint IN (?, ?)"


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
    checkpoints = [config.before, config.after]
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
        f"|| ':' || coalesce(r.split, ''), ',' ORDER BY s.segment_id)), '') {_SEGMENTS}",
        checkpoints,
    )
    if is_done(store, STAGE, stage_config, input_hash):
        log.info("features: up to date, skipped")
        return 0
    seed = int(rng.integers(2**31 - 1))
    with record_run(store, STAGE, stage_config, input_hash, config.seed) as record:
        metrics = record.metrics
        started = time.perf_counter()
        sae, sae_source = _given_sae(config.sae, device)
        layer = config.layer if config.layer is not None or sae is None else hook_layer(sae)
        spec = resolve_reader(config.reader, layer, settings)
        if sae is not None:
            check_sae(sae, spec.hidden_size, spec.layer, f"--sae {config.sae}")
        dtype = str(reader_dtype(device)).removeprefix("torch.")
        cache = ActivationCache(side_dir(store.path) / "cache", spec.cache_key(dtype, settings), spec.hidden_size)
        with closing(cache):
            metrics.update(
                reader=spec.name,
                reader_source=spec.source,
                layer=spec.layer,
                hook=spec.hook_name,
                window=spec.window,
                dtype=dtype,
                device=device,
                cache=str(cache.dir),
            )
            _fill_cache(store, checkpoints, spec, cache, device, settings, progress, metrics)
            index = cache.index()
            if sae is None:
                trained = _trained_sae(store, checkpoints, spec, cache, index, settings, device, seed, progress)
                sae, sae_source = trained.sae, trained.metrics.get("folder", "")
                metrics.update({k: v for k, v in trained.metrics.items() if k != "folder"})
            sae = sparse_codes(sae)
            metrics["sae_source"] = sae_source
            metrics["sae_width"] = int(sae.cfg.d_sae)
            base = _first_free_id(store)
            with store.staging(_OUTPUTS) as staging:
                base = _write_sae_features(
                    store,
                    staging,
                    base,
                    checkpoints,
                    sae,
                    cache,
                    index,
                    settings,
                    rng,
                    progress,
                    record.run_id,
                    metrics,
                )
                base = _write_structural(store, staging, base, checkpoints, settings, record.run_id, metrics)
                sentence_features.extract(store, staging, base, checkpoints, config, spec, device, settings, rng,
                                          progress, record.run_id, metrics)  # fmt: skip
                written = _publish(store, staging)
            metrics["cache_bytes"] = cache.size_bytes()
            metrics["seconds"] = round(time.perf_counter() - started, 2)
            log.info("features: %d rows in %.1fs", written, metrics["seconds"])
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


# -- 1. read -------------------------------------------------------------------------------------------------


@contextmanager
def _rates(progress: Progress, description: str, total: int) -> Iterator[Callable[[int, int], None]]:
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


def _fill_cache(
    store: Store,
    checkpoints: list[str | None],
    spec: ReaderSpec,
    cache: ActivationCache,
    device: str,
    settings: FeatureSettings,
    progress: Progress,
    metrics: dict[str, Any],
) -> None:
    """Run the reader over every distinct segment text the cache lacks."""
    cursor = store.cursor()
    try:
        cursor.register("cached_hashes", cache.index().select("content_hash").to_arrow())
        missing = f"{_SEGMENTS} AND s.content_hash NOT IN (SELECT content_hash FROM cached_hashes)"
        distinct = cursor.execute(f"SELECT count(DISTINCT s.content_hash) {_SEGMENTS}", checkpoints).fetchall()[0][0]
        todo = cursor.execute(f"SELECT count(DISTINCT s.content_hash) {missing}", checkpoints).fetchall()[0][0]
        metrics.update(distinct_texts=distinct, cache_hits=distinct - todo, reader_segments=todo)
        if todo == 0:
            metrics.update(reader_tokens=0, reader_seconds=0.0)
            return
        started = time.perf_counter()
        reader = Reader.load(spec, device, settings)
        stream = cursor.sql(
            f"SELECT s.content_hash, any_value(s.kind), any_value(s.text) AS body {missing} "
            "GROUP BY s.content_hash ORDER BY length(body), s.content_hash",
            params=checkpoints,
        ).to_arrow_reader(1024)
        tokens = input_tokens = 0
        with _rates(progress, "reading segments", todo) as step, cache.writer() as writer:
            for segment in reader.read(
                row for batch in stream for row in zip(*batch.to_pydict().values(), strict=True)
            ):
                writer.add(segment)
                tokens += len(segment.spans)
                input_tokens += segment.input_tokens
                step(1, len(segment.spans))
        seconds = time.perf_counter() - started
        metrics.update(
            reader_padded_tokens=reader.stats.padded_tokens,
            reader_tokens=tokens,
            reader_input_tokens=input_tokens,
            reader_seconds=round(seconds, 2),
            reader_tokens_per_s=round(tokens / max(seconds, 1e-9), 1),
        )
    finally:
        cursor.close()


# -- 2. SAE --------------------------------------------------------------------------------------------------


def _trained_sae(
    store: Store,
    checkpoints: list[str | None],
    spec: ReaderSpec,
    cache: ActivationCache,
    index: pl.DataFrame,
    settings: FeatureSettings,
    device: str,
    seed: int,
    progress: Progress,
) -> TrainedSae:
    """The SAE trained on the discovery split: reused when this study trained it before on the same inputs."""
    discovery = store.frame(
        f"SELECT DISTINCT s.content_hash {_SEGMENTS} AND coalesce(r.split, 'discovery') = 'discovery' ORDER BY 1",
        checkpoints,
    )
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
    folder = side_dir(store.path) / "sae" / f"trained-{key}"
    reused = load_trained(folder, device)
    if reused is not None:
        log.info("reusing the SAE trained before: %s", folder)
        return TrainedSae(reused.sae, {**reused.metrics, "sae_trained": False, "folder": str(folder)})
    sample = _training_sample(cache, index.join(discovery, on="content_hash"), settings.max_train_tokens, seed)
    if sample.shape[0] < 2:
        raise InputError(
            f"checkpoints {checkpoints[0]} and {checkpoints[1]}: too little discovery text to "
            "train an SAE; ingest more rollouts or pass --sae FOLDER"
        )
    started = time.perf_counter()
    trained = train_sae(
        sample,
        hook_name=spec.hook_name,
        model_name=spec.name,
        settings=settings,
        device=device,
        seed=seed,
        folder=folder,
        progress=progress,
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


def _training_sample(cache: ActivationCache, segments: pl.DataFrame, cap: int, seed: int) -> torch.Tensor:
    """At most `cap` token activations drawn uniformly from the given cached segments, bf16 [tokens, hidden]."""
    import torch

    segments = segments.sort("shard", "start")
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
    parts = [cache.take(shard, rows[shards == shard]) for shard in np.unique(shards)]
    return torch.cat(parts) if parts else torch.empty(0, cache.hidden_size, dtype=torch.bfloat16)


# -- 3. encode, examples, labels -----------------------------------------------------------------------------


_OUTPUTS = ("features", "segment_features", "feature_examples", "sentences")
_SOURCES = "('sae', 'structural', 'concept', 'group')"
_OURS = f"SELECT feature_id FROM features WHERE source IN {_SOURCES}"


def _first_free_id(store: Store) -> int:
    """Feature ids start after any feature this stage does not own (its own are replaced)."""
    return int(store.scalar(f"SELECT coalesce(max(feature_id) + 1, 0) FROM features WHERE feature_id NOT IN ({_OURS})"))


def _publish(store: Store, staging: str) -> int:
    """Replace the previous SAE and structural features by the staged ones, in one transaction that also
    invalidates the statistics computed from the old ones."""
    written = 0
    with store.transaction():
        invalidate_downstream(store, STAGE)
        store.scalar(f"DELETE FROM segment_features WHERE feature_id IN ({_OURS})")
        store.scalar(f"DELETE FROM feature_examples WHERE feature_id IN ({_OURS})")
        store.scalar(f"DELETE FROM features WHERE source IN {_SOURCES}")
        store.scalar("DELETE FROM sentences")
        for table in _OUTPUTS:
            written += store.scalar(f"INSERT INTO main.{table} BY NAME SELECT * FROM {staging}.{table}")
    return written


def _write_sae_features(
    store: Store,
    staging: str,
    base: int,
    checkpoints: list[str | None],
    sae: SAE,
    cache: ActivationCache,
    index: pl.DataFrame,
    settings: FeatureSettings,
    rng: np.random.Generator,
    progress: Progress,
    run_id: str,
    metrics: dict[str, Any],
) -> int:
    """Stage SAE features with ids from `base`; returns the first id after them."""
    d_sae = int(sae.cfg.d_sae)
    started = time.perf_counter()
    cursor = store.cursor()
    try:
        cursor.register("cache_index", index.to_arrow())
        refs = (
            "FROM segments s JOIN rollouts r USING (rollout_key) JOIN cache_index c USING (content_hash) "
            "WHERE r.checkpoint IN (?, ?)"
        )
        total = cursor.execute(f"SELECT count(*) {refs}", checkpoints).fetchall()[0][0]
        stream = cursor.sql(
            f"SELECT s.segment_id, c.shard, c.start, c.n_tokens {refs} ORDER BY c.shard, c.start, s.segment_id",
            params=checkpoints,
        ).to_arrow_reader(512)
        with _rates(progress, "encoding segments", total) as step:
            for batch in stream:
                ids = batch.column("segment_id").to_numpy()
                lengths = batch.column("n_tokens").to_numpy()
                shards, starts = batch.column("shard").to_pylist(), batch.column("start").to_pylist()
                acts, _ = gather(cache, list(zip(shards, starts, lengths.tolist(), strict=True)))
                position, latent, value = segment_maxima(sae, acts, lengths.tolist(), settings.encode_tokens)
                frame = pa.table({"segment_id": ids[position], "feature_id": base + latent, "activation": value})
                store.append(f"{staging}.segment_features", frame)
                step(len(ids), int(lengths.sum()))
    finally:
        cursor.close()
    metrics["encode_seconds"] = round(time.perf_counter() - started, 2)
    stats = strong_activations(store, f"{staging}.segment_features", base, base + d_sae)
    examples = _top_examples(store, staging, base, d_sae, settings.top_examples)
    tokens = _example_tokens(sae, cache, index, examples, base, settings)
    examples = examples.with_columns(pl.Series("tokens", [json.dumps(t) for t in tokens], dtype=pl.String))
    store.append(f"{staging}.feature_examples", examples.drop("content_hash"))
    labels = _labels(store, checkpoints, examples, tokens, rng)
    rows = []
    for feature_id, p99 in stats.iter_rows():
        label = labels.get(feature_id)
        rows.append({
            "feature_id": feature_id, "source": "sae", "name": f"sae:{feature_id - base}",
            "label": label.label if label else "no examples", "sae_index": feature_id - base,
            "threshold": settings.threshold_fraction * float(p99),
            "top_ngrams": json.dumps(label.ngrams if label else []),
            "snippets": json.dumps(label.snippets if label else [], ensure_ascii=False), "run_id": run_id,
        })  # fmt: skip
    store.append(f"{staging}.features", pl.DataFrame(rows, schema=_FEATURE_SCHEMA))
    metrics["sae_features"] = len(rows)
    return base + d_sae


_FEATURE_SCHEMA = {
    "feature_id": pl.Int64,
    "source": pl.String,
    "name": pl.String,
    "label": pl.String,
    "sae_index": pl.Int32,
    "threshold": pl.Float64,
    "top_ngrams": pl.String,
    "snippets": pl.String,
    "run_id": pl.String,
}


def _top_examples(store: Store, staging: str, base: int, d_sae: int, top: int) -> pl.DataFrame:
    """Per feature and checkpoint, the `top` strongest discovery segments with distinct texts (rank 1 is the
    strongest): examples feed labels and drafting, so held-out rollouts never appear among them.

    A bounded top-n aggregate (`max_by(..., n)`) keeps CANDIDATES_PER_EXAMPLE x `top` candidates per group in
    one streaming pass, instead of sorting every (segment, feature) row; copies of the same text (which have
    the same activation) are then dropped. Ties go to the lower segment id."""
    candidates = store.frame(
        f"""
        SELECT sf.feature_id, r.checkpoint,
               max_by({{'segment_id': sf.segment_id, 'activation': sf.activation, 'content_hash': s.content_hash}},
                      {{'a': sf.activation, 'b': -sf.segment_id}}, {int(CANDIDATES_PER_EXAMPLE * top)}) AS best
        FROM {staging}.segment_features sf JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key)
        WHERE sf.feature_id >= ? AND sf.feature_id < ?
          AND coalesce(r.split, 'discovery') = 'discovery'  -- nothing held out reaches labels or drafting
        GROUP BY sf.feature_id, r.checkpoint
        """,
        [base, base + d_sae],
    )
    return (
        candidates.explode("best")
        .unnest("best")
        .sort(["feature_id", "checkpoint", "activation", "segment_id"], descending=[False, False, True, False])
        .unique(["feature_id", "checkpoint", "content_hash"], keep="first", maintain_order=True)
        .with_columns(rank=pl.int_range(1, pl.len() + 1, dtype=pl.Int32).over("feature_id", "checkpoint"))
        .filter(pl.col("rank") <= top)
        .sort("segment_id", "feature_id")
        .select("feature_id", "checkpoint", "segment_id", "activation", "content_hash", "rank")
    )


def _example_tokens(
    sae: SAE,
    cache: ActivationCache,
    index: pl.DataFrame,
    examples: pl.DataFrame,
    base: int,
    settings: FeatureSettings,
) -> list[list[list[float]]]:
    """Per example row, [[char_start, char_end, activation], ...] of its feature over its segment's tokens."""
    wanted: dict[str, set[int]] = defaultdict(set)
    for content_hash, feature_id in zip(examples["content_hash"], examples["feature_id"], strict=True):
        wanted[content_hash].add(feature_id - base)
    refs = pl.DataFrame({"content_hash": list(wanted)}).join(index, on="content_hash").sort("shard", "start")
    found: dict[tuple[str, int], list[list[float]]] = {}
    block: list[tuple[str, str, int, int]] = []
    for i, ref in enumerate(refs.iter_rows()):
        block.append(ref)
        if sum(n for *_, n in block) >= settings.encode_tokens or i == refs.height - 1:
            acts, spans = gather(cache, [(shard, start, n) for _, shard, start, n in block])
            latents = [sorted(wanted[h]) for h, *_ in block]
            for (h, *_), per_latent in zip(
                block, token_activations(sae, acts, spans, latents, settings.encode_tokens), strict=True
            ):
                found.update(((h, f), tokens) for f, tokens in per_latent.items())
            block = []
    return [found[(h, f - base)] for h, f in zip(examples["content_hash"], examples["feature_id"], strict=True)]


def _labels(
    store: Store,
    checkpoints: list[str | None],
    examples: pl.DataFrame,
    tokens: list[list[list[float]]],
    rng: np.random.Generator,
) -> dict[int, Any]:
    """Labels per feature from its top examples of both checkpoints against a corpus sample."""
    texts = store.frame(
        "SELECT segment_id, kind, text FROM segments WHERE segment_id IN (SELECT unnest(?::BIGINT[]))",
        [examples["segment_id"].unique().to_list()],
    )
    by_id = {sid: (kind, text) for sid, kind, text in texts.iter_rows()}
    pooled: dict[int, list[tuple[float, str, Example]]] = defaultdict(list)
    for (feature_id, segment_id, activation, content_hash), toks in zip(
        examples.select("feature_id", "segment_id", "activation", "content_hash").iter_rows(), tokens, strict=True
    ):
        kind, text = by_id[segment_id]
        pooled[feature_id].append((activation, content_hash, Example(text, kind, [tuple(t) for t in toks])))
    per_feature: dict[int, list[Example]] = {}
    for feature_id, items in pooled.items():
        items.sort(key=lambda t: -t[0])
        seen: set[str] = set()
        per_feature[feature_id] = [e for _, h, e in items if not (h in seen or seen.add(h))]
    contexts = {fid: [context_ngrams(e) for e in exs] for fid, exs in per_feature.items()}
    candidates = {g for grams in contexts.values() for found in grams for g in found}
    offset = int(rng.integers(2**31 - 1))
    corpus_texts = store.execute(
        f"SELECT s.text {_SEGMENTS} AND coalesce(r.split, 'discovery') = 'discovery' ORDER BY hash(s.segment_id + ?) "
        "LIMIT ?",
        [*checkpoints, offset, CORPUS_SAMPLE],
    ).fetchall()
    corpus, n_corpus = corpus_frequencies((t for (t,) in corpus_texts), candidates)
    return {fid: label_feature(exs, contexts[fid], corpus, n_corpus) for fid, exs in per_feature.items()}


# -- 4. structural -------------------------------------------------------------------------------------------


def _write_structural(
    store: Store,
    staging: str,
    base: int,
    checkpoints: list[str | None],
    settings: FeatureSettings,
    run_id: str,
    metrics: dict[str, Any],
) -> int:
    """Stage structural features with ids from `base`, computed a block of rollouts at a time; returns the
    next free id."""
    keys = [k for (k,) in store.execute(
        "SELECT rollout_key FROM rollouts WHERE checkpoint IN (?, ?) ORDER BY rollout_key", checkpoints
    ).fetchall()]  # fmt: skip
    names: dict[str, int] = {}
    segment_ids, name_ids = array("q"), array("q")
    for start in range(0, len(keys), ROLLOUT_BLOCK):
        lo, hi = keys[start], keys[min(start + ROLLOUT_BLOCK, len(keys)) - 1]
        messages = store.frame(
            "SELECT rollout_key, message_index, role, content, tool_calls, tool_call_id, is_error FROM messages "
            "WHERE rollout_key BETWEEN ? AND ? ORDER BY rollout_key, message_index",
            [lo, hi],
        )
        segments = store.frame(
            "SELECT s.rollout_key, segment_id, message_index, part_index, kind, text, tool_name, tool_args, "
            f"args_valid {_SEGMENTS} AND s.rollout_key BETWEEN ? AND ? ORDER BY s.rollout_key, segment_id",
            [*checkpoints, lo, hi],
        )
        by_rollout: dict[int, list[structural.Message]] = defaultdict(list)
        for row in messages.iter_rows(named=True):
            by_rollout[row["rollout_key"]].append(structural.message_from_row(row))
        for (rollout_key,), group in segments.group_by("rollout_key", maintain_order=True):
            parts = [structural.Segment(**row) for row in group.drop("rollout_key").iter_rows(named=True)]
            for segment_id, name in structural.rollout_features(by_rollout[rollout_key], parts):
                segment_ids.append(segment_id)
                name_ids.append(names.setdefault(name, len(names)))
    ordered = sorted(names)
    feature_of = np.empty(len(names), dtype=np.int64)
    for position, name in enumerate(ordered):
        feature_of[names[name]] = base + position
    store.append(f"{staging}.features", pl.DataFrame([{
        "feature_id": base + i, "source": "structural", "name": name, "label": structural.label(name),
        "threshold": structural.THRESHOLD, "run_id": run_id} for i, name in enumerate(ordered)]))  # fmt: skip
    store.append(f"{staging}.segment_features", pa.table({
        "segment_id": np.frombuffer(segment_ids, dtype=np.int64),
        "feature_id": feature_of[np.frombuffer(name_ids, dtype=np.int64)],
        "activation": np.ones(len(segment_ids), dtype=np.float32),
    }))  # fmt: skip
    store.scalar(
        f"""
        INSERT INTO {staging}.feature_examples (feature_id, checkpoint, rank, segment_id, activation, tokens)
        SELECT feature_id, checkpoint, rank, segment_id, activation, NULL FROM (
            SELECT sf.feature_id, r.checkpoint, sf.segment_id, sf.activation,
                   row_number() OVER (PARTITION BY sf.feature_id, r.checkpoint ORDER BY hash(sf.segment_id)) AS rank
            FROM {staging}.segment_features sf JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key)
            WHERE sf.feature_id >= ? AND coalesce(r.split, 'discovery') = 'discovery') WHERE rank <= ?
        """,
        [base, settings.top_examples],
    )
    metrics.update(structural_features=len(names), structural_segment_features=len(segment_ids))
    return base + len(names)
