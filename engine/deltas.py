"""The deltas stage: how often each feature fires before and after, per segment kind, on the discovery split.

For every feature and segment kind (plus 'any', the rollout-level view): prevalence per checkpoint (share of
segments of that kind where the feature fires, activation >= features.threshold), the rollout-level rate
(share of rollouts where it fires at least once), delta and ratio, a within-task permutation p-value, a
Benjamini-Hochberg q-value across everything tested, a bootstrap CI, and the association of firing with reward
within each checkpoint. Features too rare or too common to test are skipped and recorded as such.
Methods and choices: docs/statistics.md.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.sparse as sp

from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.kinds import SEGMENT_KINDS
from engine.progress import Progress
from engine.runs import is_done, record_run
from engine.stats.bootstrap import bootstrap_ci
from engine.stats.design import CheckpointDesign, as_float32, task_onehot
from engine.stats.fdr import bh_qvalues
from engine.stats.permutation import PermutationBlock, dense_columns, refined_pvalues
from engine.stats.reward import reward_association
from engine.store import Store

log = logging.getLogger(__name__)

STAGE = "deltas"
KINDS = SEGMENT_KINDS
ANY = "any"
# A feature is tested only if it fires in at least MIN_SUPPORT rollouts and fails to fire (in some segment of
# the kind) in at least MIN_SUPPORT rollouts. With k firing rollouts, the most extreme within-task relabelling
# has probability about 2**-k (two-sided 2**(1 - k)): below 5 no p-value can reach 0.05, so such tests add to
# the BH count m without any chance of a finding (Tarone's argument). The same holds for the complement.
MIN_SUPPORT = 5
N_BOOTSTRAP = 1000
CONFIDENCE = 0.95
# Refinement of p-values stuck at the Monte Carlo floor goes up to this many times config.permutations.
MAX_PERMUTATION_FACTOR = 100
# Columns of dense rollout x feature blocks held at once outside the permutation test.
FEATURE_CHUNK = 2048

SKIP_NO_SEGMENTS = "no segments of this kind in one checkpoint"
SKIP_RARE = "too rare"
SKIP_COMMON = "too common"


@dataclass(frozen=True)
class Discovery:
    """Discovery rollouts of the two checkpoints in tasks both share, and what fired in them."""

    rollouts: pl.DataFrame  # rollout_key, task_id, is_after, reward; row i is rollout index i
    features: pl.DataFrame  # feature_id; row j is column j (a group number when loaded by groups)
    totals: dict[str, np.ndarray]  # kind -> (n_rollouts,) segments of that kind ('any': 1 if any segment)
    counts: dict[str, sp.csc_array]  # kind -> (n_rollouts, n_features) firing segments ('any': 0/1)
    n_dropped: int  # discovery rollouts of tasks seen by one checkpoint only

    @property
    def is_after(self) -> np.ndarray:
        return self.rollouts["is_after"].to_numpy()

    @property
    def task(self) -> np.ndarray:
        return self.rollouts["task_code"].to_numpy()


def inputs_fingerprint(store: Store, *tables: tuple[str, str]) -> str:
    """A hash over the discovery inputs (rollouts, segments, features, activations) and any extra
    (table, columns) pairs: changes whenever a stage's inputs do."""
    parts = [
        ("rollouts", "rollout_key, checkpoint, task_id, split, reward"),
        ("segments", "segment_id, rollout_key, kind"),
        ("features", "feature_id, threshold"),
        ("segment_features", "segment_id, feature_id, activation"),
        *tables,
    ]
    digest = hashlib.sha256()
    for table, columns in parts:
        row = store.execute(f"SELECT count(*), coalesce(sum(hash({columns})), 0) FROM {table}").fetchone()
        digest.update(f"{table}:{row[0]}:{row[1]};".encode())
    return digest.hexdigest()[:16]


def load_discovery(store: Store, before: str, after: str, groups: pl.DataFrame | None = None) -> Discovery:
    """Read the discovery split of `before` and `after` into per-kind sparse firing counts.

    Columns are features (feature_id order) or, with `groups` (feature_id, group: 0..n-1), groups of
    features: a segment counts for a group when any member fires in it (clusters use this).
    """
    rollouts = store.frame(
        "SELECT rollout_key, task_id, checkpoint = ? AS is_after, reward FROM rollouts "
        "WHERE split = 'discovery' AND checkpoint IN (?, ?) ORDER BY rollout_key",
        [after, before, after],
    )
    shared = rollouts.group_by("task_id").agg(pl.col("is_after").n_unique().alias("sides"))
    shared = shared.filter(pl.col("sides") == 2)["task_id"]
    kept = rollouts.filter(pl.col("task_id").is_in(shared.implode()))
    task_code = np.unique(kept["task_id"].to_numpy(), return_inverse=True)[1].ravel()
    kept = kept.with_columns(task_code=pl.Series(task_code, dtype=pl.Int64)).with_row_index("r")
    if groups is None:
        columns = store.frame("SELECT feature_id FROM features ORDER BY feature_id")
        groups = columns.with_row_index("group").select("feature_id", pl.col("group").cast(pl.Int64))
    else:
        columns = pl.DataFrame({"feature_id": np.arange(int(groups["group"].max() or 0) + 1 if groups.height else 0)})
    store.execute("CREATE OR REPLACE TEMP TABLE delta_rollouts (rollout_key BIGINT, r INTEGER)")
    store.execute("CREATE OR REPLACE TEMP TABLE delta_groups (feature_id BIGINT, grp BIGINT)")
    store.append("delta_rollouts", kept.select("rollout_key", pl.col("r").cast(pl.Int32)))
    store.append("delta_groups", groups.select("feature_id", pl.col("group").alias("grp")))
    try:
        seg_totals = store.frame(
            "SELECT d.r, s.kind, count(*) AS n FROM segments s JOIN delta_rollouts d USING (rollout_key) GROUP BY ALL"
        )
        fired = store.frame(
            "SELECT d.r, s.kind, g.grp AS f, count(DISTINCT s.segment_id) AS n FROM segment_features sf "
            "JOIN features f USING (feature_id) JOIN delta_groups g USING (feature_id) "
            "JOIN segments s USING (segment_id) JOIN delta_rollouts d USING (rollout_key) "
            "WHERE sf.activation >= f.threshold GROUP BY ALL"
        )
    finally:
        store.execute("DROP TABLE IF EXISTS delta_rollouts")
        store.execute("DROP TABLE IF EXISTS delta_groups")
    n, m = kept.height, columns.height
    totals: dict[str, np.ndarray] = {}
    counts: dict[str, sp.csc_array] = {}
    for kind in KINDS:
        part = seg_totals.filter(pl.col("kind") == kind)
        if part.height == 0:
            continue
        totals[kind] = np.bincount(part["r"].to_numpy(), weights=part["n"].to_numpy(), minlength=n)
        hits = fired.filter(pl.col("kind") == kind)
        counts[kind] = sp.csc_array(
            (hits["n"].to_numpy().astype(np.float32), (hits["r"].to_numpy(), hits["f"].to_numpy())), shape=(n, m)
        )
    any_hits = fired.select("r", "f").unique()
    totals[ANY] = (np.bincount(seg_totals["r"].to_numpy(), minlength=n) > 0).astype(np.float64)
    counts[ANY] = sp.csc_array(
        (np.ones(any_hits.height, dtype=np.float32), (any_hits["r"].to_numpy(), any_hits["f"].to_numpy())),
        shape=(n, m),
    )
    return Discovery(
        kept.select("rollout_key", "task_id", "task_code", "is_after", "reward"),
        columns.select("feature_id"),
        totals,
        counts,
        rollouts.height - kept.height,
    )


def _side_sums(matrix: sp.csc_array, weights: np.ndarray) -> np.ndarray:
    """(n_features,) weighted column sums of a sparse rollout x feature matrix."""
    return np.asarray(matrix.T @ weights, dtype=np.float64).ravel()


def _describe_kind(data: Discovery, kind: str) -> pl.DataFrame:
    """Prevalence, rollout rates, sizes and support of every feature for one kind (tested or not)."""
    counts, totals, after = data.counts[kind], data.totals[kind], data.is_after
    before = ~after
    has_segments = totals > 0
    fires = (counts > 0).astype(np.float64)
    seg_b, seg_a = totals[before].sum(), totals[after].sum()
    roll_b, roll_a = (has_segments & before).sum(), (has_segments & after).sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        prev_b = _side_sums(counts, before.astype(np.float64)) / seg_b
        prev_a = _side_sums(counts, after.astype(np.float64)) / seg_a
        rate_b = _side_sums(fires, before.astype(np.float64)) / roll_b
        rate_a = _side_sums(fires, after.astype(np.float64)) / roll_a
    coo = counts.tocoo()
    full = coo.data >= totals[coo.row]  # rollouts where every segment of the kind fires
    n_full = np.bincount(coo.col[full], minlength=counts.shape[1])
    n_firing = np.asarray(fires.sum(axis=0)).ravel().astype(np.int64)
    n_quiet = int(has_segments.sum()) - n_full
    reason = np.where(
        (seg_b == 0) | (seg_a == 0),
        SKIP_NO_SEGMENTS,
        np.where(n_firing < MIN_SUPPORT, SKIP_RARE, np.where(n_quiet < MIN_SUPPORT, SKIP_COMMON, "")),
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(prev_b > 0, prev_a / prev_b, np.nan)
    is_any = kind == ANY
    return pl.DataFrame(
        {
            "feature_id": data.features["feature_id"],
            "kind": kind,
            "prevalence_before": rate_b if is_any else prev_b,
            "prevalence_after": rate_a if is_any else prev_a,
            "delta": (rate_a - rate_b) if is_any else (prev_a - prev_b),
            "ratio": ratio,
            "rollout_rate_before": rate_b,
            "rollout_rate_after": rate_a,
            "n_before": int(roll_b if is_any else seg_b),
            "n_after": int(roll_a if is_any else seg_a),
            "tested": reason == "",
            "skip_reason": pl.Series([r or None for r in reason.tolist()], dtype=pl.String),
        },
        nan_to_null=True,
    )


def _reward_columns(data: Discovery, kind: str, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def _task_rows(data: Discovery, kind: str, columns: np.ndarray, feature_ids: np.ndarray) -> pl.DataFrame:
    """Per-task prevalence of the tested features of one kind."""
    task_ids = data.rollouts.select("task_code", "task_id").unique().sort("task_code")["task_id"]
    totals = data.totals[kind]
    frames = []
    sides = {}
    for name, side in (("before", ~data.is_after), ("after", data.is_after)):
        onehot = task_onehot(data.task[side], len(task_ids))
        segs = onehot @ totals[side]
        sides[name] = (onehot @ data.counts[kind][side][:, columns], segs)
    for start in range(0, columns.size, FEATURE_CHUNK):
        stop = min(start + FEATURE_CHUNK, columns.size)
        block = {}
        for name, (sums, segs) in sides.items():
            dense = dense_columns(sp.csc_array(sums), start, stop).astype(np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                block[name] = (dense / segs[:, None]).T.ravel(), np.tile(segs, stop - start)
        frames.append(
            pl.DataFrame(
                {
                    "feature_id": np.repeat(feature_ids[start:stop], len(task_ids)),
                    "kind": kind,
                    "task_id": np.tile(task_ids.to_numpy(), stop - start),
                    "prevalence_before": block["before"][0],
                    "prevalence_after": block["after"][0],
                    "n_before": block["before"][1].astype(np.int64),
                    "n_after": block["after"][1].astype(np.int64),
                },
                nan_to_null=True,
            )
        )
    return pl.concat(frames) if frames else pl.DataFrame()


@dataclass(frozen=True)
class DeltaTables:
    deltas: pl.DataFrame  # rows for feature_deltas
    task_deltas: pl.DataFrame  # rows for feature_task_deltas
    metrics: dict[str, object]


def compute_deltas(
    data: Discovery,
    rng: np.random.Generator,
    *,
    n_permutations: int,
    fdr: float,
    progress: Progress,
) -> DeltaTables:
    """All statistics of the deltas stage from loaded discovery data (no store access)."""
    design = CheckpointDesign.from_labels(data.is_after, data.task)
    kinds = [k for k in (*KINDS, ANY) if k in data.totals]
    described = {kind: _describe_kind(data, kind) for kind in kinds}
    tested_columns = {kind: np.flatnonzero(described[kind]["tested"].to_numpy()) for kind in kinds}
    blocks = [
        PermutationBlock(data.counts[kind][:, tested_columns[kind]], as_float32(data.totals[kind]), design)
        for kind in kinds
    ]
    n_tested = sum(c.size for c in tested_columns.values())
    with progress.track("deltas: permutation tests", len(kinds)) as advance:
        results = refined_pvalues(
            blocks, rng, n_permutations, fdr=fdr, max_permutations=MAX_PERMUTATION_FACTOR * n_permutations
        )
        advance(len(kinds), status=f"{n_tested} tests")
    q_all = bh_qvalues(np.concatenate([r.p_value for r in results])) if results else np.array([])
    offsets = np.cumsum([0] + [c.size for c in tested_columns.values()])
    frames, task_frames = [], []
    with progress.track("deltas: intervals, reward, tasks", len(kinds)) as advance:
        for i, kind in enumerate(kinds):
            columns = tested_columns[kind]
            table = described[kind]
            ci_low, ci_high = bootstrap_ci(blocks[i].counts, blocks[i].totals, design, rng, N_BOOTSTRAP, CONFIDENCE)
            assoc_b, assoc_a = _reward_columns(data, kind, columns)
            stats = pl.DataFrame(
                {
                    "feature_id": table["feature_id"].gather(columns),
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
            frames.append(table.join(stats, on="feature_id", how="left"))
            task_frames.append(_task_rows(data, kind, columns, table["feature_id"].gather(columns).to_numpy()))
            advance(1, status=kind)
    deltas = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    task_frames = [f for f in task_frames if f.height]
    task_deltas = pl.concat(task_frames, how="vertical_relaxed") if task_frames else pl.DataFrame()
    skipped = deltas.filter(~pl.col("tested")).group_by("skip_reason").len() if deltas.height else None
    metrics: dict[str, object] = {
        "n_tested": n_tested,
        "n_skipped": int(deltas.height - n_tested),
        "skipped_by_reason": {r["skip_reason"]: r["len"] for r in skipped.iter_rows(named=True)}
        if skipped is not None
        else {},
        "tested_by_kind": {kind: int(tested_columns[kind].size) for kind in kinds},
        "n_significant": int((q_all < fdr).sum()),
        "fdr": fdr,
        "n_rollouts": data.rollouts.height,
        "n_tasks": design.n_tasks,
        "n_rollouts_dropped_unshared_task": data.n_dropped,
        "bootstrap_unit": "rollout within task" if design.few_tasks else "task",
        "max_permutations_used": int(max((r.n_permutations.max(initial=0) for r in results), default=0)),
    }
    return DeltaTables(deltas, task_deltas, metrics)


def run(store: Store, config: AnalyzeConfig, rng: np.random.Generator, progress: Progress) -> int:
    """Compute and store feature_deltas and feature_task_deltas; returns rows written to feature_deltas."""
    stage_config = {
        "before": config.before,
        "after": config.after,
        "permutations": config.permutations,
        "fdr": config.fdr,
        "seed": config.seed,
        "min_support": MIN_SUPPORT,
        "n_bootstrap": N_BOOTSTRAP,
        "confidence": CONFIDENCE,
    }
    input_hash = inputs_fingerprint(store)
    if is_done(store, STAGE, stage_config, input_hash):
        log.info("deltas: unchanged, skipped")
        return 0
    with record_run(store, STAGE, stage_config, input_hash, config.seed) as record:
        data = load_discovery(store, config.before, config.after)
        if data.rollouts.height == 0:
            raise InputError(
                f"{store.path}: no task has discovery rollouts of both {config.before!r} and {config.after!r}; "
                "rldiff compares checkpoints within tasks, so ingest rollouts of the same tasks for both "
                "(and run the split stage first)"
            )
        tables = compute_deltas(data, rng, n_permutations=config.permutations, fdr=config.fdr, progress=progress)
        with store.transaction():
            store.execute("DELETE FROM feature_task_deltas")
            store.execute("DELETE FROM feature_deltas")
            store.append("feature_deltas", tables.deltas)
            store.append("feature_task_deltas", tables.task_deltas)
        record.metrics.update(tables.metrics)
        record.metrics["split_mode"] = store.scalar("SELECT value FROM meta WHERE key = 'split_mode'")
        log.info(
            "deltas: %d tested, %d skipped, %d with q < %g",
            tables.metrics["n_tested"],
            tables.metrics["n_skipped"],
            tables.metrics["n_significant"],
            config.fdr,
        )
    return tables.deltas.height


def ranked_deltas(store: Store, kind: str | None = None, top: int = 20) -> pl.DataFrame:
    """The tested deltas, most significant first (q ascending, then |delta| descending), for `rldiff deltas`."""
    where, params = ("AND d.kind = ?", [kind]) if kind else ("", [])
    return store.frame(
        "SELECT d.feature_id, f.name, f.label, f.source, d.kind, d.prevalence_before, d.prevalence_after, "
        "d.delta, d.ratio, d.ci_low, d.ci_high, d.p_value, d.q_value, d.rollout_rate_before, "
        "d.rollout_rate_after, d.n_before, d.n_after, d.reward_assoc_before, d.reward_assoc_after "
        f"FROM feature_deltas d JOIN features f USING (feature_id) WHERE d.tested {where} "
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
