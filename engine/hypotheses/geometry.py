"""Where sentences lie among everything else a study says: whether sets of sentence embeddings (normalised rows)
are one behaviour or two. Rank- and cohesion-based rules, so that they do not move with how alike a study's
ordinary text is; used to part a source's carriers (`exemplars`), to keep two behaviours in two findings and to
join two wordings of one (`merge`, `parting`)."""

from __future__ import annotations

import numpy as np
from scipy.sparse.csgraph import connected_components

BISECT_ROUNDS = 20  # 2-means rounds at most (it settles in a few)
# Two labelers are one behaviour when each one's exemplars are nearer the other's centre than all but this share
# of the other sentences of their kinds (`neighbouring`; measured gap: 2.2% within a behaviour, 9.5% between)
NEIGHBOUR_SHARE = 0.05
SAME_SENTENCE = 0.8  # MiniLM cosine of one sentence's wordings (openers, verbs); paraphrases sit at 0.4-0.6


def distinct_behaviours(a: np.ndarray, b: np.ndarray, ordinary: np.ndarray) -> bool:
    """Whether two sets of sentence rows are distinct behaviours: on average no more alike than the more
    typical set's sentences are to ordinary ones (`ordinary`, the mean row of ordinary sentences; mean cosine,
    the dot product of mean rows). Halves of one behaviour are far more alike than either is to ordinary text
    (planted suite, seed 7: 0.27-0.74 against 0.11-0.26); two behaviours that share a phrase are not."""
    mean_a, mean_b = a.mean(axis=0), b.mean(axis=0)
    return bool(mean_a @ mean_b <= max(mean_a @ ordinary, mean_b @ ordinary))


def nearer_unrelated(a: np.ndarray, b: np.ndarray, ordinary: np.ndarray) -> bool:
    """Whether two sets of sentence rows (at least two each) are another behaviour each: their mean cross cosine
    rises above the ordinary level (the higher of either mean row's cosine with `ordinary`) by less than a
    third of what the less cohesive set's own sentences do (their mean pairwise cosine). Sets of one behaviour
    in other words meet nearly as well as their own sentences do (planted suite, MiniLM: 0.42 to 1.2 of the
    way); two behaviours of one register (grader awareness, a declined check), which `distinct_behaviours`
    cannot tell apart, meet a little above the ordinary level (-0.4 to 0.26)."""
    mean_a, mean_b = a.mean(axis=0), b.mean(axis=0)
    level = max(mean_a @ ordinary, mean_b @ ordinary)
    return bool(mean_a @ mean_b - level < (min(_pairwise(a), _pairwise(b)) - level) / 3)


def neighbouring(a: np.ndarray, b: np.ndarray, sentences: np.ndarray, others: np.ndarray) -> bool:
    """Whether two sets of normalised sentence rows are one behaviour in other words by where they lie among
    everything else said (`sentences`, normalised rows; `others` marks those of them neither set's labeler
    matches): each set's sentences are nearer the other's centre than all but NEIGHBOUR_SHARE of the others
    are, on average.
    A rank, not a cosine, so it does not move with how alike a study's ordinary text is. Templates of one
    paraphrased behaviour (empathy voiced as disappointment, stress, annoyance or inconvenience) sit at
    0.2-2.2% of each other; two behaviours of one register (grader awareness, a declined check, re-checking)
    at 46-78%, and on the tau2 sample the after checkpoint's stock replies (confirmations, lookups, closing
    offers) at 9.5% and above, where the cohesion of `nearer_unrelated` calls most of them one behaviour."""
    if not others.any():
        return False
    return max(_nearer_share(a, b, sentences, others), _nearer_share(b, a, sentences, others)) <= NEIGHBOUR_SHARE


def behaviours(rows: np.ndarray, others: np.ndarray) -> np.ndarray:
    """A behaviour number per normalised sentence row: two rows are one behaviour when each is nearer the other
    than all but NEIGHBOUR_SHARE of `others` are (`neighbouring`, one sentence a side), transitively; numbered
    from 0 in order of their first row. All one behaviour when `others` is empty. The labelers of planted
    behaviours (2 to 115 exemplars) are one, at most with a straggler nearest 2% of their positives; the tau2
    sample's, fitted to broad sources, hold two to eleven (a policy refusal and the closing "Safe travels!")."""
    if not len(others):
        return np.zeros(len(rows), dtype=int)
    sims = rows @ rows.T
    nearer = np.stack([_above(others @ row, sims[i]) for i, row in enumerate(rows)])  # [i, j]: nearer i than j is
    return connected_components(np.maximum(nearer, nearer.T) <= NEIGHBOUR_SHARE, directed=False)[1]


def wordings(vectors: np.ndarray) -> np.ndarray:
    """A group number per row of normalised `vectors`: wordings of one sentence, rows at cosine >= SAME_SENTENCE
    (transitively, connected components), share one; groups numbered from 0 in order of their first row."""
    return connected_components(vectors @ vectors.T >= SAME_SENTENCE, directed=False)[1]


def bisect(vectors: np.ndarray) -> np.ndarray | None:
    """Two halves of normalised rows: split at the first principal direction (deterministic, and not pulled
    by an outlier as a start from the farthest row is), then refined by spherical 2-means; True marks one half
    (the first row starts in the other). None when every row falls on one side. The rows' projections on the
    direction come from the smaller of the two Gram matrices (rows x rows, or dimensions x dimensions): an SVD
    of the rows grows with them (3,000 carriers of 384 dimensions: 0.3-0.5 s a call, against 0.03 s)."""
    centred = vectors - vectors.mean(axis=0)
    if len(centred) <= centred.shape[1]:
        projected = np.linalg.eigh(centred @ centred.T)[1][:, -1]
    else:
        projected = centred @ np.linalg.eigh(centred.T @ centred)[1][:, -1]
    side = projected > 0 if projected[0] <= 0 else projected < 0
    for _ in range(BISECT_ROUNDS):
        if side.all() or not side.any():
            return None
        centres = np.stack([normalised(vectors[~side].mean(axis=0)), normalised(vectors[side].mean(axis=0))])
        new = (vectors @ centres.T).argmax(axis=1) == 1
        if (new == side).all():
            break
        side = new
    return side


def _nearer_share(centre_rows: np.ndarray, rows: np.ndarray, sentences: np.ndarray, others: np.ndarray) -> float:
    """The mean over `rows` of the share of the `others` of `sentences` nearer (cosine) the centre of
    `centre_rows` than the row (projected before they are picked: the merge asks this of many pairs)."""
    centre = normalised(centre_rows.mean(axis=0))
    return float(_above((sentences @ centre)[others], rows @ centre).mean())


def _above(values: np.ndarray, points: np.ndarray) -> np.ndarray:
    """For each of `points`, the share of `values` above it."""
    return 1.0 - np.searchsorted(np.sort(values), points, side="right") / len(values)


def _pairwise(rows: np.ndarray) -> float:
    """Mean cosine between distinct normalised rows."""
    n = len(rows)
    return float((np.square(rows.sum(axis=0)).sum() - n) / (n * (n - 1)))


def normalised(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-12)
