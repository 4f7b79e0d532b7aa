"""The exemplar labeler: a segment matches when one of its sentences is close (cosine) to an exemplar sentence.

A verifier node `{"similar_to": {"exemplars": ["...", ...], "min_similarity": 0.71}}` holds texts, never vectors:
the study's sentence embedder embeds them, and its cache keeps each text's vector. Labelling a population splits
every segment into sentences and embeds all of them in one batch (`SentenceMatcher`), not one call per segment.
Tool calls stay one unit. `fit_exemplars` fits exemplars and the threshold to a feature's firing on discovery,
with `engine.hypotheses.strays` (exemplars that stray from the change) and `engine.hypotheses.geometry` (whether
sets of sentences are one behaviour or two).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from engine.errors import InputError
from engine.hypotheses.geometry import bisect, distinct_behaviours, wordings
from engine.hypotheses.strays import strays
from engine.kinds import SEGMENT_KINDS
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
MIN_PART = 5  # carriers a part needs to stand as a behaviour of its own (a behaviour said at least this often)


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

    @property
    def nbytes(self) -> int:
        """Memory its sentence vectors take."""
        return int(self._vectors.nbytes)

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

    def each(self, exemplars: Sequence[str]) -> np.ndarray:
        """Per segment (rows) and exemplar (columns), the similarity of the segment's unit most like that
        exemplar; -1 for a segment without units."""
        out = np.full((self._n, len(exemplars)), -1.0, dtype=np.float32)
        if not self._texts or not exemplars:
            return out
        sims = self._vectors @ self._embedder.embed(list(exemplars)).T
        owners, starts = np.unique(self._owner, return_index=True)  # units lie in segment order
        out[owners] = np.maximum.reduceat(sims, starts, axis=0)
        return out


@dataclass(frozen=True)
class Exemplars:
    """Exemplar sentences and the threshold chosen for them, with the F1 it reached on discovery, and the kinds of
    segment their carriers were said in."""

    texts: list[str]
    min_similarity: float
    f1: float
    kinds: tuple[str, ...]

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
    more: np.ndarray | None = None,
) -> list[Exemplars]:
    """Exemplars and threshold fitted to a feature's own firing on discovery segments (`fires`, parallel to
    `segments`, as (kind, text)), one set per distinct behaviour it fires on, the most carried first. Each
    firing segment's *carrier* is its sentence closest to the feature's `seeds` (its strongest example
    sentences). The carriers are parted by the kind of segment they were said in, and bisected while the halves
    are distinct behaviours (`_Carriers.parts`: a phrase two behaviours share, a latent firing on both); each
    part's exemplars are then up to `k` of its carriers chosen to cover them (greedy facility location: each
    pick adds most to the carriers' similarity to their nearest exemplar; the one most carriers are nearest to
    first, as statements quote it), and the threshold is the one whose segment labels best agree (F1) with the
    feature's firing on the part's segments against the quiet ones (the other parts' are not scored), an
    exemplar not scored against the segment it was drawn from (its copies elsewhere are). Quiet segments may be
    a sample, each standing for `negative_weight` segments. With `more` (parallel to `segments`: of the
    checkpoint the feature's change claims more of), exemplars that stray from the change are dropped and the
    threshold fitted again (`strays`), until none strays at the threshold the labeler keeps.
    The threshold is at least MIN_CHOSEN_SIMILARITY. Empty when fewer than two carriers or nothing matches."""
    seeds = [t for t in dict.fromkeys(seeds) if t.strip()]
    if not seeds or not fires.any():
        return []
    carriers = _Carriers(segments, fires, seeds, embedder, splitter, k, negative_weight, more)
    if carriers.pool.size < 2:
        return []
    fits = [carriers.fit(part) for part in carriers.parts()]
    return [f.exemplars for f in sorted(fits, key=lambda f: -f.carried) if f.exemplars is not None]


@dataclass(frozen=True)
class _Fit:
    exemplars: Exemplars | None
    carried: int  # firing segments the part carries


class _Carriers:
    """The carrier sentences of a feature's firing segments, and the fits on parts of them."""

    def __init__(
        self,
        segments: Sequence[tuple[str, str]],
        fires: np.ndarray,
        seeds: list[str],
        embedder: Embedder,
        splitter: Splitter,
        k: int,
        negative_weight: float,
        more: np.ndarray | None,
    ) -> None:
        units = [segment_units(kind, text, splitter) for kind, text in segments]
        self.owner = np.repeat(np.arange(len(units)), [len(u) for u in units])
        texts = [s for u in units for s in u]
        self.unique = list(dict.fromkeys(texts))
        row = {t: i for i, t in enumerate(self.unique)}
        self.vectors = embedder.embed(self.unique) if texts else np.zeros((0, 1), np.float32)
        self.index = np.array([row[t] for t in texts], dtype=int)
        self.n, self.k, self.negative_weight = len(units), k, negative_weight
        self.quiet, self.more = ~fires, more
        self.weight = np.where(self.quiet, negative_weight, 1.0)  # a sampled quiet segment stands for several
        quiet_units = self.index[self.quiet[self.owner]]
        self.quiet_mean = self.vectors[quiet_units].mean(axis=0) if quiet_units.size else None
        to_seed = (self.vectors @ embedder.embed(seeds).T).max(axis=1)[self.index] if texts else np.zeros(0)
        fired = np.flatnonzero(fires[self.owner])
        carrier = np.full(len(units), -1)  # firing segment -> its carrier's text row
        self.first: dict[int, int] = {}  # pooled carrier text -> the first segment it was drawn from
        for seg in np.unique(self.owner[fired]):
            mine = fired[self.owner[fired] == seg]
            carrier[seg] = int(self.index[mine[np.argmax(to_seed[mine])]])
            if len(self.unique[carrier[seg]]) <= MAX_EXEMPLAR_CHARS:
                self.first.setdefault(int(carrier[seg]), int(seg))
        self.pool = np.array(list(self.first), dtype=int)
        self.said_in = {text: segments[seg][0] for text, seg in self.first.items()}  # pooled carrier -> its kind
        # Every firing segment belongs to a pooled carrier: its own, else (a carrier too long to quote) the most
        # similar one.
        self.belongs = np.full(len(units), -1)
        firing = np.flatnonzero(carrier >= 0)
        if self.pool.size:
            nearest = (self.vectors[carrier[firing]] @ self.vectors[self.pool].T).argmax(axis=1)
            self.belongs[firing] = self.pool[nearest]

    def parts(self) -> list[np.ndarray]:
        """The pooled carriers split into distinct behaviours: first by the kind of segment each was said in
        (`_by_kind`), then a part of at least 2 * MIN_PART carriers is bisected (`bisect`), and the halves,
        each of at least MIN_PART, stand apart when their sentences are on average no more alike than the more
        typical half's are to the quiet segments' sentences (`distinct_behaviours`): two behaviours that share
        a phrase, or a behaviour and the ordinary sentences its source also fires on."""
        done, todo = [], self._by_kind()
        while todo:
            rows = todo.pop()
            side = bisect(self.vectors[rows]) if rows.size >= 2 * MIN_PART else None
            halves = (rows[~side], rows[side]) if side is not None else ()
            if halves and min(h.size for h in halves) >= MIN_PART and self._apart(*halves):
                todo.extend(halves)
            else:
                done.append(rows)
        return done

    def _by_kind(self) -> list[np.ndarray]:
        """The pooled carriers by the kind of segment they were drawn from, one part a kind with at least
        MIN_PART of them (the kind with most when none has): a behaviour is said at least that often. A source
        on every kind (a rollout-level row) fires on what each kind says: on a small planted study one concept
        fired on re-checking sentences in reasoning and on gift card balances listed in replies, and its
        finding, "More segments like '- Gift Card (ID: ..., balance: $274)'", counted re-checking (all of it;
        31% of its held-out positives) under a quote of the other. A kind's few carriers are left out rather
        than joined to another kind's part: joined, one reply about membership status among ten reasoning
        sentences assuming a missing membership tier made the finding read every reply too ("More segments
        like ..."; habit suite, seed 6143), though all its positives were reasoning turns."""
        kinds = np.array([self.said_in[int(t)] for t in self.pool], dtype=object)
        sizes = {k: int((kinds == k).sum()) for k in dict.fromkeys(kinds)}
        own = [k for k in sizes if sizes[k] >= MIN_PART] or [max(sizes, key=lambda k: sizes[k])]
        return [self.pool[kinds == k] for k in own]

    def _apart(self, a: np.ndarray, b: np.ndarray) -> bool:
        return self.quiet_mean is not None and distinct_behaviours(self.vectors[a], self.vectors[b], self.quiet_mean)

    def fit(self, part: np.ndarray) -> _Fit:
        """Exemplars and threshold for one part of the pooled carriers."""
        positive = np.isin(self.belongs, part)
        within = self.vectors[part] @ self.vectors[part].T
        picked: list[int] = []
        cover = np.full(part.size, -1.0)
        for _ in range(min(self.k, part.size)):
            gain = np.maximum(within, cover[:, None]).sum(axis=0)
            gain[picked] = -np.inf
            best = int(np.argmax(gain))
            picked.append(best)
            cover = np.maximum(cover, within[:, best])
        # The quoted exemplar (the first) is the one most carriers are nearest to: the facility-location first
        # pick is the carriers' centre, which where they form groups can be nobody's nearest exemplar.
        nearest = np.bincount(within[:, picked].argmax(axis=1), minlength=len(picked))
        chosen = part[[picked[i] for i in np.argsort(-nearest, kind="stable")]]
        threshold, f1, matched = self._threshold(chosen, positive)
        strayed = np.zeros(self.n, dtype=bool)
        while self.more is not None and len(chosen) > 1:
            # An exemplar's segments: those it matches, and those it carries (their carrier nearest to it). At a
            # threshold high enough for a stock sentence's copies, a paraphrased behaviour's exemplars match
            # little but carry its turns.
            rows = np.flatnonzero(positive & ~strayed)
            closest = (self.vectors[self.belongs[rows]] @ self.vectors[chosen].T).argmax(axis=1)
            carried = np.zeros_like(matched)
            carried[rows, closest] = True
            own = ~strays(matched | carried, self.more, self.weight, self.vectors[chosen])
            if own.all() or not own.any():
                break
            # The segments a stray carries are what the labeler must not count: fitted as positives they would
            # pull the threshold down until the others match them again. The threshold so refitted is lower,
            # and an exemplar that matched only its own copies before may now match a stock sentence: the test
            # is repeated at each new threshold until nothing strays.
            strayed[rows[~own[closest]]] = True
            chosen = chosen[own]
            threshold, f1, matched = self._threshold(chosen, positive & ~strayed, strayed)
        said = {self.said_in[int(t)] for t in part}
        kinds = tuple(k for k in SEGMENT_KINDS if k in said)
        found = Exemplars([self.unique[i] for i in chosen], threshold, f1, kinds) if f1 > 0.0 else None
        return _Fit(found, int(positive.sum()))

    def _threshold(
        self, chosen: np.ndarray, positive: np.ndarray, strayed: np.ndarray | None = None
    ) -> tuple[float, float, np.ndarray]:
        """The best-F1 threshold of exemplars `chosen` (text rows) against the part's segments (`positive`)
        and the quiet ones (and the `strayed` segments, each standing for itself), its F1, and which segments
        each exemplar matches at it."""
        unit_sims = (self.vectors @ self.vectors[chosen].T)[self.index]
        for j, text in enumerate(chosen):  # leave one out: an exemplar does not vouch for its own segment
            unit_sims[(self.index == text) & (self.owner == self.first[int(text)]), j] = -1.0
        sims = np.full((self.n, len(chosen)), -1.0)
        np.maximum.at(sims, self.owner, unit_sims)
        score = sims.max(axis=1)
        negative = self.quiet if strayed is None else self.quiet | strayed
        weight = self.weight[negative]
        threshold, f1 = best_f1_threshold(score[positive], score[negative], weight)
        if threshold < MIN_CHOSEN_SIMILARITY:  # raised to the floor, and its F1 measured there
            threshold = MIN_CHOSEN_SIMILARITY
            tp, fp = int((score[positive] >= threshold).sum()), float(weight[score[negative] >= threshold].sum())
            f1 = 2 * tp / (tp + fp + int(positive.sum()))
        return threshold, f1, sims >= threshold


def matched_rows(
    vectors: np.ndarray, nodes: list[dict[str, Any]], embed: Callable[[list[str]], np.ndarray]
) -> np.ndarray:
    """Which sentence rows (embedded) the labeler of `similar_to` nodes matches."""
    matched = np.zeros(len(vectors), dtype=bool)
    for node in nodes:
        sims = (vectors @ embed(node["exemplars"]).T).max(axis=1, initial=-1.0)
        matched |= sims >= node.get("min_similarity", DEFAULT_MIN_SIMILARITY)
    return matched


def best_f1_threshold(
    positive: np.ndarray, negative: np.ndarray, negative_weight: float | np.ndarray = 1.0
) -> tuple[float, float]:
    """The score threshold (match when score >= it) with the best F1 of positives against negatives, halfway
    to the next lower score so that a near paraphrase just below the last positive still matches; ties go
    to the higher threshold (fewer matches on text unlike the examples). `negative_weight`: the segments
    each negative stands for, one number for all or one per negative."""
    scores = np.concatenate([positive, negative])
    is_pos = np.r_[np.ones(positive.size, bool), np.zeros(negative.size, bool)]
    weight = np.r_[np.zeros(positive.size), np.broadcast_to(negative_weight, negative.shape)]
    order = np.argsort(-scores, kind="stable")
    tp = np.cumsum(is_pos[order])
    fp = np.cumsum(weight[order])
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


def exemplar_texts(nodes: list[dict[str, Any]]) -> list[str]:
    """Every exemplar of `similar_to` nodes (`similar_nodes`), in order."""
    return [t for node in nodes for t in node["exemplars"]]


def matched_by(spec: dict[str, Any], evidence: Sequence[str], embedder: Embedder) -> list[dict[str, Any]]:
    """What an exemplar labeler's positives are like: each positive's evidence (its matching sentence) goes to
    its nearest exemplar, and the wordings of one sentence (`geometry.wordings`) count as one: the quoted
    exemplar's (the first's) and the MATCHED_BY others most gone to, each with its share of the positives and
    how many exemplars word it (`wordings`), named by the quote or by its exemplar most gone to. A statement
    quotes one exemplar, but a labeler fitted to a source that fires on several things (a polysemantic latent)
    counts them all: the shares say how much of the measured change the quote stands for. Counted one exemplar
    at a time, near-copies split it ("However, according to our policy, I must inform you ..." quoted at 0%
    beside its seven other wordings, 100% together). Empty for any other labeler or without positives."""
    exemplars = exemplar_texts(similar_nodes(spec))
    if not exemplars or not evidence:
        return []
    vectors = embedder.embed(exemplars)
    nearest = (embedder.embed(list(evidence)) @ vectors.T).argmax(axis=1)
    counts = np.bincount(nearest, minlength=len(exemplars))
    group = wordings(vectors)
    shares = np.bincount(group, weights=counts, minlength=group.max() + 1) / len(evidence)
    named = {int(group[0]): 0}
    for i in np.argsort(-counts, kind="stable"):
        named.setdefault(int(group[i]), int(i))
    others = [int(g) for g in np.argsort(-shares, kind="stable") if g != group[0] and shares[g]][:MATCHED_BY]
    return [
        {"exemplar": exemplars[named[g]], "share": float(shares[g]), "wordings": int((group == g).sum())}
        for g in [int(group[0]), *others]
    ]
