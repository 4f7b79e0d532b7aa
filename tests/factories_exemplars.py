"""A stand-in sentence embedder and splitter for the exemplar labeler's logic (not for paraphrase quality)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

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
