"""Lexical sources: word n-grams of the discovery split whose prevalence changed, tested like features.

The features stage may miss a short, rare phrase (an SAE latent that also fires on most other text hides it).
Every n-gram whose design lets it reach significance (Tarone's attainable p, as in the deltas) gets the deltas'
test: each rollout's rate (for tool calls stratified over tools, `engine.stats.strata`, so an n-gram's rate
agrees with the deltas table's), within-task permutation of checkpoint labels, p-values refined where the Monte Carlo
floor binds, and Benjamini-Hochberg across all n-grams of all kinds (the lexical family). The significant ones
with the largest credible change become sources; drafting, merging and held-out validation then treat them like
feature sources.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import polars as pl
import scipy.sparse as sp

from engine.hypotheses.draft import DiscoverySplit
from engine.hypotheses.ngrams import same_segments
from engine.hypotheses.sources import DraftSource, strongest_first
from engine.kinds import SEGMENT_KINDS
from engine.stats.attainable import attainable_pvalue
from engine.stats.design import CheckpointDesign
from engine.stats.fdr import bh_qvalues
from engine.stats.intervals import CONFIDENCE, effect_interval
from engine.stats.permutation import MIN_EXCEEDANCES, PermutationBlock, dense_columns, refined_pvalues
from engine.stats.rates import Contrast, effects, rollout_rates
from engine.stats.strata import stratified_levels, stratified_rates

log = logging.getLogger(__name__)

MAX_LEXICAL = 15  # sources per kind
MAX_TESTED = 10_000  # n-grams tested per kind, the most widespread (the permutation test's cost)
KINDS = SEGMENT_KINDS


def lexical_sources(
    discovery: DiscoverySplit,
    rng: np.random.Generator,
    *,
    fdr: float,
    n_permutations: int,
    draft_fdr: float | None = None,
    limit: int = MAX_LEXICAL,
) -> list[DraftSource]:
    """N-gram sources at q < `draft_fdr` (default `fdr`), the largest credible change first within each kind
    (`sources.strongest_first`). Which n-grams are tested (Tarone) and where p-values are refined follow `fdr`,
    the level the held-out test holds them to; the stage drafts them at a looser q (`sources.DRAFT_FDR`), as
    its features are."""
    below = fdr if draft_fdr is None else draft_fdr
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
        for r, segment_grams in zip(rows, index.grams, strict=True):
            for g in sorted(segment_grams):  # columns in one order whatever the hash seed: ties then break the same way
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
        kept = has[design.keep]
        if kind == "tool_call":  # stratified over (task, tool) like the deltas' tool-call rates
            per_tool, tool_totals, support = tool_strata(
                segs["tool_name"].to_list(), rows, index.grams, vocab, keys.size
            )
            rates = stratified_rates([c[kept] for c in per_tool], tool_totals[kept], support, design)
        else:
            rates = rollout_rates(counts[kept], totals[kept], design)
        firing = np.bincount(counts[kept].tocoo().col, minlength=len(vocab))
        floor = attainable_pvalue(rates, design)
        testable = np.flatnonzero(floor <= fdr)
        if testable.size > MAX_TESTED:  # keep the most widespread: a filter blind to checkpoints keeps p valid
            testable = testable[np.argsort(-firing[testable], kind="stable")[:MAX_TESTED]]
        if testable.size == 0:
            continue
        scale = np.ones(testable.size)
        if kind == "tool_call":  # the delta over (task, tool) cells, as the deltas table reads it
            strata = [c[kept][:, testable] for c in per_tool], tool_totals[kept], support[:, testable]
            scale = stratified_levels(*strata, design).effect_scale(Contrast(design).xx)
        blocks.append(PermutationBlock.of_rates(rates[:, testable], design))
        meta.append((kind, np.array(list(vocab))[testable], scale))
    if not blocks:
        return []
    # the budget reaches the resolution BH needs in a family of thousands (10 exceedances at fdr / m), so that
    # a decision near its boundary can be settled, not left to the draws at the floor
    m = sum(block.n_features for block in blocks)
    budget = max(n_permutations * 100, math.ceil(MIN_EXCEEDANCES * m / fdr))
    results = refined_pvalues(blocks, rng, n_permutations, fdr=fdr, max_permutations=budget)
    q = bh_qvalues(np.concatenate([r.p_value for r in results]))
    offsets = np.cumsum([0] + [b.n_features for b in blocks])
    log.info("lexical sources: %d n-grams tested, %d significant", q.size, int((q < fdr).sum()))
    sources = []
    for i, ((kind, grams, scale), result) in enumerate(zip(meta, results, strict=True)):
        qk = q[offsets[i] : offsets[i + 1]]
        drafted = np.flatnonzero(qk < below)
        low, high = _interval(blocks[i].select(drafted), scale[drafted])
        frame = pl.DataFrame({
            "gram": grams[drafted], "delta": result.observed[drafted] * scale[drafted], "q_value": qk[drafted],
            "ci_low": low, "ci_high": high,
        })  # fmt: skip
        index, _ = discovery.index((kind,))
        chosen: list[np.ndarray] = []
        for gram, delta, qv in strongest_first(frame, "gram").select("gram", "delta", "q_value").iter_rows():
            if len(chosen) >= limit:
                break
            # One source per phrase: n-grams of a phrase already chosen (same segments) add nothing, and
            # would crowd out a rarer behaviour.
            hits = index.matches({gram})
            if any(same_segments(int((hits & c).sum()), int(hits.sum()), int(c.sum())) for c in chosen):
                continue
            chosen.append(hits)
            sources.append(
                DraftSource(
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


def _interval(block: PermutationBlock, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each n-gram's 95% interval of its effect (robust over rollouts; `scale` as its delta's), by which
    significant n-grams become sources (`sources.strongest_first`), as features do."""
    if block.n_features == 0:
        return np.zeros(0), np.zeros(0)
    fit = effects(block.contrast, dense_columns(block.rates, 0, block.n_features), by_task=False, scale=scale)
    return effect_interval(fit.estimate, fit.se, fit.df, CONFIDENCE)


def tool_strata(
    tools: list[str | None], rows: np.ndarray, grams: list[set[str]], vocab: dict[str, int], n_rollouts: int
) -> tuple[list[sp.csc_array], np.ndarray, np.ndarray]:
    """(per tool: (n_rollouts, n_grams) calls to it containing each n-gram; (n_rollouts, n_tools) calls to each
    tool; (n_tools, n_grams) 1 where an n-gram occurs on the tool in discovery), for `stratified_rates`.

    One segment per tool call: `rows` and `grams` are per segment. A new tool then cannot make every other
    tool's n-grams "decrease" as a share of all calls, nor move an n-gram's rate through the tool mix."""
    code = {name: i for i, name in enumerate(dict.fromkeys(t or "" for t in tools))}
    segment_tool = np.array([code[t or ""] for t in tools], dtype=np.int64)
    per_tool_calls = np.zeros((n_rollouts, len(code)))
    np.add.at(per_tool_calls, (rows, segment_tool), 1.0)
    cells = [
        (r, t, vocab[g]) for r, t, segment_grams in zip(rows, segment_tool, grams, strict=True) for g in segment_grams
    ]
    r_, t_, c_ = (
        (np.array(v, dtype=np.int64) for v in zip(*cells, strict=True)) if cells else (np.zeros(0, np.int64),) * 3
    )
    support = np.zeros((len(code), len(vocab)))
    support[t_, c_] = 1.0
    per_tool = [
        sp.csc_array((np.ones(int((t_ == t).sum())), (r_[t_ == t], c_[t_ == t])), shape=(n_rollouts, len(vocab)))
        for t in range(len(code))
    ]
    return per_tool, per_tool_calls, support
