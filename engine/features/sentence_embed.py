"""Sentence embeddings from the study's reader, cached by content hash beside the activation cache.

- An encoder (MiniLM, the default reader): the embedding the model was trained to give, i.e. ALL its blocks,
  the last hidden state mean-pooled over the attention mask (special tokens included, as sentence-transformers
  pools) and L2-normalised. This is not the truncated reader the token SAE reads.
- A causal LM: the same truncated model as the token activations (blocks up to `--layer`, no final norm), the
  mean of that layer's hidden states over the sentence's own tokens (BOS and other special tokens left out:
  they carry no meaning and a large norm), L2-normalised. Each sentence is read on its own, not inside its
  segment, so its embedding does not depend on where it was said (a recorded simplification).
A sentence longer than the reader's window is truncated to it (a sentence that long is rare and its start
says what it is about).

Cache layout: `STORE.rldiff/sentences/KEY/` with shards `NAME.f32` (float32 rows) and, written last and
atomically, `NAME.index.parquet` (content_hash = sha256 of the text, shard, start = row, n_tokens = 1), read
by positioned reads like the activation cache (`engine.features.cache`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from engine.config import DEFAULT_READER
from engine.features.cache import INDEX_SCHEMA, ActivationCache, side_dir
from engine.features.reader import Reader, padded_batches, resolve_device
from engine.features.reader_spec import ReaderSpec, resolve_reader
from engine.features.settings import FeatureSettings
from engine.progress import NullProgress, Progress
from engine.store.queries.runs import features_reader

if TYPE_CHECKING:
    import torch

    from engine.store import Store

log = logging.getLogger(__name__)

EMBED_FORMAT = 2  # bump when the pooling, the input text or the padding changes: part of the cache key
BATCH_TOKENS = 8192  # padded tokens per forward batch (sentences are sorted by length first)
BLOCK_SENTENCES = 4096  # sentences embedded and written to the cache at once (bounds memory)
# Vectors kept in memory by text (about 170,000 of MiniLM's): drafting looks the same sentences up thousands of
# times, and each disk-cache lookup is a join against the whole index.
MEMO_BYTES = 256 << 20


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class EmbeddingCache(ActivationCache):
    """Cached sentence embeddings of one embedder: float32 rows, one per distinct text. The index is read from
    disk once and kept up to date with this object's own writes: drafting looks vectors up hundreds of times,
    and each shard it writes would otherwise be one more file every later lookup reads."""

    def __init__(self, root: Path, key: str, hidden_size: int) -> None:
        super().__init__(root, key, hidden_size)
        self._known: pl.DataFrame | None = None

    def vectors(self, hashes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(found mask, float32 [n_found, d] in the order of the found hashes)."""
        if self._known is None:
            self._known = self.index()
        wanted = pl.DataFrame({"content_hash": list(hashes), "position": np.arange(len(hashes))})
        hits = wanted.join(self._known, on="content_hash", how="inner").sort("shard", "start")
        out = np.empty((hits.height, self.hidden_size), dtype=np.float32)
        for (shard,), part in hits.with_row_index("slot").group_by("shard", maintain_order=True):
            out[part["slot"].to_numpy()] = self.take_rows(f"{shard}.f32", np.float32, part["start"].to_numpy())
        found = np.zeros(len(hashes), dtype=bool)
        positions = hits["position"].to_numpy()
        found[positions] = True
        return found, out[np.argsort(positions)]  # hits were sorted by shard: back to input order

    def write(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Append one shard; its index is published last, atomically."""
        if not len(hashes):
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        shard = uuid.uuid4().hex[:16]
        (self.dir / f"{shard}.f32").write_bytes(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
        frame = pl.DataFrame(
            {"content_hash": list(hashes), "shard": shard, "start": np.arange(len(hashes)), "n_tokens": 1},
            schema=INDEX_SCHEMA,
        )
        tmp = self.dir / f"{shard}.index.parquet.tmp"
        frame.write_parquet(tmp)
        os.replace(tmp, self.dir / f"{shard}.index.parquet")
        if self._known is not None:
            self._known = pl.concat([self._known, frame]).unique("content_hash", keep="first")

    def _remove_orphans(self) -> None:
        indexed = {f.name.removesuffix(".index.parquet") for f in self.dir.glob("*.index.parquet")}
        for path in [*self.dir.glob("*.f32"), *self.dir.glob("*.tmp")]:
            if path.suffix == ".tmp" or path.stem not in indexed:
                path.unlink()


class SentenceEmbedder:
    """Embeds sentences with one reader; `embed` returns L2-normalised float32 rows, cached on disk."""

    def __init__(
        self,
        spec: ReaderSpec,
        device: str,
        cache_root: Path,
        settings: FeatureSettings | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.spec, self.device = spec, resolve_device(device)
        self.settings = settings or FeatureSettings.for_device(self.device)
        self.progress = progress or NullProgress()
        self.pooling = "mean-layer" if spec.causal else "mean-all"
        self.cache = EmbeddingCache(cache_root, self.cache_key, spec.hidden_size)
        if self.cache.dir.is_dir():
            self.cache._remove_orphans()
        self._reader: Reader | None = None
        self._memo: dict[str, np.ndarray] = {}
        self.embedded = 0  # sentences run through the model (cache misses), for run metrics

    @property
    def dim(self) -> int:
        return self.spec.hidden_size

    @property
    def cache_key(self) -> str:
        ident = {
            "fingerprint": self.spec.fingerprint,
            "layer": self.spec.layer if self.spec.causal else self.spec.n_layers - 1,
            "window": self.spec.window,
            "pooling": self.pooling,
            "format": EMBED_FORMAT,
        }
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
        slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(self.spec.name).name or "reader")
        return f"{slug[:40]}-{self.pooling}-{digest}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 [len(texts), d], each row L2-normalised; texts neither in memory nor on disk are run in batches."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        rows: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            vector = self._memo.get(text)
            if vector is None:
                rows.setdefault(text, []).append(i)
            else:
                out[i] = vector
        if rows:
            for (text, places), vector in zip(rows.items(), self._cached_or_run(list(rows)), strict=True):
                out[places] = vector
                self._remember(text, vector)
        return out

    def _cached_or_run(self, texts: list[str]) -> np.ndarray:
        """Distinct texts' vectors from the disk cache, running (and caching) the ones it lacks."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        hashes = [text_hash(t) for t in texts]
        found, cached = self.cache.vectors(hashes)
        out[found] = cached
        todo = np.flatnonzero(~found)
        if len(todo):
            with self.progress.track("embedding sentences", len(todo)) as advance:
                for start in range(0, len(todo), BLOCK_SENTENCES):
                    block = todo[start : start + BLOCK_SENTENCES]
                    out[block] = self._run([texts[i] for i in block])
                    self.cache.write([hashes[i] for i in block], out[block])
                    advance(len(block))
            self.embedded += len(todo)
        return out

    def _remember(self, text: str, vector: np.ndarray) -> None:
        """Keep `text`'s vector in memory, forgetting the oldest beyond MEMO_BYTES."""
        room = MEMO_BYTES // (4 * self.dim)
        if not room:
            return
        if len(self._memo) >= room:
            del self._memo[next(iter(self._memo))]
        self._memo[text] = vector.copy()

    def _model(self) -> Reader:
        if self._reader is None:
            self._reader = Reader.load(self._load_spec(), self.device, self.settings)
        return self._reader

    def _load_spec(self) -> ReaderSpec:
        """The model to load: the truncated reader for a causal LM, every block for an encoder."""
        return self.spec if self.spec.causal else replace(self.spec, layer=self.spec.n_layers - 1)

    def _run(self, texts: list[str]) -> np.ndarray:
        """Embed texts with the model in `padded_batches`: a sentence's vector does not depend on the others."""
        reader = self._model()
        assert reader.tokenizer is not None
        body = self.spec.window - len(reader.lead) - len(reader.trail)
        ids = reader.tokenizer(texts, add_special_tokens=False, return_attention_mask=False)["input_ids"]
        ids = [reader.lead + t[:body] + reader.trail for t in ids]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for rows, width in padded_batches([len(t) for t in ids], BATCH_TOKENS, self.spec.window):
            out[rows] = self._pool(reader, [ids[i] for i in rows], width).numpy()
        return out

    def _pool(self, reader: Reader, batch: list[list[int]], width: int) -> torch.Tensor:
        """Mean over each row's pooled tokens, L2-normalised, float32 on the host."""
        import torch

        input_ids = torch.full((len(batch), width), reader.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        pooled = torch.zeros((len(batch), width), dtype=torch.float32)
        lead, trail = len(reader.lead), len(reader.trail)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            mask[row, : len(ids)] = 1
            if self.spec.causal:  # the sentence's own tokens only
                pooled[row, lead : len(ids) - trail] = 1
            else:  # sentence-transformers' mean pooling: every attended token
                pooled[row, : len(ids)] = 1
        hidden = reader.forward(input_ids.to(self.device), mask.to(self.device)).float()
        weights = pooled.to(hidden.device).unsqueeze(-1)
        mean = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)
        return torch.nn.functional.normalize(mean, dim=-1).cpu()


def embedder_for_store(store: Store, device: str = "auto") -> SentenceEmbedder:
    """The embedder of the study's reader (the reader of its last features run; the default MiniLM otherwise)."""
    recorded, layer = features_reader(store)
    name = recorded or DEFAULT_READER
    resolved = resolve_device(device)
    settings = FeatureSettings.for_device(resolved)
    spec = resolve_reader(name, int(layer) if layer is not None else None, settings)
    return SentenceEmbedder(spec, resolved, side_dir(store.path) / "sentences", settings)
