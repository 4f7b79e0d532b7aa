"""Turn length as a stratum of held-out validation.

A labeler that fires on a turn holding one matching sentence fires more often on longer turns, so a checkpoint
whose turns grew can "validate" a finding that is only length. The equal-length rate standardises each
rollout's labelled rate over turn-length strata (`engine.stats.strata`): per kind, bins at
quantiles of words over the hypothesis's labelled segments of both checkpoints (label-free, so the test stays
exact). A change that survives it is a change among turns of the same length. Tool calls and other kinds are one
stratum each; a hypothesis about length itself is not standardised (`engine.hypotheses.equal_length`).
Methods: docs/statistics.md section 11.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from engine.stats.strata import Strata

# Kinds whose turns are binned by length, and at most this many bins of at least MIN_PER_BIN labelled
# segments each. Bins narrow as the data grow: within a bin the checkpoint whose turns grew still has the longer
# turns, a bias that a large study's test detects (quartiles: 13% of 2,400-turn studies under length alone
# passed uncautioned, against 5.0% of 640-turn ones; `bench/length_caution.py`).
BINNED_KINDS = ("text", "reasoning")
MAX_BINS = 32
MIN_PER_BIN = 100


def length_strata(kind: np.ndarray, words: np.ndarray) -> np.ndarray:
    """(n_segments,) stratum codes: per binned kind, quantile bins of `words`; every other kind one stratum."""
    codes = np.zeros(kind.size, dtype=np.int64)
    next_code = 0
    for k in np.unique(kind):
        members = kind == k
        n_bins = min(MAX_BINS, int(members.sum()) // MIN_PER_BIN) if k in BINNED_KINDS else 1
        if n_bins > 1:
            inner = np.unique(np.quantile(words[members], np.arange(1, n_bins) / n_bins))
            local = np.searchsorted(inner, words[members], side="left")  # bins (e_i-1, e_i]
        else:
            local = np.zeros(int(members.sum()), dtype=np.int64)
        codes[members] = next_code + np.unique(local, return_inverse=True)[1]
        next_code = int(codes[members].max()) + 1
    return codes


def equal_length_strata(labelled: pl.DataFrame, rows: np.ndarray) -> Strata | None:
    """One hypothesis's turn-length strata over the design's rollouts, for `engine.stats.strata`: (its labelled
    positives in each stratum, one (n_rollouts, 1) column each; (n_rollouts, n_strata) labelled weight; support),
    or None with one stratum only.

    labelled: row (index into the population's rollouts), kind, words, weight, label of its labelled segments;
    rows: the population rollout index of each of the design's rollouts."""
    strata = length_strata(labelled["kind"].to_numpy(), labelled["words"].to_numpy())
    n_strata = int(strata.max()) + 1 if strata.size else 0
    if n_strata < 2 or not np.isin(labelled["kind"].to_numpy(), BINNED_KINDS).any():
        return None
    position = np.full(int(max(rows.max(), labelled["row"].max())) + 1, -1)
    position[rows] = np.arange(rows.size)
    r = position[labelled["row"].to_numpy()]
    inside = r >= 0
    r, s = r[inside], strata[inside]
    w = labelled["weight"].to_numpy()[inside]
    positive = w * labelled["label"].to_numpy()[inside]
    totals = np.zeros((rows.size, n_strata))
    counts = np.zeros((rows.size, n_strata))
    np.add.at(totals, (r, s), w)
    np.add.at(counts, (r, s), positive)
    return [counts[:, [i]] for i in range(n_strata)], totals, np.ones((n_strata, 1))


def words_per_turn(labelled: pl.DataFrame, is_after: np.ndarray) -> tuple[float, float]:
    """Mean words of the labelled turns of binned kinds the labeler does not fire on, (before, after), weighted
    as labelled: whether turns grew apart from the claimed content (a turn that gains the claimed sentence
    grows by it, which is no reason for caution)."""
    turns = labelled.filter(pl.col("kind").is_in(BINNED_KINDS) & ~pl.col("label"))
    after = is_after[turns["row"].to_numpy()]
    w, words = turns["weight"].to_numpy(), turns["words"].to_numpy()
    means = [
        float(np.average(words[side], weights=w[side])) if w[side].sum() > 0 else np.nan for side in (~after, after)
    ]
    return means[0], means[1]
