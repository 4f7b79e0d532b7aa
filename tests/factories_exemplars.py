"""A stand-in sentence embedder and splitter for the exemplar labeler's logic (not for paraphrase quality), and
the real packaged MiniLM embedder for the tests that are about paraphrases."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from engine.features.sentence_embed import SentenceEmbedder

_VOCAB: dict[str, int] = {}


class WordEmbedder:
    """Normalised word counts over a growing vocabulary: cosine = shared words. Counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        rows = np.zeros((len(texts), 256), np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                rows[i, _VOCAB.setdefault(word, len(_VOCAB)) % 256] += 1
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


def split_on_periods(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"[^.?!]+[.?!]?", text) if m.group().strip()]


def minilm(cache: Path) -> SentenceEmbedder:
    """The packaged MiniLM sentence embedder, on CPU, caching under `cache` (imported late: it loads
    transformers)."""
    from factories_features import MINILM

    from engine.features.reader_spec import resolve_reader
    from engine.features.sentence_embed import SentenceEmbedder
    from engine.features.settings import FeatureSettings

    return SentenceEmbedder(resolve_reader(str(MINILM), None, FeatureSettings()), "cpu", cache)
