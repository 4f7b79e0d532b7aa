"""The deltas stage in the store: compute and write feature_deltas, the whole-study exploratory ranking of small
studies, and the read helpers of the CLI (ranked deltas, the testing summary)."""

from __future__ import annotations

import logging

import numpy as np
import polars as pl

from engine.config import AnalyzeConfig
from engine.deltas.compute import CONFIDENCE, compute_deltas
from engine.deltas.data import inputs_fingerprint, load_discovery
from engine.deltas.ranking import exploratory_order
from engine.errors import InputError
from engine.progress import NullProgress, Progress
from engine.runs import is_done, record_run
from engine.store import Store
from engine.store.queries.base import DELTA_FEATURES, ROW_LABEL

log = logging.getLogger(__name__)

STAGE = "deltas"
# Bumped when the statistics change, so a stored run of an older method is recomputed.
METHOD_VERSION = 4

# Rows of the whole-study exploratory ranking kept in the run metrics when tasks are too few to split by task.
EXPLORATORY_TOP = 20


def run(store: Store, config: AnalyzeConfig, rng: np.random.Generator, progress: Progress) -> int:
    """Compute and store feature_deltas and feature_task_deltas; returns rows written to feature_deltas."""
    stage_config = {
        "before": config.before,
        "after": config.after,
        "permutations": config.permutations,
        "fdr": config.fdr,
        "seed": config.seed,
        "method_version": METHOD_VERSION,
        "confidence": CONFIDENCE,
    }
    input_hash = inputs_fingerprint(store)
    if is_done(store, STAGE, stage_config, input_hash):
        log.info("deltas: unchanged, skipped")
        return 0
    with record_run(store, STAGE, stage_config, input_hash, config.seed) as record:
        data = load_discovery(store, *config.checkpoints)
        if data.rollouts.height == 0:
            raise InputError(
                f"{store.path}: no task has discovery rollouts of both {config.before!r} and {config.after!r}; "
                "rldiff compares checkpoints within tasks, so ingest rollouts of the same tasks for both "
                "(and run the split stage first)"
            )
        tables = compute_deltas(data, rng, n_permutations=config.permutations, fdr=config.fdr, progress=progress)
        store.replace({"feature_deltas": tables.deltas, "feature_task_deltas": tables.task_deltas})
        record.metrics.update(tables.metrics)
        record.metrics["split_mode"] = store.meta("split_mode")
        if record.metrics["split_mode"] == "rollout":
            record.metrics["exploratory"] = exploratory_ranking(store, config, rng)
        log.info(
            "deltas: %d tested, %d skipped, %d with q < %g",
            tables.metrics["n_tested"],
            tables.metrics["n_skipped"],
            tables.metrics["n_significant"],
            config.fdr,
        )
    return tables.deltas.height


def exploratory_ranking(
    store: Store, config: AnalyzeConfig, rng: np.random.Generator, top: int | None = EXPLORATORY_TOP
) -> list[dict[str, object]]:
    """With too few tasks to split by task, the whole study's largest credible changes (the first `top`, or
    every tested row with None), for looking at only.

    Every rollout (both splits) goes through the same statistics; the rows are ranked by their conservative
    effect within family, families interleaved (`engine.deltas.ranking`), and marked exploratory: they share data
    with everything validated later, so they are never a finding. Confirmation stays with the held-out split
    (within task, "these tasks")."""
    data = load_discovery(store, *config.checkpoints, whole_study=True)
    tables = compute_deltas(data, rng, n_permutations=config.permutations, fdr=config.fdr, progress=NullProgress())
    names = store.frame("SELECT feature_id, name FROM features")
    tested = tables.deltas.filter(pl.col("tested")).join(names, on="feature_id")
    ranked = exploratory_order(tested, tested.height if top is None else top)
    columns = ["feature_id", "name", "kind", "family", "prevalence_before", "prevalence_after", "delta"]
    ranked = ranked.select(*columns, "ci_low", "ci_high", "p_value", "q_value", "score")
    return [{**row, "status": "exploratory"} for row in ranked.iter_rows(named=True)]


def ranked_deltas(store: Store, kind: str | None = None, top: int = 20) -> pl.DataFrame:
    """The tested deltas, most significant first (q ascending, then |delta| descending), for `rldiff deltas`."""
    where, params = ("AND d.kind = ?", [kind]) if kind else ("", [])
    return store.frame(
        f"SELECT d.feature_id, f.name, {ROW_LABEL} AS label, f.source, d.kind, d.family, d.prevalence_before, "
        "d.prevalence_after, d.delta, d.ratio, d.ci_low, d.ci_high, d.p_value, d.q_value, d.pooled_before, "
        "d.pooled_after, d.rollout_rate_before, "
        "d.rollout_rate_after, d.n_before, d.n_after, d.reward_assoc_before, d.reward_assoc_after "
        f"FROM {DELTA_FEATURES} WHERE d.tested {where} "
        "ORDER BY d.q_value ASC NULLS LAST, abs(d.delta) DESC NULLS LAST, d.feature_id, d.kind LIMIT ?",
        [*params, top],
    )


def testing_summary(store: Store) -> dict[str, int]:
    """How many (feature, kind) rows were tested, skipped (by reason) and significant at the stage's FDR."""
    fdr = store.scalar(
        "SELECT json_extract(metrics, '$.fdr')::DOUBLE FROM runs WHERE stage = ? AND status = 'done' "
        "ORDER BY finished_at DESC LIMIT 1",
        [STAGE],
    )
    rows = store.frame(
        "SELECT coalesce(skip_reason, 'tested') AS what, count(*) AS n, "
        "count(*) FILTER (WHERE q_value < ?) AS significant FROM feature_deltas GROUP BY ALL",
        [fdr if fdr is not None else 0.05],
    )
    summary = {row["what"]: int(row["n"]) for row in rows.iter_rows(named=True)}
    summary["significant"] = int(rows["significant"].sum()) if rows.height else 0
    return summary
