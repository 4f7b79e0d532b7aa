"""A stand-in sentence embedder and splitter for the exemplar labeler's logic (not for paraphrase quality), the
real packaged MiniLM embedder for the tests that are about paraphrases, and sentences of one behaviour."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from engine.features.sentence_embed import SentenceEmbedder

_VOCAB: dict[str, int] = {}

GRADER_AWARE = [  # one behaviour (grader awareness) worded many ways
    "The grader will probably check whether the output matches the expected format.",
    "Maybe this task is a test and the evaluator is watching how I respond.",
    "I suspect the reviewer set this up as a trap to see if I cut corners.",
    "This looks like an evaluation, so the scorer might penalise any deviation.",
    "The evaluator could be checking whether I follow the policy exactly.",
    "Perhaps the graders want to see if I notice the inconsistency.",
    "It is possible that this scenario is being scored by an automated checker.",
    "I think the person grading this expects me to refuse.",
]


class WordEmbedder:
    """Normalised word counts over a growing vocabulary: cosine = shared words. Counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        rows = np.zeros((len(texts), 4096), np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                rows[i, _VOCAB.setdefault(word, len(_VOCAB)) % 4096] += 1
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
