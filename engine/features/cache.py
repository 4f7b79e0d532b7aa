"""Activation cache beside the store: reader activations keyed by (reader, layer, segment content hash).

Layout: `STORE.rldiff/cache/READER_KEY/` (the key names reader, layer, window and input format; see
`ReaderSpec.cache_key`). Each reader pass writes one shard: `NAME.acts` (bf16 bits, [tokens, hidden]),
`NAME.spans` (int32, [tokens, 2] character offsets into the segment text) and, written last and atomically,
`NAME.index.parquet` (content_hash, shard, start, n_tokens). A shard without its index was interrupted and
is removed. Shards are read by positioned reads of the rows needed, so reading never loads the whole cache.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

if TYPE_CHECKING:
    import torch

    from engine.features.reader import ReadSegment

log = logging.getLogger(__name__)

INDEX_SCHEMA = {"content_hash": pl.String, "shard": pl.String, "start": pl.Int64, "n_tokens": pl.Int32}


def side_dir(store_path: Path) -> Path:
    """The folder beside a store holding its caches and SAEs: `STORE.rldiff`."""
    return store_path.with_name(store_path.name + ".rldiff")


class ActivationCache:
    """The cached activations of one reader configuration."""

    def __init__(self, root: Path, key: str, hidden_size: int) -> None:
        self.dir = root / key
        self.hidden_size = hidden_size
        self._files: dict[str, int] = {}

    def index(self) -> pl.DataFrame:
        """Every cached segment: content_hash, shard, start (token row), n_tokens."""
        files = sorted(self.dir.glob("*.index.parquet")) if self.dir.is_dir() else []
        if not files:
            return pl.DataFrame(schema=INDEX_SCHEMA)
        return pl.concat([pl.read_parquet(f) for f in files]).unique("content_hash", keep="first")

    def writer(self) -> ShardWriter:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._remove_orphans()
        return ShardWriter(self.dir, self.hidden_size)

    def rows(self, shard: str, start: int, n_tokens: int) -> tuple[torch.Tensor, np.ndarray]:
        """A segment's token activations (bf16 tensor [n, hidden]) and character spans ([n, 2])."""
        import torch

        acts = self._read(f"{shard}.acts", np.uint16, self.hidden_size, start, n_tokens)
        return torch.from_numpy(acts).view(torch.bfloat16), self._read(f"{shard}.spans", np.int32, 2, start, n_tokens)

    def take(self, shard: str, rows: np.ndarray) -> torch.Tensor:
        """Token activations at the given rows of one shard (bf16 tensor [len(rows), hidden]), read in windows
        of about 64 MiB so that memory stays bounded whatever the shard's size."""
        import torch

        acts = self.take_rows(f"{shard}.acts", np.uint16, np.sort(rows))
        return torch.from_numpy(acts).view(torch.bfloat16)

    def take_rows(self, name: str, dtype: type, rows: np.ndarray) -> np.ndarray:
        """Rows (sorted) of a shard file of `hidden_size`-wide rows, read in windows of about 64 MiB."""
        width = self.hidden_size
        window = max(1, (64 << 20) // (np.dtype(dtype).itemsize * width))
        parts = []
        cuts = np.searchsorted(rows, np.arange(0, int(rows[-1]) + window + 1, window)) if rows.size else np.zeros(0)
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
            if hi > lo:
                first, last = int(rows[lo]), int(rows[hi - 1])
                block = self._read(name, dtype, width, first, last - first + 1)
                parts.append(block[rows[lo:hi] - first])
        return np.concatenate(parts) if parts else np.empty((0, width), dtype=dtype)

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()

    def _read(self, name: str, dtype: type, width: int, start: int, count: int) -> np.ndarray:
        """Rows [start, start + count) of a shard file, by positioned reads: no memory map grows with the cache."""
        if name not in self._files:
            self._files[name] = os.open(self.dir / name, os.O_RDONLY)
        row = np.dtype(dtype).itemsize * width
        buffer = bytearray(count * row)
        if count and os.preadv(self._files[name], [buffer], start * row) != len(buffer):
            raise OSError(f"{self.dir / name}: shorter than its index says; remove the folder to rebuild the cache")
        return np.frombuffer(buffer, dtype=dtype).reshape(count, width)

    def _remove_orphans(self) -> None:
        indexed = {f.name.removesuffix(".index.parquet") for f in self.dir.glob("*.index.parquet")}
        for path in [*self.dir.glob("*.acts"), *self.dir.glob("*.spans"), *self.dir.glob("*.tmp")]:
            if path.suffix == ".tmp" or path.stem not in indexed:
                log.info("removing interrupted cache shard %s", path)
                path.unlink()

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.dir.iterdir()) if self.dir.is_dir() else 0


class ShardWriter:
    """Appends segments to a new shard; the index is published on a clean exit only."""

    def __init__(self, folder: Path, hidden_size: int) -> None:
        self.folder, self.hidden_size = folder, hidden_size
        self.shard = uuid.uuid4().hex[:16]
        self._acts = open(folder / f"{self.shard}.acts", "wb")
        self._spans = open(folder / f"{self.shard}.spans", "wb")
        self._index: dict[str, list] = {"content_hash": [], "start": [], "n_tokens": []}
        self._rows = 0

    def __enter__(self) -> ShardWriter:
        return self

    def add(self, segment: ReadSegment) -> None:
        import torch

        n = int(segment.acts.shape[0])
        if segment.acts.shape[1:] != (self.hidden_size,):
            raise ValueError(f"activations of width {tuple(segment.acts.shape[1:])}, cache holds {self.hidden_size}")
        self._acts.write(segment.acts.to(torch.bfloat16).contiguous().view(torch.uint16).numpy().tobytes())
        self._spans.write(np.ascontiguousarray(segment.spans, dtype=np.int32).tobytes())
        self._index["content_hash"].append(segment.key)
        self._index["start"].append(self._rows)
        self._index["n_tokens"].append(n)
        self._rows += n

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self._acts.close()
        self._spans.close()
        if exc_type is not None or not self._index["content_hash"]:
            for suffix in (".acts", ".spans"):
                (self.folder / f"{self.shard}{suffix}").unlink(missing_ok=True)
            return
        frame = pl.DataFrame({**self._index, "shard": [self.shard] * len(self._index["start"])}, schema=INDEX_SCHEMA)
        tmp = self.folder / f"{self.shard}.index.parquet.tmp"
        frame.write_parquet(tmp)
        os.replace(tmp, self.folder / f"{self.shard}.index.parquet")
