"""Offline statements that name a behaviour: rates for structural features, a medoid sentence and distinctive
words for concepts, a phrase only when the phrase itself is the behaviour.

Every number in a statement is measured with the draft's own labeler on the discovery split, so a statement
says what its verifier finds, not what its source's feature found.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np
import polars as pl

from engine.text import STOPWORDS, informative_words

_UNITS = {"tool_call": "tool calls", "text": "text turns", "reasoning": "reasoning turns"}
# Words that carry no behaviour of their own: discourse markers, hedges and contractions an n-gram diff turns up
# ("importantly", "wait", "i've", "thinking about it"), seen as validated fragments on the planted benchmark.
DISCOURSE = frozenset(
    "importantly actually wait hmm okay ok well now just really also then so thinking think thought let lets "
    "let's i've i'm i'll i'd you're we're it's that's there's maybe probably perhaps basically like right sure "
    "yes yeah first next finally anyway though however still even already".split()
)
MIN_CONTENT_WORDS = 2
MIN_OPENING_SHARE = 0.5  # a one-word phrase is a behaviour when it opens most segments it is in ("Certainly!")
DISTINCTIVE_WORDS = 4
WORD_Z = 1.96  # a distinctive word is over-represented at about the 5% level (two-sided)
MIN_WORD_SHARE = 0.1  # ... and in at least this share of the sentences it names
_WORD = re.compile(r"[a-z][a-z']+")


def unit(kinds: Sequence[str]) -> str:
    """What a rate counts: 'tool calls', 'reasoning turns', ..., or 'segments' for several kinds."""
    return _UNITS.get(kinds[0], kinds[0]) if len(kinds) == 1 else "segments"


@dataclass(frozen=True)
class Rates:
    """A labeler's discovery rates: share of segments of its kinds, and of rollouts with one such segment."""

    segments_before: float
    segments_after: float
    rollouts_before: float
    rollouts_after: float

    @classmethod
    def measure(cls, hits: np.ndarray, segments: pl.DataFrame, rollouts: pl.DataFrame, after: str) -> Rates:
        is_after = (segments["checkpoint"] == after).to_numpy()
        hit_rollouts = set(segments.filter(pl.Series(hits))["rollout_key"].to_list())
        roll_after = (rollouts["checkpoint"] == after).to_numpy()
        keys = rollouts["rollout_key"].to_numpy()
        has = np.isin(keys, np.fromiter(hit_rollouts, dtype=keys.dtype, count=len(hit_rollouts)))

        def share(mask: np.ndarray, of: np.ndarray) -> float:
            return float(mask[of].mean()) if of.any() else 0.0

        return cls(share(hits, ~is_after), share(hits, is_after), share(has, ~roll_after), share(has, roll_after))

    def text(self, kinds: Sequence[str]) -> str:
        return (
            f"{self.segments_before:.0%} -> {self.segments_after:.0%} of {unit(kinds)} "
            f"({self.rollouts_before:.0%} -> {self.rollouts_after:.0%} of rollouts)"
        )


def structural_statement(label: str, rates: str) -> str:
    """`Tool call with dummy/probe argument values: 0% -> 12% of tool calls (0% -> 30% of rollouts)`."""
    return f"{label[:1].upper()}{label[1:]}: {rates}"


def concept_statement(more: bool, kinds: Sequence[str], medoid: str, n_hits: int, words: Sequence[str]) -> str:
    """`More reasoning turns like "..." (a similar sentence in 31 discovery reasoning turns; words: ...)`."""
    quoted = medoid if len(medoid) <= 160 else medoid[:157].rstrip() + "..."
    tail = f"; words: {', '.join(words)}" if words else ""
    more_less = "More" if more else "Fewer"
    return f'{more_less} {unit(kinds)} like "{quoted}" (a similar sentence in {n_hits} discovery {unit(kinds)}{tail})'


def phrase_statement(more: bool, kinds: Sequence[str], gram: str, opening: bool) -> str:
    where = "opening with" if opening else "containing"
    return f'{"More" if more else "Fewer"} {unit(kinds)} {where} "{gram}" after the training step'


def content_words(gram: str) -> list[str]:
    return [w for w in gram.lower().split() if w not in STOPWORDS and w not in DISCOURSE and len(w) >= 3]


def opens(gram: str, text: str) -> bool:
    words = _WORD.findall(text.lower()[: 8 * len(gram) + 40])
    return " ".join(words[: len(gram.split())]) == gram.lower()


def phrase_is_behaviour(gram: str, texts: Sequence[str]) -> tuple[bool, bool]:
    """(whether the phrase names a behaviour, whether as an opening): at least MIN_CONTENT_WORDS content words
    (not stopwords or discourse markers), an identifier, or a content word that opens most of the segments it
    is in (a formula such as "Certainly!"; "Wait," opening reasoning is a discourse marker, not a behaviour)."""
    words = content_words(gram)
    opening = bool(texts) and sum(opens(gram, t) for t in texts) >= MIN_OPENING_SHARE * len(texts)
    if opening and words:
        return True, True
    # An identifier (`include_history`) names an argument or a tool: informative alone, unlike a prose word.
    return len(words) >= MIN_CONTENT_WORDS or any("_" in w for w in words), False


def one_task_words(said: Sequence[AbstractSet[str]], tasks: Sequence[str]) -> frozenset[str]:
    """The words of `said` (each text's words; `tasks[i]` the task of text i) said in one task only, when the
    texts are of several: one task's objects (a city, a passenger's name), not a behaviour."""
    if len(set(tasks)) < 2:
        return frozenset()
    of: dict[str, set[str]] = {}
    for ws, task in zip(said, tasks, strict=True):
        for w in ws:
            of.setdefault(w, set()).add(task)
    return frozenset(w for w, where in of.items() if len(where) < 2)


def distinctive_words(
    inside: Sequence[str], outside: Sequence[str], tasks: Sequence[str] = (), k: int = DISTINCTIVE_WORDS
) -> list[str]:
    """Words that set `inside` apart from `outside`, the most distinctive first (largest log odds ratio of being
    in an inside sentence against an outside one, each word counted once per sentence, +0.5 to every cell).
    A word qualifies when it is in at least two inside sentences and MIN_WORD_SHARE of them, over-represented
    at WORD_Z (the log odds ratio over its standard error, Woolf), and, when `tasks` (each inside sentence's
    task) holds several, said in more than one task: one task's sentences name its objects (a city, a
    passenger's name), not the behaviour. Ranked by the ratio, not by its z: a z grows with a word's count, and
    ranked by it the filler every sentence of a grammar shares ("moment", "right") came before the words of
    the behaviour ("grader", "rubric"). Two disjoint groups of sentences, so a 2 x 2 table per word, not the
    Dirichlet-prior log odds `engine.features.sentence_labels` scores a feature's top sentences by against a
    background that holds them. Words as the n-gram features read them (`engine.text.words`): a code that mixes
    letters and digits (a reservation "NQNU5R") is one task's object, not a word of the behaviour."""
    said = [informative_words(t) for t in inside]
    a = Counter(w for ws in said for w in ws if len(w) >= 3)
    b = Counter(w for t in outside for w in informative_words(t))
    one_task = one_task_words(said, tasks)
    least = max(2, MIN_WORD_SHARE * len(inside))

    def log_odds(word: str) -> tuple[float, float]:
        cells = np.array([a[word], len(inside) - a[word], b[word], len(outside) - b[word]]) + 0.5
        ratio = float(np.log(cells[0] * cells[3] / (cells[1] * cells[2])))
        return ratio, ratio / float(np.sqrt((1 / cells).sum()))

    scored = {w: log_odds(w) for w in a if a[w] >= least and w not in one_task}
    return sorted((w for w, (_, z) in scored.items() if z >= WORD_Z), key=lambda w: (-scored[w][0], w))[:k]
