"""How an n-gram set separates the checkpoints on the discovery split (n-grams as `engine.text.ngrams` reads them),
and how far two labelers pick the same segments."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from engine.text import ngrams

MIN_Z = 2.0  # a draft whose labeler does not separate the discovery checkpoints this well is dropped (also
# the z by which an exemplar strays from the others, `strays.strays`)

MOSTLY_INSIDE = 0.8  # share of one labeler's positives inside another's for it to be a narrower form of it


def mostly_inside(n_both: int, n_a: int) -> bool:
    """Whether a labeler with `n_a` positives, `n_both` of them shared with another, lies mostly inside it."""
    return n_a > 0 and n_both >= MOSTLY_INSIDE * n_a


def nearly_equal(n_both: int, n_a: int, n_b: int) -> bool:
    """Whether two labelers' positives have Jaccard >= 0.5."""
    return n_both > 0 and n_both >= 0.5 * (n_a + n_b - n_both)


def same_segments(n_both: int, n_a: int, n_b: int) -> bool:
    """Whether two labelers pick (nearly) the same segments: Jaccard >= 0.5, or one's positives lie mostly
    inside the other's, i.e. one is a narrower form of the same behaviour."""
    if min(n_a, n_b) == 0:
        return False
    return nearly_equal(n_both, n_a, n_b) or mostly_inside(n_both, min(n_a, n_b))


def two_proportion_z(hits_after: float, n_after: float, hits_before: float, n_before: float) -> float:
    """z of after-rate minus before-rate (pooled variance); 0 when undefined. For ranking, not for testing.
    Counts may be fractional (the judge's Kish effective sizes of a weighted sample)."""
    if n_after == 0 or n_before == 0:
        return 0.0
    pooled = (hits_after + hits_before) / (n_after + n_before)
    var = pooled * (1 - pooled) * (1 / n_after + 1 / n_before)
    return 0.0 if var <= 0 else (hits_after / n_after - hits_before / n_before) / math.sqrt(var)


@dataclass
class NgramIndex:
    """Per segment kind on the discovery split: which n-grams each segment has, and who is after. `matches`
    reads an inverted index (n-gram -> segment rows), built on first use: drafting asks for the segments of
    hundreds of thousands of single n-grams, and a scan of every segment's set per n-gram was most of its time."""

    grams: list[set[str]]
    is_after: np.ndarray  # (n_segments,) bool
    segment_ids: np.ndarray
    _rows: dict[str, list[int]] | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def build(cls, texts: list[str], is_after: np.ndarray, segment_ids: np.ndarray) -> NgramIndex:
        return cls([ngrams(t) for t in texts], np.asarray(is_after, dtype=bool), np.asarray(segment_ids))

    def counts(self, rows: np.ndarray | None = None) -> Counter[str]:
        counter: Counter[str] = Counter()
        for i in range(len(self.grams)) if rows is None else rows:
            counter.update(self.grams[i])
        return counter

    def matches(self, gram_set: set[str]) -> np.ndarray:
        """Whether each segment has any of `gram_set`."""
        if self._rows is None:
            self._rows = {}
            for row, segment_grams in enumerate(self.grams):
                for gram in segment_grams:
                    self._rows.setdefault(gram, []).append(row)
        hits = np.zeros(len(self.grams), dtype=bool)
        for gram in gram_set:
            hits[self._rows.get(gram, [])] = True
        return hits

    def z(self, hits: np.ndarray) -> float:
        n_after = int(self.is_after.sum())
        return two_proportion_z(
            int(hits[self.is_after].sum()), n_after, int(hits[~self.is_after].sum()), self.is_after.size - n_after
        )

    def best(self, candidates: list[str], sign: float) -> str | None:
        """The candidate n-gram that best separates the checkpoints in the direction `sign` (+1: more in
        after); ties go to the longer phrase (it reads better and over-matches less). None if none does."""
        scored = [(sign * self.z(self.matches({c})), len(c.split()), len(c), c) for c in candidates]
        score, *_, gram = max(scored, default=(0.0, 0, 0, None))
        return gram if score > 0 else None
