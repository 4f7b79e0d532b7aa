"""The sentence pass of the features stage: sentences, their embeddings, concept features and behaviour groups.

1. Sentences: every text and reasoning segment of the two checkpoints is split (`engine.features.sentences`)
   and the spans are written in bulk to `sentences` (tool calls have none: a tool call is one unit).
2. Train: distinct discovery sentences (at most MAX_TRAIN_SENTENCES, drawn by the seed) are embedded
   (`engine.features.sentence_embed`, cached by content hash); the concept SAE is trained on them
   (`engine.features.concepts`) or loaded (`--concept-sae`), and behaviour groups are found on at most
   `groups.CLUSTER_SAMPLE` of them (`engine.features.groups`), merged through the concept features.
3. Score: every distinct sentence text of both splits streams through the embedder, the concept SAE and the
   groups' exemplars, a block at a time, into a scratch table of sentence activations; a segment's activation
   is the max over its sentences (`segment_features`, non-zero only; groups only where they fire).
4. Examples and labels from the discovery split only: each feature's top sentences (the example's evidence
   span is the sentence, `feature_examples.tokens = [[char_start, char_end, activation]]`), and a label of a
   medoid sentence plus distinctive words (`engine.features.sentence_labels`), for the feature and, from its
   sentences of one kind, for each kind (`feature_kind_labels`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from engine.config import AnalyzeConfig
from engine.features.cache import side_dir
from engine.features.concepts import MIN_SENTENCES, concept_codes, concept_width, load_concepts, train_concepts
from engine.features.concepts import K as CONCEPT_K
from engine.features.groups import CLUSTER_SAMPLE, GroupModel, find_contrastive_groups
from engine.features.reader_spec import ReaderSpec
from engine.features.run import (
    CANDIDATES_PER_EXAMPLE,
    DISCOVERY_ROLLOUTS,
    KIND_LABEL_SCHEMA,
    SEGMENTS,
    LabelKey,
    ranked_examples,
)
from engine.features.sentence_embed import SentenceEmbedder
from engine.features.sentence_labels import SentenceLabel, background_counts, label_sentences
from engine.features.sentences import split_sentences
from engine.features.settings import FeatureSettings
from engine.features.thresholds import strong_activations
from engine.progress import Progress
from engine.store import Store

if TYPE_CHECKING:
    from sae_lens import SAE

log = logging.getLogger(__name__)

MAX_TRAIN_SENTENCES = 50_000  # discovery sentences embedded for training (float32 x 384: 77 MB)
BLOCK = 4096  # distinct sentences scored at once
LABEL_SENTENCES = 24  # top sentences a label is drawn from
SNIPPETS = 5  # top sentences kept in features.snippets
SEGMENT_BLOCK = 2048  # segments split at once

_ACTS = "sentence_acts"  # scratch table in the staging schema: (text_hash, feature_id, activation)
# Halves of the discovery tasks for behaviour groups: the checkpoints of CHOOSER sentences choose which
# neighbourhoods are contrastive, CANDIDATE sentences become members (engine.features.groups).
CHOOSER, CANDIDATE, NEITHER = 0, 1, -1
_HALF = "CASE WHEN md5(? || ':' || r.task_id) < '8' THEN 0 ELSE 1 END"


def write_sentences(store: Store, staging: str, checkpoints: list[str], progress: Progress) -> int:
    """Split every text and reasoning segment and append the sentences to `{staging}.sentences`."""
    total = int(store.scalar(f"SELECT count(*) {SEGMENTS} AND s.kind IN ('text', 'reasoning')", checkpoints))
    cursor = store.cursor()
    written = 0
    try:
        stream = cursor.sql(
            f"SELECT s.segment_id, s.text {SEGMENTS} AND s.kind IN ('text', 'reasoning') ORDER BY s.segment_id",
            params=checkpoints,
        ).to_arrow_reader(SEGMENT_BLOCK)
        with progress.track("splitting sentences", total) as advance:
            for batch in stream:
                columns: dict[str, list] = {k: [] for k in ("segment_id", "sentence_index", "char_start", "char_end")}
                texts: list[str] = []
                for segment_id, text in zip(*batch.to_pydict().values(), strict=True):
                    for index, (start, end) in enumerate(split_sentences(text)):
                        columns["segment_id"].append(segment_id)
                        columns["sentence_index"].append(index)
                        columns["char_start"].append(start)
                        columns["char_end"].append(end)
                        texts.append(text[start:end])
                ids = np.arange(written, written + len(texts), dtype=np.int64)
                store.append(f"{staging}.sentences", pa.table({"sentence_id": ids, **columns, "text": texts}))
                written += len(texts)
                advance(batch.num_rows)
    finally:
        cursor.close()
    return written


def extract(
    store: Store,
    staging: str,
    base: int,
    checkpoints: list[str],
    config: AnalyzeConfig,
    spec: ReaderSpec,
    device: str,
    settings: FeatureSettings,
    rng: np.random.Generator,
    progress: Progress,
    run_id: str,
    metrics: dict[str, Any],
) -> int:
    """Stage the sentences, and (unless `--no-sentence-features`) concept and group features with ids from
    `base`; returns the next free id. Sentences are always written: they are cheap and other stages read them."""
    started = time.perf_counter()
    metrics["sentences"] = write_sentences(store, staging, checkpoints, progress)
    metrics["split_seconds"] = round(time.perf_counter() - started, 2)
    if not config.sentence_features or not metrics["sentences"]:
        return base
    embedder = SentenceEmbedder(spec, device, side_dir(store.path) / "sentences", settings, progress)
    texts, kinds, after_share, half = _discovery_sentences(store, staging, checkpoints[1], config.seed, rng)
    if len(texts) < MIN_SENTENCES and not config.concept_sae:
        log.warning("only %d distinct discovery sentences: no concept or group features", len(texts))
        metrics["sentence_features_skipped"] = f"{len(texts)} discovery sentences, fewer than {MIN_SENTENCES}"
        return base
    vectors = embedder.embed(texts)
    seed = int(rng.integers(2**31 - 1))
    sae = _concept_sae(store, config, embedder, texts, vectors, settings, device, seed, progress, metrics)
    d_sae = int(sae.cfg.d_sae)
    cluster = np.sort(rng.permutation(len(texts))[:CLUSTER_SAMPLE])
    groups = find_contrastive_groups(
        vectors[cluster], after_share[cluster], half[cluster] == CHOOSER, half[cluster] == CANDIDATE, rng
    )
    metrics.update(concept_width=d_sae, groups=groups.n_groups, group_sample=len(cluster))
    store.execute(f"CREATE TABLE {staging}.{_ACTS} (text_hash VARCHAR, feature_id BIGINT, activation FLOAT)")
    _score(store, staging, embedder, sae, groups, base, settings, progress)
    store.execute(
        f"INSERT INTO {staging}.segment_features SELECT st.segment_id, a.feature_id, max(a.activation) "
        f"FROM {staging}.{_ACTS} a JOIN (SELECT segment_id, sha256(text) AS text_hash FROM {staging}.sentences) st "
        "USING (text_hash) GROUP BY ALL"
    )
    group_base = base + d_sae
    examples = _top_examples(store, staging, base, settings.top_examples)
    store.append(f"{staging}.feature_examples", examples.drop("text", "kind"))
    background, n_background = background_counts(texts)
    top = _label_sentences(store, staging, base)
    concept_thresholds = dict(strong_activations(store, f"{staging}.segment_features", base, group_base).iter_rows())
    group_texts = [[(texts[cluster[i]], kinds[cluster[i]]) for i in rows] for rows in groups.members]
    fired = set(store.frame(f"SELECT DISTINCT feature_id FROM {staging}.{_ACTS} WHERE feature_id >= ?", [group_base])[
        "feature_id"
    ].to_list())  # fmt: skip
    for g, members in enumerate(group_texts):
        if group_base + g in fired:
            central = [members[i] for i in _nearest_first(groups, g)]
            top.update(((group_base + g, kind), said) for kind, said in each_kind(central).items())
    labels = {key: _label(said, embedder, background, n_background) for key, said in top.items()}
    rows = [
        _feature_row(feature_id, "concept", f"concept:{feature_id - base}", settings.threshold_fraction * float(p99),
                     labels.get((feature_id, None)), run_id)
        for feature_id, p99 in concept_thresholds.items()
    ] + [
        _feature_row(group_base + g, "group", f"group:{g}", float(groups.thresholds[g]), labels[(group_base + g, None)],
                     run_id)
        for g in range(groups.n_groups) if group_base + g in fired
    ]  # fmt: skip
    store.append(f"{staging}.features", pl.DataFrame(rows, schema=FEATURE_SCHEMA))
    kind_labels = [(fid, kind, label.label) for (fid, kind), (label, _) in labels.items() if kind is not None]
    store.append(f"{staging}.feature_kind_labels", pl.DataFrame(kind_labels, schema=KIND_LABEL_SCHEMA, orient="row"))
    metrics.update(
        concept_features=sum(r["source"] == "concept" for r in rows),
        group_features=sum(r["source"] == "group" for r in rows),
        sentences_embedded=embedder.embedded,
        sentence_seconds=round(time.perf_counter() - started, 2),
    )
    return group_base + groups.n_groups


FEATURE_SCHEMA = {
    "feature_id": pl.Int64,
    "source": pl.String,
    "name": pl.String,
    "label": pl.String,
    "threshold": pl.Float64,
    "top_ngrams": pl.String,
    "snippets": pl.String,
    "run_id": pl.String,
}


def _discovery_sentences(
    store: Store, staging: str, after: str, seed: int, rng: np.random.Generator
) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """Distinct discovery sentence texts (at most MAX_TRAIN_SENTENCES, drawn by `rng`), a kind for each, its
    share of occurrences in the `after` checkpoint, and its half of the tasks (`_half`): CHOOSER or CANDIDATE
    when all its occurrences are in that half, NEITHER otherwise. The halves split tasks by a hash of the
    seed and the task id, so both checkpoints of a task are in the same half."""
    frame = store.frame(
        f"SELECT st.text, min(s.kind) AS kind, avg((r.checkpoint IS NOT DISTINCT FROM ?)::DOUBLE) AS after_share, "
        f"min({_HALF}) AS low, max({_HALF}) AS high FROM {staging}.sentences st JOIN segments s USING (segment_id) "
        f"JOIN rollouts r USING (rollout_key) WHERE {DISCOVERY_ROLLOUTS} GROUP BY st.text ORDER BY sha256(st.text)",
        [after, str(seed), str(seed)],
    )
    if frame.height > MAX_TRAIN_SENTENCES:
        frame = frame[np.sort(rng.choice(frame.height, MAX_TRAIN_SENTENCES, replace=False))]
    low, high = frame["low"].to_numpy(), frame["high"].to_numpy()
    half = np.where(low == high, low, NEITHER).astype(np.int8)
    return frame["text"].to_list(), frame["kind"].to_list(), frame["after_share"].to_numpy(), half


def _concept_sae(
    store: Store,
    config: AnalyzeConfig,
    embedder: SentenceEmbedder,
    texts: list[str],
    vectors: np.ndarray,
    settings: FeatureSettings,
    device: str,
    seed: int,
    progress: Progress,
    metrics: dict[str, Any],
) -> SAE:
    """The concept SAE: `--concept-sae PATH`, or trained on the discovery sentences (reused when unchanged)."""
    if config.concept_sae:
        metrics["concept_sae_source"] = str(config.concept_sae)
        return load_concepts(Path(config.concept_sae).expanduser(), device, embedder.dim)
    # the SAE's shape is in the key: one trained under another sizing rule is not reused
    shape = {"width": concept_width(len(texts), embedder.dim), "k": CONCEPT_K}
    key = hashlib.sha256(
        json.dumps({"embedder": embedder.cache_key, "seed": seed, **shape, "sentences": sorted(texts)}).encode()
    ).hexdigest()[:16]
    folder = side_dir(store.path) / "sae" / f"concepts-{key}"
    trained = train_concepts(
        vectors, reader=embedder.spec.name, settings=settings, device=device, seed=seed, folder=folder,
        progress=progress,
    )  # fmt: skip
    metrics["concept_sae_source"] = str(folder)
    metrics.update({f"concept_{k.removeprefix('sae_')}": v for k, v in trained.metrics.items()})
    return trained.sae


def concept_rows(sae: SAE, vectors: np.ndarray, settings: FeatureSettings) -> list[np.ndarray]:
    """Per concept latent, the rows of `vectors` it fires on."""
    rows, latents = [], []
    for row, latent, _ in concept_codes(sae, vectors, settings.encode_tokens):
        rows.append(row)
        latents.append(latent)
    if not rows:
        return []
    row, latent = np.concatenate(rows), np.concatenate(latents)
    order = np.argsort(latent, kind="stable")
    cuts = np.flatnonzero(np.diff(latent[order])) + 1
    return np.split(row[order], cuts)


def _score(
    store: Store,
    staging: str,
    embedder: SentenceEmbedder,
    sae: SAE,
    groups: GroupModel,
    base: int,
    settings: FeatureSettings,
    progress: Progress,
) -> None:
    """Sentence activations of every distinct sentence text, a block at a time, into the scratch table."""
    group_base = base + int(sae.cfg.d_sae)
    total = int(store.scalar(f"SELECT count(DISTINCT text) FROM {staging}.sentences"))
    cursor = store.cursor()
    try:
        stream = cursor.sql(
            f"SELECT text, sha256(text) AS h FROM {staging}.sentences GROUP BY text ORDER BY h"
        ).to_arrow_reader(BLOCK)
        with progress.track("scoring sentences", total) as advance:
            for batch in stream:
                texts, hashes = batch.column("text").to_pylist(), np.asarray(batch.column("h").to_pylist())
                vectors = embedder.embed(texts)
                parts = [
                    (hashes[row], base + latent, value)
                    for row, latent, value in concept_codes(sae, vectors, settings.encode_tokens)
                ]
                row, group, similarity = groups.fire(vectors)
                parts.append((hashes[row], group_base + group, similarity))
                store.append(f"{staging}.{_ACTS}", pa.table({
                    "text_hash": np.concatenate([p[0] for p in parts]),
                    "feature_id": np.concatenate([p[1] for p in parts]).astype(np.int64),
                    "activation": np.concatenate([p[2] for p in parts]).astype(np.float32),
                }))  # fmt: skip
                advance(len(texts))
    finally:
        cursor.close()


_SENTENCE_ACTS = """
    FROM {staging}.{acts} a
    JOIN (SELECT *, sha256(text) AS text_hash FROM {staging}.sentences) st USING (text_hash)
    JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key)
    WHERE a.feature_id >= ? AND {discovery}
"""


def _top_examples(store: Store, staging: str, base: int, top: int) -> pl.DataFrame:
    """Per feature and checkpoint, the `top` strongest discovery sentences with distinct texts."""
    where = _SENTENCE_ACTS.format(staging=staging, acts=_ACTS, discovery=DISCOVERY_ROLLOUTS)
    candidates = store.frame(
        f"""
        SELECT a.feature_id, r.checkpoint,
               max_by({{'segment_id': st.segment_id, 'activation': a.activation, 'char_start': st.char_start,
                        'char_end': st.char_end, 'text': st.text, 'kind': s.kind}},
                      {{'a': a.activation, 'b': -st.sentence_id}}, {CANDIDATES_PER_EXAMPLE * top}) AS best
        {where} GROUP BY a.feature_id, r.checkpoint
        """,
        [base],
    )
    examples = ranked_examples(candidates, "text", top)
    spans = [
        json.dumps([[start, end, float(value)]])
        for start, end, value in examples.select("char_start", "char_end", "activation").iter_rows()
    ]
    return examples.with_columns(pl.Series("tokens", spans, dtype=pl.String)).select(
        "feature_id", "checkpoint", "rank", "segment_id", "activation", "tokens", "text", "kind"
    )


def _label_sentences(store: Store, staging: str, base: int) -> dict[LabelKey, list[tuple[str, str]]]:
    """Per feature, its LABEL_SENTENCES strongest distinct discovery sentences (text, kind), both checkpoints
    (key (feature, None)); and per feature and kind, those of that kind (key (feature, kind))."""
    where = _SENTENCE_ACTS.format(staging=staging, acts=_ACTS, discovery=DISCOVERY_ROLLOUTS)
    # ties (a sentence in two cases: an uncased embedder reads them alike) go to the greater text, not to
    # whichever thread found one first
    top = f"max_by({{'text': text, 'kind': kind, 'a': a}}, {{'a': a, 't': text}}, {LABEL_SENTENCES}) AS best"
    frame = store.frame(
        f"WITH said AS (SELECT a.feature_id, st.text, s.kind, max(a.activation) AS a {where} GROUP BY ALL) "
        f"SELECT feature_id, NULL AS kind, {top} FROM (SELECT feature_id, text, min(kind) AS kind, max(a) AS a "
        "FROM said GROUP BY ALL) GROUP BY feature_id "
        f"UNION ALL SELECT feature_id, kind, {top} FROM said GROUP BY feature_id, kind",
        [base],
    )
    return {(fid, kind): [(b["text"], b["kind"]) for b in best] for fid, kind, best in frame.iter_rows()}


def _nearest_first(groups: GroupModel, g: int) -> list[int]:
    """Positions (in `groups.members[g]`) of the group's exemplars first, then the other members."""
    members = groups.members[g]
    first = [int(np.flatnonzero(members == r)[0]) for r in groups.exemplar_rows[g]]
    rest = [i for i in range(len(members)) if i not in set(first)]
    return first + rest


def each_kind(said: list[tuple[str, str]]) -> dict[str | None, list[tuple[str, str]]]:
    """The first LABEL_SENTENCES sentences (text, kind) of `said`, for the feature's own label (key None), and
    for each kind the first LABEL_SENTENCES of that kind, however far down the list they come."""
    out: dict[str | None, list[tuple[str, str]]] = {None: said[:LABEL_SENTENCES]}
    for kind in dict.fromkeys(k for _, k in said):
        out[kind] = [m for m in said if m[1] == kind][:LABEL_SENTENCES]
    return out


def _label(
    top: list[tuple[str, str]], embedder: SentenceEmbedder, background: Any, n_background: int
) -> tuple[SentenceLabel, list[str]]:
    """The label of top sentences (text, kind), strongest first, and their texts."""
    texts = [t for t, _ in top]
    return label_sentences(texts, [k for _, k in top], embedder.embed(texts), background, n_background), texts


def _feature_row(
    feature_id: int,
    source: str,
    name: str,
    threshold: float,
    labelled: tuple[SentenceLabel, list[str]] | None,
    run_id: str,
) -> dict[str, Any]:
    label, texts = labelled or (SentenceLabel("no examples", "", []), [])
    words = [{"ngram": w["word"], "score": w["z"]} for w in label.words]
    return {
        "feature_id": feature_id, "source": source, "name": name, "label": label.label, "threshold": threshold,
        "top_ngrams": json.dumps(words), "snippets": json.dumps(texts[:SNIPPETS], ensure_ascii=False),
        "run_id": run_id,
    }  # fmt: skip
