"""Exemplars that stray from the change a labeler claims: a stock sentence both checkpoints say, or another
behaviour, among a behaviour's carriers (`strays`), found from which checkpoint the segments each exemplar
matches are of."""

from __future__ import annotations

import numpy as np

from engine.hypotheses.geometry import wordings
from engine.hypotheses.ngrams import MIN_Z

# An exemplar whose own lean is not significant (z < MIN_Z against the share of the checkpoint with more that all
# segments have) and whose segments are this many nats likelier at that share than at the share of the exemplars
# that lean more (`_no_lean_nats`; e^2, about 7 to 1) strays
NO_LEAN_NATS = 2.0


def strays(matched: np.ndarray, more: np.ndarray, weight: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Exemplars (columns of `matched`, segments by exemplars; their normalised `vectors` as rows) whose matched
    segments are of the checkpoint the change claims more of (`more`) significantly less often than the other
    exemplars' are: a stock sentence both checkpoints say, or another behaviour, among a behaviour's carriers,
    which would make the labeler fire on every turn that says it. Shares are weighted by `weight` (a sampled
    quiet segment stands for several).

    Wordings of one sentence (`geometry.wordings`) are tested and dropped as one: each compared with the
    others, its near-copies among them, stood out from nothing (habit suite seed 0: nine wordings of "payment
    must come from the profile", said alike by both checkpoints, stayed nine of a labeler's sixteen exemplars
    beside sentences that assume a missing payment method, and the finding quoted the stock sentence).
    Paraphrases of a behaviour are further apart (MiniLM 0.4-0.6) and stay apart.

    The others are those that lean with the change (a higher share than all segments have) more than the
    exemplar does: a stock sentence carries none of the change, so it says nothing of the behaviour's share,
    and a third of a latent's carriers being prices listed in both checkpoints must not make the behaviour's
    own sentences look like the norm. Nor may stock sentences that lean a little by chance be each other's
    norm: at a low threshold three matching 94 to 217 turns, 52-55% of them of the checkpoint with more
    against 50% overall, were most of what each was compared with, and none strayed (paraphrased suite seed
    83: an empathy finding read 39% -> 27% of reasoning turns, its empathy sentences alone 12% -> 0%). Strays
    are removed one at a time, the most significant first (two-proportion z >= MIN_Z), and the others tested
    again without it.

    Where both checkpoints say the behaviour and its rate moves (threefold: its exemplars' segments about three
    quarters of the checkpoint with more), a stock sentence's segments, at the half all segments have, are too
    close to the others' share for that z: 56 of them stood just under z = 2 and stayed, and an empathy finding
    quoted "Anyway, I will wait for their answer." (shift suite, seed 7919). So an exemplar also strays when its
    own lean is not significant (`_base_z` < MIN_Z) and its segments are likelier at the share all segments
    have than at the others' by NO_LEAN_NATS (`_no_lean_nats`): many segments at no lean say so, a few say
    little either way and stay. A wording that leans significantly on its own stays, though less than the
    others: it is the behaviour where its rate moves less (the tau2 sample's requests for confirmation, 131
    turns at 71% against 62%, beside the "clear yes" wordings that lean most)."""
    group = wordings(vectors)
    grouped = np.stack([matched[:, group == g].any(axis=1) for g in range(group.max() + 1)], axis=1)
    return _stray_columns(grouped, more, weight)[group]


def _stray_columns(matched: np.ndarray, more: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """`strays` over columns as they are (each an exemplar or a group of them)."""
    shares = np.array([(weight * more)[m].sum() / max(weight[m].sum(), 1e-12) for m in matched.T])
    base = (weight * more).sum() / weight.sum()
    leaning = shares > base
    stray = np.zeros(matched.shape[1], dtype=bool)
    while (~stray).sum() > 1:
        score = np.full(matched.shape[1], -np.inf)  # each test's statistic over its bar: a stray at 1 or more
        for j in np.flatnonzero(~stray):
            others = np.asarray(np.any(matched[:, ~stray & leaning & (shares > shares[j])], axis=1))
            score[j] = _lean_z(matched[:, j], others, more, weight) / MIN_Z
            if _base_z(matched[:, j], shares[j], base) < MIN_Z:
                score[j] = max(score[j], _no_lean_nats(matched[:, j], others, more, weight, base) / NO_LEAN_NATS)
        worst = int(np.argmax(score))
        if score[worst] < 1.0:
            break
        stray[worst] = True
    return stray


def _lean_z(mine: np.ndarray, others: np.ndarray, more: np.ndarray, weight: np.ndarray) -> float:
    """How much less often `mine`'s segments are of the `more` checkpoint than `others`' (two-proportion z on
    weighted shares, counts unweighted; the pooled share +1/+2, so that its variance is never 0)."""
    n_mine, n_others = int(mine.sum()), int(others.sum())
    if not n_mine or not n_others:
        return -np.inf
    share = [(weight * more)[m].sum() / weight[m].sum() for m in (mine, others)]
    pooled = ((weight * more)[mine | others].sum() + 1) / (weight[mine | others].sum() + 2)
    return float((share[1] - share[0]) / np.sqrt(pooled * (1 - pooled) * (1 / n_mine + 1 / n_others)))


def _base_z(mine: np.ndarray, share: float, base: float) -> float:
    """How far `mine`'s segments, `share` of them (weighted) of the checkpoint with more, lean beyond `base`, the
    share all segments have (binomial z, counts unweighted)."""
    if not 0.0 < base < 1.0 or not mine.any():  # nothing to lean against, or nothing leaning
        return np.inf
    return float((share - base) / np.sqrt(base * (1 - base) / int(mine.sum())))


def _no_lean_nats(mine: np.ndarray, others: np.ndarray, more: np.ndarray, weight: np.ndarray, base: float) -> float:
    """How many nats likelier `mine`'s segments are at `base`, the share of the `more` checkpoint all segments
    have, than at `others`' share (binomial log likelihood ratio on weighted shares, counts unweighted; others' share
    +1/+2, so that a labeler whose others are all of one checkpoint does not make one segment of the other
    infinitely unlikely)."""
    n_mine, n_others = int(mine.sum()), int(others.sum())
    if not n_mine or not n_others:
        return -np.inf
    k = n_mine * (weight * more)[mine].sum() / weight[mine].sum()
    p = (n_others * (weight * more)[others].sum() / weight[others].sum() + 1) / (n_others + 2)
    return float(k * np.log(base / p) + (n_mine - k) * np.log((1 - base) / (1 - p)))
