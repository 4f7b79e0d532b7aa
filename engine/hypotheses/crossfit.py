"""Cross-fitting for small studies: the second fold's drafting inputs.

With too few shared tasks to hold out whole tasks, the split is within task (engine.split, mode 'rollout')
and gives two folds of rollouts: A (split 'discovery') and B ('heldout'). The stage drafts on A and tests on B,
then drafts on B and tests on A; every test goes into one BH family, and a hypothesis is confirmed only by the
fold it was not drafted on (docs/statistics.md, "Small studies"). This module builds fold B's sources the way
the deltas and clusters stages build fold A's: the deltas statistics on fold B's rollouts only, features
taken from the testing families in turn (`source_queue`, unchanged, reading fold B's deltas at fold A's drafting
level, `sources.DRAFT_FDR`, the significant ones first). Fold B has no clusters, and its sources carry no top
n-grams (those were computed on fold A, which tests them).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import polars as pl
import scipy.sparse as sp

from engine.config import AnalyzeConfig
from engine.deltas import DiscoveryCounts, compute_deltas, load_discovery
from engine.hypotheses.sources import DraftSource, SourceQueue, source_queue
from engine.kinds import HELDOUT
from engine.progress import NullProgress
from engine.store import Store

FOLD_TABLES = ("feature_deltas", "clusters", "cluster_members")  # what `source_queue` reads besides features


def fold_rows(data: DiscoveryCounts, keep: np.ndarray) -> DiscoveryCounts:
    """The deltas stage's data restricted to the rollouts where `keep` is true (row order kept)."""
    rows = np.flatnonzero(keep)
    return DiscoveryCounts(
        data.rollouts[rows],
        data.features,
        {kind: totals[rows] for kind, totals in data.totals.items()},
        {kind: sp.csc_array(counts[rows, :]) for kind, counts in data.counts.items()},
        data.n_dropped,
        data.lengths[rows],
        data.tool_totals[rows] if data.tool_totals is not None else None,
        data.tool_support,
    )


def heldout_fold_deltas(store: Store, config: AnalyzeConfig, rng: np.random.Generator) -> pl.DataFrame:
    """`feature_deltas` rows computed on the held-out fold alone, with the deltas stage's statistics."""
    data = load_discovery(store, *config.checkpoints, whole_study=True)
    heldout = store.frame(
        "SELECT rollout_key FROM rollouts WHERE split = ? AND checkpoint IN (?, ?)",
        [HELDOUT, config.before, config.after],
    )["rollout_key"]
    keep = data.rollouts["rollout_key"].is_in(heldout.implode()).to_numpy()
    tables = compute_deltas(
        fold_rows(data, keep), rng, n_permutations=config.permutations, fdr=config.fdr, progress=NullProgress()
    )
    return tables.deltas


@contextmanager
def _fold_inputs(store: Store, deltas: pl.DataFrame) -> Iterator[None]:
    """Temporary tables that shadow the stored discovery results on this connection (DuckDB resolves
    unqualified names to temporary tables first): fold B's deltas, no clusters. Dropped on exit."""
    with store.shadowed(FOLD_TABLES):
        store.append("temp.feature_deltas", deltas)
        yield


def heldout_fold_sources(store: Store, deltas: pl.DataFrame, fdr: float, significant: float) -> SourceQueue:
    """Sources drafted from fold B's features (`source_queue`), without fold A's n-grams."""
    with _fold_inputs(store, deltas):
        queue = source_queue(store, fdr, significant=significant)

    def without_ngrams(sources: list[DraftSource]) -> list[DraftSource]:
        return [replace(s, top_ngrams=()) for s in sources]

    return SourceQueue(without_ngrams(queue.ranked), without_ngrams(queue.beside))
