"""Steps 3 and 4 of the features stage for SAE latents: cached activations stream through the SAE; each
segment's per-latent maximum is staged in `segment_features` (non-zero only); thresholds, top examples (discovery
only), per-token activations and labels (the feature's, and each kind's from its examples of that kind) follow
from SQL over what was written."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from engine.features.cache import ActivationCache
from engine.features.encode import gather, segment_maxima, token_activations
from engine.features.labels import Example, FeatureLabel, context_ngrams, corpus_frequencies, label_feature
from engine.features.run import (
    CANDIDATES_PER_EXAMPLE,
    DISCOVERY_ROLLOUTS,
    KIND_LABEL_SCHEMA,
    SEGMENTS,
    FeatureRun,
    LabelKey,
    ranked_examples,
    rates,
)
from engine.features.settings import FeatureSettings
from engine.features.thresholds import strong_activations
from engine.store import Store

if TYPE_CHECKING:
    from sae_lens import SAE

CORPUS_SAMPLE = 20_000  # segments sampled for corpus n-gram frequencies (labels)

TokenKey = tuple[str, int]  # (content hash, feature id) of an example


def write_sae_features(run: FeatureRun, base: int, sae: SAE, cache: ActivationCache, index: pl.DataFrame) -> int:
    """Stage SAE features with ids from `base`; returns the first id after them."""
    store, staging, settings, metrics = run.store, run.staging, run.settings, run.metrics
    d_sae = int(sae.cfg.d_sae)
    started = time.perf_counter()
    cursor = store.cursor()
    try:
        cursor.register("cache_index", index.to_arrow())
        refs = (
            "FROM segments s JOIN rollouts r USING (rollout_key) JOIN cache_index c USING (content_hash) "
            "WHERE r.checkpoint IN (?, ?)"
        )
        total = cursor.execute(f"SELECT count(*) {refs}", run.params).fetchall()[0][0]
        stream = cursor.sql(
            f"SELECT s.segment_id, c.shard, c.start, c.n_tokens {refs} ORDER BY c.shard, c.start, s.segment_id",
            params=run.params,
        ).to_arrow_reader(512)
        with rates(run.progress, "encoding segments", total) as step:
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
    by_kind = _top_examples(store, staging, base, d_sae, settings.top_examples, per_kind=True)
    tokens = _example_tokens(sae, cache, index, pl.concat([examples, by_kind.drop("kind")]), base, settings)
    examples = examples.with_columns(
        pl.Series("tokens", [json.dumps(tokens[k]) for k in _token_keys(examples)], dtype=pl.String)
    )
    store.append(f"{staging}.feature_examples", examples.drop("content_hash"))
    texts = _segment_texts(run, pl.concat([examples["segment_id"], by_kind["segment_id"]]).unique().to_list())
    labels = _labels(run, {**_grouped(examples, texts, tokens), **_grouped(by_kind, texts, tokens)})
    kind_labels = [(fid, kind, label.label) for (fid, kind), label in labels.items() if kind is not None]
    store.append(f"{staging}.feature_kind_labels", pl.DataFrame(kind_labels, schema=KIND_LABEL_SCHEMA, orient="row"))
    rows = []
    for feature_id, p99 in stats.iter_rows():
        label = labels.get((feature_id, None))
        rows.append({
            "feature_id": feature_id, "source": "sae", "name": f"sae:{feature_id - base}",
            "label": label.label if label else "no examples", "sae_index": feature_id - base,
            "threshold": settings.threshold_fraction * float(p99),
            "top_ngrams": json.dumps(label.ngrams if label else []),
            "snippets": json.dumps(label.snippets if label else [], ensure_ascii=False), "run_id": run.run_id,
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


def _top_examples(
    store: Store, staging: str, base: int, d_sae: int, top: int, *, per_kind: bool = False
) -> pl.DataFrame:
    """Per feature and checkpoint (and segment kind when `per_kind`, with a `kind` column), the `top` strongest
    discovery segments with distinct texts (rank 1 is the strongest): examples feed labels and drafting, so
    held-out rollouts never appear among them.

    A bounded top-n aggregate (`max_by(..., n)`) keeps CANDIDATES_PER_EXAMPLE x `top` candidates per group in
    one streaming pass, instead of sorting every (segment, feature) row; copies of the same text (which have
    the same activation) are then dropped. Ties go to the lower segment id."""
    groups = ("feature_id", "checkpoint", "kind") if per_kind else ("feature_id", "checkpoint")
    candidates = store.frame(
        f"""
        SELECT sf.feature_id, r.checkpoint, {"s.kind," if per_kind else ""}
               max_by({{'segment_id': sf.segment_id, 'activation': sf.activation, 'content_hash': s.content_hash}},
                      {{'a': sf.activation, 'b': -sf.segment_id}}, {int(CANDIDATES_PER_EXAMPLE * top)}) AS best
        FROM {staging}.segment_features sf JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key)
        WHERE sf.feature_id >= ? AND sf.feature_id < ?
          AND {DISCOVERY_ROLLOUTS}  -- nothing held out reaches labels or drafting
        GROUP BY ALL
        """,
        [base, base + d_sae],
    )
    return (
        ranked_examples(candidates, "content_hash", top, groups)
        .sort("segment_id", "feature_id")
        .select("feature_id", "checkpoint", "segment_id", "activation", "content_hash", "rank", *groups[2:])
    )


def _example_tokens(
    sae: SAE,
    cache: ActivationCache,
    index: pl.DataFrame,
    examples: pl.DataFrame,
    base: int,
    settings: FeatureSettings,
) -> dict[TokenKey, list[list[float]]]:
    """Per (content hash, feature) of the example rows, [[char_start, char_end, activation], ...] of the feature
    over the segment's tokens."""
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
    return {(h, f + base): tokens for (h, f), tokens in found.items()}


def _token_keys(examples: pl.DataFrame) -> list[TokenKey]:
    return list(zip(examples["content_hash"], examples["feature_id"], strict=True))


def _segment_texts(run: FeatureRun, segment_ids: list[int]) -> dict[int, tuple[str, str]]:
    """(kind, text) of each of `segment_ids`, read in one query."""
    texts = run.store.frame(
        "SELECT segment_id, kind, text FROM segments WHERE segment_id IN (SELECT unnest(?::BIGINT[]))", [segment_ids]
    )
    return {sid: (kind, text) for sid, kind, text in texts.iter_rows()}


def _grouped(
    examples: pl.DataFrame, by_id: dict[int, tuple[str, str]], tokens: dict[TokenKey, list[list[float]]]
) -> dict[LabelKey, list[Example]]:
    """The examples of each feature (and kind, where `examples` has a kind column), strongest first, one per
    distinct text; `by_id` holds the segments' (kind, text)."""
    per_kind = "kind" in examples.columns
    pooled: dict[LabelKey, list[tuple[float, str, Example]]] = defaultdict(list)
    for feature_id, segment_id, activation, content_hash in examples.select(
        "feature_id", "segment_id", "activation", "content_hash"
    ).iter_rows():
        kind, text = by_id[segment_id]
        spans = [(int(start), int(end), float(value)) for start, end, value in tokens[(content_hash, feature_id)]]
        pooled[(feature_id, kind if per_kind else None)].append((activation, content_hash, Example(text, kind, spans)))
    grouped: dict[LabelKey, list[Example]] = {}
    for key, items in pooled.items():
        items.sort(key=lambda t: -t[0])
        by_text: dict[str, Example] = {}  # the strongest example of each distinct text
        for _, content_hash, example in items:
            by_text.setdefault(content_hash, example)
        grouped[key] = list(by_text.values())
    return grouped


def _labels(run: FeatureRun, grouped: dict[LabelKey, list[Example]]) -> dict[LabelKey, FeatureLabel]:
    """A label per group of examples (a feature's top examples of both checkpoints, or of one kind) against one
    corpus sample."""
    contexts = {key: [context_ngrams(e) for e in exs] for key, exs in grouped.items()}
    candidates = {g for grams in contexts.values() for found in grams for g in found}
    offset = int(run.rng.integers(2**31 - 1))
    corpus_texts = run.store.execute(
        f"SELECT s.text {SEGMENTS} AND {DISCOVERY_ROLLOUTS} ORDER BY hash(s.segment_id + ?) LIMIT ?",
        [*run.checkpoints, offset, CORPUS_SAMPLE],
    ).fetchall()
    corpus, n_corpus = corpus_frequencies((t for (t,) in corpus_texts), candidates)
    return {key: label_feature(exs, contexts[key], corpus, n_corpus) for key, exs in grouped.items()}
