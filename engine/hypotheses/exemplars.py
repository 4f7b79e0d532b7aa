"""The exemplar labeler: a segment matches when one of its sentences is close (cosine) to an exemplar sentence.

A verifier node `{"similar_to": {"exemplars": ["...", ...], "min_similarity": 0.71}}` holds texts, never vectors:
the study's sentence embedder embeds them, and its cache keeps each text's vector. Labelling a population splits
every segment into sentences and embeds all of them in one batch (`SentenceMatcher`), not one call per segment.
Tool calls stay one unit. `choose_exemplars` picks exemplars and the threshold from discovery sentences only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from engine.errors import InputError

if TYPE_CHECKING:
    from engine.store import Store

log = logging.getLogger(__name__)

MAX_EXEMPLARS = 16  # a labeler is a few representative sentences; more is a vector store in disguise
MAX_EXEMPLAR_CHARS = 500  # about two sentences: a longer exemplar's embedding averages several ideas
DEFAULT_MIN_SIMILARITY = 0.7  # MiniLM cosine at which paraphrases of one sentence usually still meet
CHOSEN_EXEMPLARS = 5  # picked from a group's sentences: its medoid, then the ones least like those picked
MIN_CHOSEN_SIMILARITY = 0.3  # a threshold below this matches most text: no behaviour is that broad
SENTENCE_KINDS = ("text", "reasoning")  # split into sentences; other kinds (tool calls) are one unit


class Embedder(Protocol):
    """What the labeler needs of a sentence embedder: L2-normalised float32 rows, one per text."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


Splitter = Callable[[str], list[tuple[int, int]]]


class LazyEmbedder:
    """An embedder built on first use, so specs without `similar_to` never load a model."""

    def __init__(self, build: Callable[[], Embedder]) -> None:
        self._build = build
        self._embedder: Embedder | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._embedder is None:
            self._embedder = self._build()
        return self._embedder.embed(texts)


def store_embedder(store: Store) -> Embedder:
    """The study's sentence embedder (its reader's), loaded when a `similar_to` node first needs it."""

    def build() -> Embedder:
        from engine.features.sentence_embed import embedder_for_store

        return embedder_for_store(store)

    return LazyEmbedder(build)


def no_embedder() -> Embedder:
    """Stands in where no study is open: a `similar_to` node then fails with a clear message."""

    def build() -> Embedder:
        raise InputError("a similar_to verifier needs the study's sentence embedder: label it through a store")

    return LazyEmbedder(build)


def default_splitter(text: str) -> list[tuple[int, int]]:
    from engine.features.sentences import split_sentences

    return split_sentences(text)


def segment_units(kind: str, text: str, splitter: Splitter) -> list[str]:
    """The units a segment is matched by: its sentences (text, reasoning), else its whole text."""
    if kind not in SENTENCE_KINDS:
        return [text] if text.strip() else []
    return [s for s in (text[a:b].strip() for a, b in splitter(text)) if s]


@dataclass(frozen=True)
class Match:
    similarity: float
    sentence: str


class SentenceMatcher:
    """Every unit of a batch of segments embedded once; best match of each segment against exemplar sets."""

    def __init__(self, segments: Sequence[tuple[str, str]], embedder: Embedder, splitter: Splitter) -> None:
        units = [segment_units(kind, text, splitter) for kind, text in segments]
        self._owner = np.repeat(np.arange(len(units)), [len(u) for u in units])
        self._texts = [s for u in units for s in u]
        self._n = len(units)
        self._embedder = embedder
        unique = list(dict.fromkeys(self._texts))
        vectors = embedder.embed(unique) if unique else np.zeros((0, 1), np.float32)
        row = {t: i for i, t in enumerate(unique)}
        self._vectors = vectors[[row[t] for t in self._texts]] if self._texts else vectors

    def best(self, exemplars: Sequence[str]) -> list[Match | None]:
        """Per segment, its unit most similar to any exemplar (None for a segment without units)."""
        out: list[Match | None] = [None] * self._n
        if not self._texts:
            return out
        sims = (self._vectors @ self._embedder.embed(list(exemplars)).T).max(axis=1)
        order = np.lexsort((-sims, self._owner))  # by segment, most similar first
        first = order[np.r_[True, self._owner[order][1:] != self._owner[order][:-1]]]
        for i in first:
            out[int(self._owner[i])] = Match(float(sims[i]), self._texts[i])
        return out


@dataclass(frozen=True)
class Exemplars:
    """Exemplar sentences and the threshold chosen for them, with the F1 it reached on discovery."""

    texts: list[str]
    min_similarity: float
    f1: float

    def node(self) -> dict[str, object]:
        return {"similar_to": {"exemplars": self.texts, "min_similarity": round(self.min_similarity, 3)}}


def choose_exemplars(
    positives: Sequence[str], negatives: Sequence[str], embedder: Embedder, k: int = CHOSEN_EXEMPLARS
) -> Exemplars | None:
    """Exemplars from `positives` (a behaviour's discovery sentences) and the cosine threshold with the best F1
    separating the other positives from `negatives` (discovery sentences without it). The exemplars are the
    medoid and then, greedily, the positives least similar to those already picked (they cover its wordings).
    An exemplar is not scored against itself: F1 counts only the positives not picked. None when fewer than
    two positives, or no threshold at or above MIN_CHOSEN_SIMILARITY separates them."""
    pos = list(dict.fromkeys(t for t in positives if t.strip() and len(t) <= MAX_EXEMPLAR_CHARS))
    known = set(pos)
    neg = [t for t in dict.fromkeys(negatives) if t not in known]
    if len(pos) < 2:
        return None
    vectors = embedder.embed(pos + neg)
    p, n = vectors[: len(pos)], vectors[len(pos) :]
    within = p @ p.T
    picked = [int(np.argmax(within.mean(axis=1)))]
    while len(picked) < min(k, len(pos) - 1):
        closest = within[:, picked].max(axis=1)
        closest[picked] = np.inf
        picked.append(int(np.argmin(closest)))
    rest = np.setdiff1d(np.arange(len(pos)), picked)
    score_pos = within[np.ix_(rest, picked)].max(axis=1)
    score_neg = (n @ p[picked].T).max(axis=1) if len(neg) else np.zeros(0)
    threshold, f1 = best_f1_threshold(score_pos, score_neg)
    if threshold < MIN_CHOSEN_SIMILARITY or f1 == 0.0:
        return None
    return Exemplars([pos[i] for i in picked], threshold, f1)


def best_f1_threshold(positive: np.ndarray, negative: np.ndarray) -> tuple[float, float]:
    """The score threshold (match when score >= it) with the best F1 of positives against negatives, halfway
    to the next lower score so that a near paraphrase just below the last positive still matches; ties go
    to the higher threshold (fewer matches on text unlike the examples)."""
    scores = np.concatenate([positive, negative])
    is_pos = np.r_[np.ones(positive.size, bool), np.zeros(negative.size, bool)]
    order = np.argsort(-scores, kind="stable")
    tp = np.cumsum(is_pos[order])
    fp = np.cumsum(~is_pos[order])
    f1 = 2 * tp / (tp + fp + positive.size)
    sorted_scores = scores[order]
    last_of_tie = np.r_[sorted_scores[1:] != sorted_scores[:-1], True]
    f1 = np.where(last_of_tie, f1, -1.0)
    best = int(np.argmax(f1))
    below = sorted_scores[best + 1] if best + 1 < scores.size else sorted_scores[best]
    return float((sorted_scores[best] + below) / 2), float(f1[best])
