"""The seed sentences an exemplar labeler is fitted around: which sentences of a feature's firing segments
carry it (`engine.hypotheses.exemplars.fit_exemplars` picks each firing segment's sentence closest to them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

NEIGHBOURS = 5  # closest sentences whose mean says how typical a sentence is of the firing or the quiet segments
QUIET_SEGMENTS = 200  # about this many quiet segments' sentences (evenly drawn) a firing sentence is compared with


def carrier_seeds(
    examples: Sequence[str],
    units: Sequence[Sequence[str]],
    fires: np.ndarray,
    embed: Callable[[list[str]], np.ndarray],
) -> list[str]:
    """The feature's example sentences that are sentences of its firing segments (`units`: each segment's
    sentences; `fires`: parallel to it); when none is (a feature's strongest examples may all be replies while
    it is drafted for reasoning turns), each firing segment's sentence most like the other firing segments'
    and least like the quiet ones' (mean cosine to the NEIGHBOURS closest of each, `embed` giving normalised
    rows): the sentence that carries what the firing segments share. Most typical first."""
    firing = [(int(i), u) for i in np.flatnonzero(fires) for u in units[int(i)]]
    own = {u for _, u in firing}
    if not firing or any(t in own for t in examples):
        return [t for t in examples if t in own]
    quiet = [u for i in np.flatnonzero(~fires) for u in units[int(i)]][:: max(1, int((~fires).sum()) // QUIET_SEGMENTS)]
    vectors = embed([u for _, u in firing])
    owner = np.array([i for i, _ in firing])
    within = vectors @ vectors.T
    within[owner[:, None] == owner[None, :]] = -1.0  # a sentence's own segment does not vouch for it

    def closest(sims: np.ndarray) -> np.ndarray:
        k = min(NEIGHBOURS, sims.shape[1])
        top = np.partition(sims, -k, axis=1)[:, -k:] if k else sims
        return np.sort(top, axis=1).mean(axis=1)  # sorted as a full sort's last k are: the same sum

    score = closest(within) - (closest(vectors @ embed(quiet).T) if quiet else 0.0)
    best = [max(np.flatnonzero(owner == i), key=lambda j: score[j]) for i in dict.fromkeys(owner.tolist())]
    return [firing[j][1] for j in sorted(best, key=lambda j: -score[j])]
