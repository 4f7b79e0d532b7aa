"""The exemplar labeler: a segment matches when one of its sentences is close (cosine) to an exemplar sentence.

A verifier node `{"similar_to": {"exemplars": ["...", ...], "min_similarity": 0.71}}` holds texts, never vectors:
the study's sentence embedder embeds them, and its cache keeps each text's vector. Labelling a population splits
every segment into sentences and embeds all of them in one batch (`SentenceMatcher`), not one call per segment.
Tool calls stay one unit. `fit_exemplars` fits exemplars and the threshold to a feature's firing on discovery.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from engine.errors import InputError
from engine.text import ngrams

if TYPE_CHECKING:
    from engine.store import Store

log = logging.getLogger(__name__)

MAX_EXEMPLARS = 16  # a labeler is a few representative sentences; more is a vector store in disguise
MAX_EXEMPLAR_CHARS = 500  # about two sentences: a longer exemplar's embedding averages several ideas
DEFAULT_MIN_SIMILARITY = 0.7  # MiniLM cosine at which paraphrases of one sentence usually still meet
MIN_CHOSEN_SIMILARITY = 0.3  # a fitted threshold is never below this: it would match most text
SENTENCE_KINDS = ("text", "reasoning")  # split into sentences; other kinds (tool calls) are one unit
# Segments whose units are memoised: both splits of a large study (the demo has about 2,500 segments); a
# longer-lived process (TUI, MCP) evicts the least recently used.
UNITS_CACHE = 1 << 16
UNIT_NGRAMS_CACHE = 1 << 14  # units whose n-grams are memoised (the demo has 6,355 distinct; a few KB each)
MATCHED_BY = 3  # exemplars besides the quoted one named as what a labeler's positives are like


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


@lru_cache(maxsize=UNITS_CACHE)
def segment_units(kind: str, text: str, splitter: Splitter) -> tuple[str, ...]:
    """The units a segment is matched by: its sentences (text, reasoning), else its whole text. Memoised:
    drafting matches the same segments against every source, and splitting is most of its time otherwise."""
    if kind not in SENTENCE_KINDS:
        return (text,) if text.strip() else ()
    return tuple(s for s in (text[a:b].strip() for a, b in splitter(text)) if s)


@lru_cache(maxsize=UNIT_NGRAMS_CACHE)
def unit_ngrams(unit: str) -> frozenset[str]:
    """`engine.text.ngrams` of one unit, memoised: the phrase sources of a kind read the same sentences again."""
    return frozenset(ngrams(unit))


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


def fit_exemplars(
    segments: Sequence[tuple[str, str]],
    fires: np.ndarray,
    seeds: Sequence[str],
    embedder: Embedder,
    splitter: Splitter,
    k: int = MAX_EXEMPLARS,
    negative_weight: float = 1.0,
) -> Exemplars | None:
    """Exemplars and threshold fitted to a feature's own firing on discovery segments (`fires`, parallel to
    `segments`, as (kind, text)). Each firing segment's *carrier* is its sentence closest to the feature's
    `seeds` (its strongest example sentences); up to `k` exemplars are chosen among the carriers to cover them
    (greedy facility location: each pick adds most to the carriers' similarity to their nearest exemplar; the
    one most carriers are nearest to first, as statements quote it), and
    the threshold is the one whose segment labels best agree (F1) with the feature's firing, an exemplar not
    scored against the segment it was drawn from (its copies elsewhere are). Quiet segments may be a sample,
    each standing for `negative_weight` segments.
    The threshold is at least MIN_CHOSEN_SIMILARITY; None when fewer than two carriers or nothing matches."""
    units = [segment_units(kind, text, splitter) for kind, text in segments]
    owner = np.repeat(np.arange(len(units)), [len(u) for u in units])
    texts = [s for u in units for s in u]
    seeds = [t for t in dict.fromkeys(seeds) if t.strip()]
    if not texts or not seeds:
        return None
    unique = list(dict.fromkeys(texts))
    row = {t: i for i, t in enumerate(unique)}
    vectors = embedder.embed(unique)
    index = np.array([row[t] for t in texts])
    to_seed = (vectors @ embedder.embed(seeds).T).max(axis=1)[index]
    fired = np.flatnonzero(fires[owner])
    carriers: dict[int, int] = {}  # carrier text -> the first segment it was drawn from
    for seg in np.unique(owner[fired]):
        mine = fired[owner[fired] == seg]
        best = int(index[mine[np.argmax(to_seed[mine])]])
        if len(unique[best]) <= MAX_EXEMPLAR_CHARS:
            carriers.setdefault(best, int(seg))
    pool = np.array(list(carriers), dtype=int)
    if pool.size < 2:
        return None
    within = vectors[pool] @ vectors[pool].T
    picked: list[int] = []
    cover = np.full(pool.size, -1.0)
    for _ in range(min(k, pool.size)):
        gain = np.maximum(within, cover[:, None]).sum(axis=0)
        gain[picked] = -np.inf
        best = int(np.argmax(gain))
        picked.append(best)
        cover = np.maximum(cover, within[:, best])
    # The quoted exemplar (the first) is the one most carriers are nearest to: the facility-location first
    # pick is the carriers' centre, which where they form groups can be nobody's nearest exemplar.
    nearest = np.bincount(within[:, picked].argmax(axis=1), minlength=len(picked))
    chosen = pool[[picked[i] for i in np.argsort(-nearest, kind="stable")]]
    unit_sims = (vectors @ vectors[chosen].T)[index]
    for j, text in enumerate(chosen):  # leave one out: an exemplar does not vouch for its own segment
        unit_sims[(index == text) & (owner == carriers[int(text)]), j] = -1.0
    unit_score = unit_sims.max(axis=1)
    score = np.full(len(units), -1.0)
    np.maximum.at(score, owner, unit_score)
    threshold, f1 = best_f1_threshold(score[fires], score[~fires], negative_weight)
    if threshold < MIN_CHOSEN_SIMILARITY:  # raised to the floor, and its F1 measured there
        threshold = MIN_CHOSEN_SIMILARITY
        tp, fp = int((score[fires] >= threshold).sum()), negative_weight * int((score[~fires] >= threshold).sum())
        f1 = 2 * tp / (tp + fp + int(fires.sum()))
    if f1 == 0.0:
        return None
    return Exemplars([unique[i] for i in chosen], threshold, f1)


def best_f1_threshold(positive: np.ndarray, negative: np.ndarray, negative_weight: float = 1.0) -> tuple[float, float]:
    """The score threshold (match when score >= it) with the best F1 of positives against negatives, halfway
    to the next lower score so that a near paraphrase just below the last positive still matches; ties go
    to the higher threshold (fewer matches on text unlike the examples)."""
    scores = np.concatenate([positive, negative])
    is_pos = np.r_[np.ones(positive.size, bool), np.zeros(negative.size, bool)]
    order = np.argsort(-scores, kind="stable")
    tp = np.cumsum(is_pos[order])
    fp = np.cumsum(~is_pos[order]) * negative_weight
    f1 = 2 * tp / (tp + fp + positive.size)
    sorted_scores = scores[order]
    last_of_tie = np.r_[sorted_scores[1:] != sorted_scores[:-1], True]
    f1 = np.where(last_of_tie, f1, -1.0)
    best = int(np.argmax(f1))
    below = sorted_scores[best + 1] if best + 1 < scores.size else sorted_scores[best]
    return float((sorted_scores[best] + below) / 2), float(f1[best])


def similar_nodes(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The `similar_to` nodes of an exemplar spec `{"all": [KIND, NODE]}`, NODE one `similar_to` or
    `{"any": [similar_to, ...]}` (wordings joined by `engine.hypotheses.merge`); none for any other spec."""
    parts = spec.get("all", [])
    if len(parts) != 2 or "kind" not in parts[0]:
        return []
    nodes = parts[1].get("any", [parts[1]])
    return [n["similar_to"] for n in nodes] if all("similar_to" in n for n in nodes) else []


def matched_by(spec: dict[str, Any], evidence: Sequence[str], embedder: Embedder) -> list[dict[str, Any]]:
    """What an exemplar labeler's positives are like: each positive's evidence (its matching sentence) goes to
    its nearest exemplar; the quoted exemplar (the first) and the MATCHED_BY others most gone to, each with
    its share of the positives. A statement quotes one exemplar, but a labeler fitted to a source that fires
    on several things (a polysemantic latent) counts them all: the shares say how much of the measured change
    the quote stands for. Empty for any other labeler or without positives."""
    exemplars = [t for node in similar_nodes(spec) for t in node["exemplars"]]
    if not exemplars or not evidence:
        return []
    nearest = (embedder.embed(list(evidence)) @ embedder.embed(exemplars).T).argmax(axis=1)
    counts = np.bincount(nearest, minlength=len(exemplars))
    others = [int(i) for i in np.argsort(-counts, kind="stable") if i != 0 and counts[i]][:MATCHED_BY]
    return [{"exemplar": exemplars[i], "share": float(counts[i] / len(evidence))} for i in [0, *others]]
