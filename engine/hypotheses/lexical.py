"""Lexical sources: word n-grams of the discovery split whose prevalence changed, tested like features.

The features stage may miss a short, rare phrase (an SAE latent that also fires on most other text hides it).
Every n-gram whose design lets it reach significance (Tarone's attainable p, as in the deltas) gets the deltas'
test: each rollout's rate, within-task permutation of checkpoint labels, p-values refined where the Monte Carlo
floor binds, and Benjamini-Hochberg across all n-grams of all kinds (the lexical family). The strongest
significant ones become sources; drafting, merging and held-out validation then treat them like feature sources.
"""

from __future__ import annotations

import logging

import numpy as np
import polars as pl
import scipy.sparse as sp

from engine.hypotheses.draft import Discovery
from engine.hypotheses.ngrams import same_segments
from engine.hypotheses.sources import Source
from engine.kinds import SEGMENT_KINDS
from engine.stats.attainable import attainable_pvalue
from engine.stats.design import CheckpointDesign
from engine.stats.fdr import bh_qvalues
from engine.stats.permutation import PermutationBlock, refined_pvalues
from engine.stats.rates import rollout_rates

log = logging.getLogger(__name__)

MAX_LEXICAL = 15  # sources per kind
MAX_TESTED = 10_000  # n-grams tested per kind, the most widespread (the permutation test's cost)
KINDS = SEGMENT_KINDS


def lexical_sources(
    discovery: Discovery, rng: np.random.Generator, *, fdr: float, n_permutations: int, limit: int = MAX_LEXICAL
) -> list[Source]:
    """Significant n-gram sources, strongest (lowest q, then largest delta) first within each kind."""
    population = discovery.population
    keys, is_after, task, _ = population.rollout_arrays()
    row_of = {int(k): i for i, k in enumerate(keys)}
    blocks, meta = [], []
    for kind in KINDS:
        index, segs = discovery.index((kind,))
        if segs.height == 0:
            continue
        rows = np.array([row_of[int(k)] for k in segs["rollout_key"]])
        vocab: dict[str, int] = {}
        cells_r, cells_c = [], []
        for r, grams in zip(rows, index.grams, strict=True):
            for g in sorted(grams):  # columns in one order whatever the hash seed: ties then break the same way
                cells_r.append(r)
                cells_c.append(vocab.setdefault(g, len(vocab)))
        if not vocab:
            continue
        counts = sp.csc_array(
            (np.ones(len(cells_r), dtype=np.float32), (cells_r, cells_c)), shape=(keys.size, len(vocab))
        )
        totals = np.bincount(rows, minlength=keys.size).astype(np.float32)
        has = np.flatnonzero(totals > 0)
        design = CheckpointDesign.from_labels(is_after[has], task[has])
        if kind == "tool_call":  # among calls to the tools the n-gram occurs on, as for tool-call features
            totals = own_tool_calls(segs["tool_name"].to_list(), rows, index.grams, vocab, keys.size)
        counts, totals = counts[has[design.keep]], totals[has[design.keep]]
        firing = np.bincount(counts.tocoo().col, minlength=len(vocab))
        floor = attainable_pvalue(rollout_rates(counts, totals, design), design)
        testable = np.flatnonzero(floor <= fdr)
        if testable.size > MAX_TESTED:  # keep the most widespread: a filter blind to checkpoints keeps p valid
            testable = testable[np.argsort(-firing[testable], kind="stable")[:MAX_TESTED]]
        if testable.size == 0:
            continue
        grams = np.array(list(vocab))[testable]
        blocks.append(
            PermutationBlock(counts[:, testable], totals if totals.ndim == 1 else totals[:, testable], design)
        )
        meta.append((kind, grams))
    if not blocks:
        return []
    results = refined_pvalues(blocks, rng, n_permutations, fdr=fdr, max_permutations=n_permutations * 100)
    q = bh_qvalues(np.concatenate([r.p_value for r in results]))
    offsets = np.cumsum([0] + [b.n_features for b in blocks])
    log.info("lexical sources: %d n-grams tested, %d significant", q.size, int((q < fdr).sum()))
    sources = []
    for i, ((kind, grams), result) in enumerate(zip(meta, results, strict=True)):
        qk = q[offsets[i] : offsets[i + 1]]
        frame = pl.DataFrame({"gram": grams, "delta": result.observed, "q": qk}).filter(pl.col("q") < fdr)
        index, _ = discovery.index((kind,))
        chosen: list[np.ndarray] = []
        for gram, delta, qv in frame.sort(
            ["q", pl.col("delta").abs(), "gram"], descending=[False, True, False]
        ).iter_rows():
            if len(chosen) >= limit:
                break
            # One source per phrase: n-grams of a phrase already chosen (same segments) add nothing, and
            # would crowd out a rarer behaviour.
            hits = index.matches({gram})
            if any(same_segments(int((hits & c).sum()), int(hits.sum()), int(c.sum())) for c in chosen):
                continue
            chosen.append(hits)
            sources.append(
                Source(
                    (kind,),
                    (),
                    (f"ngram:{gram}",),
                    (f'"{gram}"',),
                    float(delta),
                    float(qv),
                    None,
                    None,
                    top_ngrams=(gram,),
                    origins=("ngram",),
                )
            )
    return sources


def own_tool_calls(
    tools: list[str | None], rows: np.ndarray, grams: list[set[str]], vocab: dict[str, int], n_rollouts: int
) -> np.ndarray:
    """(n_rollouts, n_grams) denominators: each rollout's calls to the tools an n-gram occurs on in discovery.
    A new tool then cannot make every other tool's n-grams "decrease" as a share of all calls."""
    code = {name: i for i, name in enumerate(dict.fromkeys(tools))}
    per_tool = np.zeros((n_rollouts, len(code)))
    np.add.at(per_tool, (rows, [code[t] for t in tools]), 1.0)
    support = np.zeros((len(code), len(vocab)))
    for tool, segment_grams in zip(tools, grams, strict=True):
        support[code[tool], [vocab[g] for g in segment_grams]] = 1.0
    return per_tool @ support
