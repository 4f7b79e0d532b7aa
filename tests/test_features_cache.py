"""The activation cache: shards written as segments come, published atomically, read back exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from engine.features.cache import ActivationCache, side_dir
from engine.features.reader import ReadSegment


def segment(key: str, n: int, hidden: int = 8, seed: int = 0) -> ReadSegment:
    acts = torch.randn(n, hidden, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)
    spans = np.stack([np.arange(n) * 2, np.arange(n) * 2 + 1], axis=1).astype(np.int32)
    return ReadSegment(key, acts, spans, n + 2)


def test_round_trip(tmp_path: Path) -> None:
    cache = ActivationCache(tmp_path, "reader-L0-x", 8)
    written = [segment("h1", 3, seed=1), segment("h2", 0), segment("h3", 5, seed=3)]
    with cache.writer() as writer:
        for s in written:
            writer.add(s)
    index = cache.index()
    assert sorted(index["content_hash"]) == ["h1", "h2", "h3"]
    for s in written:
        shard, start, n = index.filter(index["content_hash"] == s.key).select("shard", "start", "n_tokens").row(0)
        acts, spans = cache.rows(shard, start, n)
        assert torch.equal(acts, s.acts) and (spans == s.spans).all()
    shard = index["shard"][0]
    assert torch.equal(cache.take(shard, np.array([6, 3])), torch.cat([written[0].acts, written[2].acts])[[3, 6]])
    assert cache.size_bytes() > 0


def test_a_failed_pass_leaves_no_shard_and_an_interrupted_one_is_removed(tmp_path: Path) -> None:
    cache = ActivationCache(tmp_path, "k", 8)
    with pytest.raises(RuntimeError), cache.writer() as writer:
        writer.add(segment("h1", 3))
        raise RuntimeError("reader crashed")
    assert cache.index().height == 0 and not any(cache.dir.iterdir())
    (cache.dir / "deadbeef.acts").write_bytes(b"\0" * 16)  # a process killed before publishing its index
    with cache.writer() as writer:
        writer.add(segment("h2", 2))
    assert not (cache.dir / "deadbeef.acts").exists()
    assert cache.index()["content_hash"].to_list() == ["h2"]


def test_width_mismatch_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="width"), ActivationCache(tmp_path, "k", 8).writer() as writer:
        writer.add(segment("h1", 2, hidden=4))


def test_side_dir_sits_beside_the_store(tmp_path: Path) -> None:
    assert side_dir(tmp_path / "study.duckdb") == tmp_path / "study.duckdb.rldiff"


@pytest.mark.parametrize("cap", [1000, 20])
def test_the_training_sample_does_not_depend_on_where_the_cache_holds_a_segment(tmp_path: Path, cap: int) -> None:
    """The same segments read in another order, into other (randomly named) shards, give the same sample:
    otherwise the same study analysed afresh trains another SAE."""
    from engine.features.training import training_sample

    written = [segment(f"h{i}", 3 + i, seed=i) for i in range(6)]
    samples = []
    for name, layout in (("a", [written[:2], written[2:]]), ("b", [written[:1:-1], written[1::-1]])):
        cache = ActivationCache(tmp_path / name, "reader-L0-x", 8)
        for part in layout:
            with cache.writer() as writer:
                for s in part:
                    writer.add(s)
        samples.append(training_sample(cache, cache.index(), cap, seed=0))
    assert samples[0].shape == (min(cap, sum(3 + i for i in range(6))), 8)
    assert torch.equal(samples[0], samples[1])
