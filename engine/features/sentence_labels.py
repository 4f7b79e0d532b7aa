"""Offline labels for sentence features (concepts and behaviour groups): a medoid sentence plus distinctive words.

The medoid is the top sentence most similar, on average, to the feature's other top sentences: a real sentence
that says what the others say. Distinctive words are scored by the weighted log-odds ratio with an informative
Dirichlet prior (Monroe, Colaresi & Quinn 2008, "Fightin' Words"), the feature's top sentences against a
background sample of all sentences, counted once per sentence so one long sentence cannot dominate; a word
must occur in at least MIN_SHARE of the top sentences and be informative (not a stopword, number or id).
Example: `reasoning: "the evaluator might penalise me unless I …" (evaluator, penalise, marked, correct)`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.features.labels import KIND_NAMES, clean
from engine.text import informative_words

LABEL_WORDS = 4  # distinctive words shown in a label
MEDOID_CHARS = 90  # the medoid sentence is cut to this many characters in the label
MIN_SHARE = 0.2  # a distinctive word occurs in at least this share of the top sentences (and at least twice)
PRIOR_WEIGHT = 100.0  # total pseudo-count of the background prior: smooths rare words toward their base rate
KIND_MAJORITY = 0.75  # the label names a kind when this share of top sentences are of it


@dataclass(frozen=True)
class SentenceLabel:
    label: str
    medoid: str  # the medoid sentence, whole
    words: list[dict[str, float | str]]  # [{"word", "z"}], most distinctive first


def background_counts(texts: Iterable[str]) -> tuple[Counter, int]:
    """In how many sentences each informative word occurs, and how many sentences there were."""
    counts: Counter = Counter()
    n = 0
    for text in texts:
        n += 1
        counts.update(informative_words(text))
    return counts, n


def medoid(vectors: np.ndarray) -> int:
    """Row of the L2-normalised `vectors` with the largest mean cosine similarity to the others."""
    if len(vectors) <= 2:
        return 0
    return int(np.argmax((vectors @ vectors.T).sum(axis=1)))


def distinctive_words(top: Sequence[str], background: Counter, n_background: int) -> list[dict[str, float | str]]:
    """Words of the top sentences ranked by the z-score of their weighted log-odds against the background."""
    counts = Counter(w for text in top for w in informative_words(text))
    n_top = len(top)
    least = max(2, math.ceil(MIN_SHARE * n_top))
    n_bg = max(n_background, 1)
    scored = []
    for word, y in counts.items():
        if y < least:
            continue
        b = background.get(word, 0)
        alpha = PRIOR_WEIGHT * (b + 1) / (n_bg + 1)
        log_odds_top = math.log((y + alpha) / max(n_top + PRIOR_WEIGHT - y - alpha, 1e-9))
        log_odds_bg = math.log((b + alpha) / max(n_bg + PRIOR_WEIGHT - b - alpha, 1e-9))
        z = (log_odds_top - log_odds_bg) / math.sqrt(1 / (y + alpha) + 1 / (b + alpha))
        if z > 0:
            scored.append((z, word))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [{"word": clean(w), "z": round(z, 2)} for z, w in scored[:LABEL_WORDS]]


def label_sentences(
    top: Sequence[str], kinds: Sequence[str], vectors: np.ndarray, background: Counter, n_background: int
) -> SentenceLabel:
    """The label of a sentence feature from its top sentences (strongest first), their segment kinds and
    embeddings."""
    if not top:
        return SentenceLabel("no examples", "", [])
    central = clean(top[medoid(vectors)])
    ranked = distinctive_words(top, background, n_background)
    shown = central if len(central) <= MEDOID_CHARS else central[: MEDOID_CHARS - 1].rstrip() + "…"
    kind, n = Counter(kinds).most_common(1)[0]
    prefix = KIND_NAMES.get(kind, kind) if n >= KIND_MAJORITY * len(kinds) else "mixed"
    listed = f" ({', '.join(str(w['word']) for w in ranked)})" if ranked else ""
    return SentenceLabel(f"{prefix}: “{shown}”{listed}", central, ranked)
