"""All statistics of the deltas stage from loaded discovery data, without store access: prevalences, pooled
shares, attainable p, permutation tests, family q-values, intervals, reward association and per-task rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from engine.deltas.data import KINDS, DiscoveryCounts
from engine.deltas.views import KindView
from engine.kinds import ANY, family_of
from engine.progress import Progress
from engine.stats.attainable import attainable_pvalue
from engine.stats.design import CheckpointDesign
from engine.stats.fdr import family_qvalues
from engine.stats.intervals import CONFIDENCE, effect_interval
from engine.stats.permutation import refined_pvalues
from engine.stats.rates import standardised_prevalence
from engine.stats.reward import reward_association

# Refinement of p-values stuck at the Monte Carlo floor goes up to this many times config.permutations.
MAX_PERMUTATION_FACTOR = 100
# Columns of dense rollout x feature blocks held at once outside the permutation test.
FEATURE_CHUNK = 2048

# The statistics of a tested row: null on an untested one, and present when no row could be tested (a study of one
# task), so that every reader of the table finds them.
STATISTICS = ("ci_low", "ci_high", "p_value", "q_value", "reward_assoc_before", "reward_assoc_after")
SKIP_NO_SEGMENTS = "no segments of this kind in one checkpoint"
SKIP_UNATTAINABLE = "cannot reach significance at this size"


def _describe_kind(data: DiscoveryCounts, view: KindView, fdr: float, max_permutations: int) -> pl.DataFrame:
    """Prevalence (task-weighted mean rollout rate), pooled share, rollout rates, attainable p and family of
    every feature for one kind (tested or not)."""
    design, kind = view.design, view.kind
    after = design.is_after
    n_features = view.counts.shape[1]
    fires = (view.counts > 0).astype(np.float64)
    before_rows, after_rows = (~after).astype(np.float64), after.astype(np.float64)
    roll_b, roll_a = int((~after).sum()), int(after.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        rate_b = np.asarray(fires.T @ before_rows).ravel() / roll_b
        rate_a = np.asarray(fires.T @ after_rows).ravel() / roll_a
        prev_b, prev_a = view.levels.standardised() if design.n_tasks else (rate_b, rate_a)
        pooled_b, pooled_a = (
            np.asarray(view.counts.T @ side).ravel() / (side @ view.totals) for side in (before_rows, after_rows)
        )
        ratio = np.where(prev_b > 0, prev_a / prev_b, np.nan)
    floor = attainable_pvalue(view.rates, design) if design.n_tasks else np.ones(n_features)
    floor = np.maximum(floor, 1 / (max_permutations + 1))
    reason = np.where((roll_b == 0) | (roll_a == 0), SKIP_NO_SEGMENTS, np.where(floor > fdr, SKIP_UNATTAINABLE, ""))
    segs = view.totals if view.totals.ndim == 1 else data.totals[kind][view.rows]
    return pl.DataFrame(
        {
            "feature_id": data.features["feature_id"],
            "kind": kind,
            "family": [family_of(source, kind) for source in data.features["source"].to_list()],
            "prevalence_before": prev_b,
            "prevalence_after": prev_a,
            "delta": prev_a - prev_b,
            "ratio": ratio,
            "pooled_before": pooled_b,
            "pooled_after": pooled_a,
            "rollout_rate_before": rate_b,
            "rollout_rate_after": rate_a,
            "n_before": int(roll_b if kind == ANY else segs[~after].sum()),
            "n_after": int(roll_a if kind == ANY else segs[after].sum()),
            "min_p": floor,
            "tested": reason == "",
            "skip_reason": pl.Series([r or None for r in reason.tolist()], dtype=pl.String),
        },
        nan_to_null=True,
    )


def _reward_columns(data: DiscoveryCounts, kind: str, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Within-task reward association of rollout-level firing, in each checkpoint, for `columns`."""
    reward = data.rollouts["reward"].to_numpy().astype(np.float64)
    has_segments = data.totals[kind] > 0
    out = []
    for side in (~data.is_after, data.is_after):
        rows = side & has_segments
        assoc = np.full(columns.size, np.nan)
        matrix = data.counts[kind][rows]
        for start in range(0, columns.size, FEATURE_CHUNK):
            block = matrix[:, columns[start : start + FEATURE_CHUNK]].toarray() > 0
            assoc[start : start + FEATURE_CHUNK] = reward_association(block, reward[rows], data.task[rows])
        out.append(assoc)
    return out[0], out[1]


def _task_rows(data: DiscoveryCounts, view: KindView, columns: np.ndarray, feature_ids: np.ndarray) -> pl.DataFrame:
    """Per-task levels of the tested features of one kind (`KindView.levels`), with the segments behind them."""
    task_ids = data.rollouts.select("task_code", "task_id").unique().sort("task_code")["task_id"].to_numpy()
    present = np.unique(data.task[view.rows])  # the design's tasks, in its order
    segs = data.totals[view.kind][view.rows]
    task, after = view.design.task, view.design.is_after
    n_before, n_after = (
        np.bincount(task[side], weights=segs[side], minlength=present.size) for side in (~after, after)
    )
    return pl.DataFrame(
        {
            "feature_id": np.repeat(feature_ids, present.size),
            "kind": view.kind,
            "task_id": np.tile(task_ids[present], columns.size),
            "prevalence_before": view.levels.before[:, columns].T.ravel(),
            "prevalence_after": view.levels.after[:, columns].T.ravel(),
            "n_before": np.tile(n_before, columns.size).astype(np.int64),
            "n_after": np.tile(n_after, columns.size).astype(np.int64),
        },
        nan_to_null=True,
    )


@dataclass(frozen=True)
class DeltaTables:
    deltas: pl.DataFrame  # rows for feature_deltas
    task_deltas: pl.DataFrame  # rows for feature_task_deltas
    metrics: dict[str, object]


def _intervals(view: KindView, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(effect, ci_low, ci_high) of `columns`: cluster-robust over tasks, or within task when tasks are few;
    the interval kept inside [-1, 1], where a difference of rates lies."""
    n = columns.size
    estimate, low, high = (np.full(n, np.nan) for _ in range(3))
    for start, stop in ((s, min(s + FEATURE_CHUNK, n)) for s in range(0, n, FEATURE_CHUNK)):
        effect = view.effects(columns[start:stop])
        estimate[start:stop] = effect.estimate
        low[start:stop], high[start:stop] = effect_interval(effect.estimate, effect.se, effect.df, CONFIDENCE)
    return estimate, np.maximum(low, -1.0), np.minimum(high, 1.0)


def length_change(data: DiscoveryCounts) -> dict[str, float]:
    """Mean analysed segments per rollout in each checkpoint, and their ratio within task (task-weighted)."""
    design = CheckpointDesign.from_labels(data.is_after, data.task)
    lengths = data.lengths[design.keep][:, None]
    before, after = standardised_prevalence(design, lengths) if design.n_tasks else (np.nan, np.nan)
    return {
        "segments_per_rollout_before": float(np.ravel(before)[0]),
        "segments_per_rollout_after": float(np.ravel(after)[0]),
        "length_ratio": float(np.ravel(after)[0] / np.ravel(before)[0]) if design.n_tasks else float("nan"),
    }


def compute_deltas(
    data: DiscoveryCounts,
    rng: np.random.Generator,
    *,
    n_permutations: int,
    fdr: float,
    progress: Progress,
) -> DeltaTables:
    """All statistics of the deltas stage from loaded discovery data (no store access)."""
    max_permutations = MAX_PERMUTATION_FACTOR * n_permutations
    kinds = [k for k in (*KINDS, ANY) if k in data.totals]
    views = {kind: KindView.of(data, kind) for kind in kinds}
    described = {kind: _describe_kind(data, views[kind], fdr, max_permutations) for kind in kinds}
    # One permutation block per kind and covariate set (one set of permutations each); BH runs within each family.
    plan = []
    for kind in kinds:
        table = described[kind]
        tested = np.flatnonzero(table["tested"].to_numpy())
        for columns, block in views[kind].blocks(tested):
            plan.append((kind, table["family"].to_numpy()[columns], columns, block))
    blocks = [block for *_, block in plan]
    n_tested = sum(columns.size for _, _, columns, _ in plan)
    with progress.track("deltas: permutation tests", len(kinds)) as advance:
        results = refined_pvalues(
            blocks, rng, n_permutations, fdr=fdr, max_permutations=max_permutations, families=[f for _, f, _, _ in plan]
        )
        advance(len(kinds), status=f"{n_tested} tests")
    p_all = np.concatenate([r.p_value for r in results]) if results else np.array([])
    family_all = np.concatenate([f for _, f, _, _ in plan]) if plan else np.array([], dtype=object)
    q_all = family_qvalues(p_all, family_all)
    offsets = np.cumsum([0] + [c.size for _, _, c, _ in plan])
    stats_by_kind: dict[str, list[pl.DataFrame]] = {kind: [] for kind in kinds}
    task_frames = []
    with progress.track("deltas: intervals, reward, tasks", len(plan)) as advance:
        for i, (kind, _, columns, _) in enumerate(plan):
            estimate, ci_low, ci_high = _intervals(views[kind], columns)
            assoc_b, assoc_a = _reward_columns(data, kind, columns)
            ids = described[kind]["feature_id"].gather(columns)
            stats_by_kind[kind].append(
                pl.DataFrame(
                    {
                        "feature_id": ids,
                        "effect": estimate,
                        "ci_low": ci_low,
                        "ci_high": ci_high,
                        "p_value": results[i].p_value,
                        "q_value": q_all[offsets[i] : offsets[i + 1]],
                        "reward_assoc_before": assoc_b,
                        "reward_assoc_after": assoc_a,
                    },
                    schema_overrides={"feature_id": pl.Int64},
                    nan_to_null=True,
                )
            )
            task_frames.append(_task_rows(data, views[kind], columns, ids.to_numpy()))
            advance(1, status=kind)
    frames = []
    for kind in kinds:
        table = described[kind]
        if stats_by_kind[kind]:
            stats = pl.concat(stats_by_kind[kind])
            table = table.join(stats, on="feature_id", how="left")
            # The reported delta is the tested effect (length-adjusted for 'any' rows) where there is one.
            table = table.with_columns(pl.coalesce("effect", "delta").alias("delta")).drop("effect")
        frames.append(table)
    deltas = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    deltas = deltas.with_columns(pl.lit(None, pl.Float64).alias(c) for c in STATISTICS if c not in deltas.columns)
    task_frames = [f for f in task_frames if f.height]
    task_deltas = pl.concat(task_frames, how="vertical_relaxed") if task_frames else pl.DataFrame()
    skipped = deltas.filter(~pl.col("tested")).group_by("skip_reason").len() if deltas.height else None
    tested_by_family = {f: 0 for f in dict.fromkeys(family_all.tolist())}
    significant_by_family = dict(tested_by_family)
    for name, q in zip(family_all.tolist(), q_all.tolist(), strict=True):
        tested_by_family[name] += 1
        significant_by_family[name] += int(q < fdr)
    design = CheckpointDesign.from_labels(data.is_after, data.task)
    metrics: dict[str, object] = {
        "n_tested": n_tested,
        "n_skipped": int(deltas.height - n_tested),
        "skipped_by_reason": {r["skip_reason"]: r["len"] for r in skipped.iter_rows(named=True)}
        if skipped is not None
        else {},
        "tested_by_kind": {kind: sum(int(c.size) for k, _, c, _ in plan if k == kind) for kind in kinds},
        "tested_by_family": tested_by_family,
        "significant_by_family": significant_by_family,
        "n_significant": int((q_all < fdr).sum()),
        "fdr": fdr,
        "n_rollouts": data.rollouts.height,
        "n_tasks": design.n_tasks,
        "few_tasks": design.few_tasks,
        "n_rollouts_dropped_unshared_task": data.n_dropped,
        "interval": "heteroscedasticity-robust t within task (these tasks)"
        if design.few_tasks
        else "cluster-robust t over tasks, G-1 df",
        "max_permutations_used": int(max((r.n_permutations.max(initial=0) for r in results), default=0)),
        **length_change(data),
    }
    return DeltaTables(deltas, task_deltas, metrics)
