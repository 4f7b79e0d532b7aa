"""`rldiff check-null`: an A/A check. One checkpoint's rollouts are split within each task into two
pseudo-checkpoints at random, the whole analysis runs on them, and whatever validates is a false finding.

Within each task the rollouts are shuffled and dealt alternately to NULL_BEFORE and NULL_AFTER, so both get
the same tasks in the same proportions and any difference is chance; a task with one rollout gives it to one
side only (and is then not shared, so the paired statistics leave it out). The input is a study store (one of
its checkpoints) or a rollout file (ingested first); the pseudo-study is a new store of its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.progress import NullProgress, Progress
from engine.store import Store
from engine.store.queries.ingest import copy_checkpoint, replace_checkpoints
from engine.store.queries.overview import analysis_outcome
from engine.study import stream

log = logging.getLogger(__name__)

NULL_BEFORE, NULL_AFTER = "null-a", "null-b"
_DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of a DuckDB database file


@dataclass(frozen=True)
class NullResult:
    store: Path
    checkpoint: str
    n_rollouts: int
    n_tasks: int
    n_shared_tasks: int  # tasks with rollouts on both sides
    validated: list[str]  # statements of validated hypotheses: each one a false finding
    n_hypotheses_tested: int
    min_hypothesis_q: float | None
    min_delta_q: float | None
    min_delta_p: float | None
    n_deltas_tested: int
    n_significant_deltas: int
    fdr: float

    @property
    def passed(self) -> bool:
        return not self.validated


def is_store(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(12)[8:12] == _DUCKDB_MAGIC


def deal(rollouts: pl.DataFrame, rng: np.random.Generator) -> pl.DataFrame:
    """(rollout_key, checkpoint): each task's rollouts shuffled and dealt alternately to the two sides."""
    keys: list[int] = []
    sides: list[str] = []
    for task in sorted(rollouts["task_id"].unique().to_list()):
        members = np.sort(rollouts.filter(pl.col("task_id") == task)["rollout_key"].to_numpy())
        order = rng.permutation(members)
        first = int(rng.integers(2))  # which side a task's odd rollout goes to, so neither side is favoured
        keys.extend(order.tolist())
        sides.extend((NULL_BEFORE, NULL_AFTER)[(i + first) % 2] for i in range(order.size))
    return pl.DataFrame(
        {"rollout_key": keys, "checkpoint": sides}, schema={"rollout_key": pl.Int64, "checkpoint": pl.String}
    )


def prepare(
    work: Path, source: Path, checkpoint: str | None, seed: int, fmt: str = "auto", score: str | None = None
) -> tuple[Store, str]:
    """A fresh store at `work` holding the source checkpoint dealt into the two pseudo-checkpoints."""
    from engine.ingest import ingest_file

    if not source.is_file():
        raise InputError(f"{source}: no such file or store")
    for stale in (work, work.with_name(work.name + ".wal")):
        stale.unlink(missing_ok=True)
    store = Store(work)
    try:
        if is_store(source):
            name = copy_checkpoint(store, source, checkpoint)
        else:
            name = checkpoint or "all"
            ingest_file(store, source, name, fmt, score=score)
        dealt = deal(store.frame("SELECT rollout_key, task_id FROM rollouts"), stream(seed, "null_check"))
        with store.transaction():
            store.set_rollout_column("checkpoint", dealt)
            replace_checkpoints(store, (NULL_BEFORE, NULL_AFTER), datetime.now(UTC))
    except BaseException:
        store.close()
        raise
    return store, name


def run_null_check(
    source: str | Path,
    work: str | Path,
    config: AnalyzeConfig,
    checkpoint: str | None = None,
    progress: Progress | None = None,
    *,
    fmt: str = "auto",
    score: str | None = None,
) -> NullResult:
    """Deal, analyse and report what validated (should be nothing) and the smallest q-values."""
    from engine.pipeline import analyze

    store, name = prepare(Path(work), Path(source), checkpoint, config.seed, fmt, score)
    with store:
        analyze(store, replace(config, before=NULL_BEFORE, after=NULL_AFTER), progress or NullProgress())
        outcome = analysis_outcome(store, config.fdr)
    return NullResult(
        store=Path(work),
        checkpoint=name,
        n_rollouts=outcome.n_rollouts,
        n_tasks=outcome.n_tasks,
        n_shared_tasks=outcome.n_shared_tasks,
        validated=outcome.validated,
        n_hypotheses_tested=outcome.n_hypotheses_tested,
        min_hypothesis_q=outcome.min_hypothesis_q,
        min_delta_q=outcome.min_delta_q,
        min_delta_p=outcome.min_delta_p,
        n_deltas_tested=outcome.n_deltas_tested,
        n_significant_deltas=outcome.n_significant_deltas,
        fdr=config.fdr,
    )
