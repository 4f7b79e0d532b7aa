"""The deltas stage: how often each feature fires before and after, per segment kind, on the discovery split.

For every feature and segment kind (plus 'any', the rollout-level view): prevalence per checkpoint as the
task-weighted mean of each rollout's own rate (firing segments of the kind / its segments of the kind; for
tool calls, stratified over tools: its rate among calls to each tool, combined with label-free tool weights),
the pooled share beside it, the rollout-level rate (share of rollouts where it fires at least once), delta and
ratio, a within-task permutation p-value (for 'any' rows adjusted for the feature's own log-exposure,
Freedman-Lane), Benjamini-Hochberg q-values within each pre-declared
family (engine.kinds.FAMILIES), a confidence interval on the same estimand, and the association of firing with
reward within each checkpoint. A feature is tested only when the design lets it reach significance (Tarone);
the others are recorded as skipped. Methods and choices: docs/statistics.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.sparse as sp

from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.kinds import ANY, SEGMENT_KINDS, family_of
from engine.progress import NullProgress, Progress
from engine.runs import is_done, record_run
from engine.stats.attainable import attainable_pvalue
from engine.stats.design import CheckpointDesign, task_onehot
from engine.stats.fdr import family_qvalues
from engine.stats.intervals import effect_interval
from engine.stats.permutation import PermutationBlock, dense_columns, refined_pvalues
from engine.stats.rates import effects, rollout_rates, standardised_prevalence
from engine.stats.reward import reward_association
from engine.store import Store

log = logging.getLogger(__name__)

STAGE = "deltas"
# Bumped when the statistics change, so a stored run of an older method is recomputed.
METHOD_VERSION = 3
KINDS = SEGMENT_KINDS
CONFIDENCE = 0.95
# Refinement of p-values stuck at the Monte Carlo floor goes up to this many times config.permutations.
MAX_PERMUTATION_FACTOR = 100
# Columns of dense rollout x feature blocks held at once outside the permutation test.
FEATURE_CHUNK = 2048

# Rows of the whole-study exploratory ranking kept in the run metrics when tasks are too few to split by task.
EXPLORATORY_TOP = 20

SKIP_NO_SEGMENTS = "no segments of this kind in one checkpoint"
SKIP_UNATTAINABLE = "cannot reach significance at this size"


@dataclass(frozen=True)
class Discovery:
    """Discovery rollouts of the two checkpoints in tasks both share, and what fired in them."""

    rollouts: pl.DataFrame  # rollout_key, task_id, is_after, reward; row i is rollout index i
    features: pl.DataFrame  # feature_id, source; row j is column j (a group number when loaded by groups)
    totals: dict[str, np.ndarray]  # kind -> (n_rollouts,) segments of that kind ('any': 1 if any segment)
    counts: dict[str, sp.csc_array]  # kind -> (n_rollouts, n_features) firing segments ('any': 0/1)
    n_dropped: int  # discovery rollouts of tasks seen by one checkpoint only
    lengths: np.ndarray  # (n_rollouts,) analysed segments (all kinds)
    tool_totals: np.ndarray | None = None  # (n_rollouts, n_tools) tool calls per tool
    tool_support: sp.csr_array | None = None  # (n_tools, n_features) 1 where the feature fires on that tool
    tool_counts: tuple[sp.csc_array, ...] | None = None  # per tool: (n_rollouts, n_features) firing calls to it

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


def load_discovery(
    store: Store, before: str, after: str, groups: pl.DataFrame | None = None, *, whole_study: bool = False
) -> Discovery:
    """Read the discovery split (`whole_study`: every rollout) of `before` and `after` into per-kind sparse
    firing counts.

    Columns are features (feature_id order) or, with `groups` (feature_id, group: 0..n-1), groups of
    features: a segment counts for a group when any member fires in it (clusters use this).
    """
    rollouts = store.frame(
        "SELECT rollout_key, task_id, checkpoint = ? AS is_after, reward FROM rollouts "
        "WHERE (split = 'discovery' OR ?) AND checkpoint IN (?, ?) ORDER BY rollout_key",
        [after, whole_study, before, after],
    )
    shared = rollouts.group_by("task_id").agg(pl.col("is_after").n_unique().alias("sides"))
    shared = shared.filter(pl.col("sides") == 2)["task_id"]
    kept = rollouts.filter(pl.col("task_id").is_in(shared.implode()))
    task_code = np.unique(kept["task_id"].to_numpy(), return_inverse=True)[1].ravel()
    kept = kept.with_columns(task_code=pl.Series(task_code, dtype=pl.Int64)).with_row_index("r")
    if groups is None:
        columns = store.frame("SELECT feature_id, source FROM features ORDER BY feature_id")
        groups = columns.with_row_index("group").select("feature_id", pl.col("group").cast(pl.Int64))
    else:
        n_groups = int(groups["group"].max() or 0) + 1 if groups.height else 0
        columns = pl.DataFrame({"feature_id": np.arange(n_groups), "source": ["cluster"] * n_groups})
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
        tool_calls = store.frame(
            "SELECT d.r, coalesce(s.tool_name, '') AS tool, count(*) AS n FROM segments s "
            "JOIN delta_rollouts d USING (rollout_key) WHERE s.kind = 'tool_call' GROUP BY ALL"
        )
        tool_fired = store.frame(
            "SELECT d.r, coalesce(s.tool_name, '') AS tool, g.grp AS f, count(DISTINCT s.segment_id) AS n "
            "FROM segment_features sf JOIN features f USING (feature_id) JOIN delta_groups g USING (feature_id) "
            "JOIN segments s USING (segment_id) JOIN delta_rollouts d USING (rollout_key) "
            "WHERE sf.activation >= f.threshold AND s.kind = 'tool_call' GROUP BY ALL"
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
    tools = sorted(set(tool_calls["tool"].to_list()))
    tool_code = {name: i for i, name in enumerate(tools)}
    tool_totals = np.zeros((n, len(tools)))
    np.add.at(
        tool_totals,
        (tool_calls["r"].to_numpy(), [tool_code[t] for t in tool_calls["tool"]]),
        tool_calls["n"].to_numpy(),
    )
    pairs = tool_fired.select("tool", "f").unique()
    support = sp.csr_array(
        (np.ones(pairs.height), ([tool_code[t] for t in pairs["tool"]], pairs["f"].to_numpy())),
        shape=(len(tools), m),
    )
    per_tool = []
    for name in tools:
        hits = tool_fired.filter(pl.col("tool") == name)
        per_tool.append(
            sp.csc_array(
                (hits["n"].to_numpy().astype(np.float32), (hits["r"].to_numpy(), hits["f"].to_numpy())), shape=(n, m)
            )
        )
    return Discovery(
        kept.select("rollout_key", "task_id", "task_code", "is_after", "reward"),
        columns.select("feature_id", "source"),
        totals,
        counts,
        rollouts.height - kept.height,
        np.bincount(seg_totals["r"].to_numpy(), weights=seg_totals["n"].to_numpy(), minlength=n),
        tool_totals if tools else None,
        support if tools else None,
        tuple(per_tool) if tools else None,
    )


def _rows_of_kind(data: Discovery, kind: str) -> tuple[np.ndarray, CheckpointDesign]:
    """(rollout indices, design) of the rollouts with segments of `kind` in tasks both checkpoints share."""
    rows = np.flatnonzero(data.totals[kind] > 0)
    design = CheckpointDesign.from_labels(data.is_after[rows], data.task[rows])
    return rows[design.keep], design


def _denominators(data: Discovery, kind: str, rows: np.ndarray) -> np.ndarray:
    """Segments behind each pooled share: the kind's segments; for tool calls, per feature, the calls to the
    tools the feature fires on anywhere in discovery."""
    if kind == "tool_call" and data.tool_totals is not None:
        return np.asarray(data.tool_support.T @ data.tool_totals[rows].T, dtype=np.float64).T
    return data.totals[kind][rows]


def _tool_weights(data: Discovery, rows: np.ndarray) -> np.ndarray:
    """(n_tools, n_features) each tool's weight in a feature's stratified tool-call rate: the pooled calls to the
    tool over both checkpoints (label-free), among the tools the feature fires on, summing to 1 per feature."""
    calls = data.tool_totals[rows].sum(axis=0)
    weight = data.tool_support.toarray() * calls[:, None]
    total = weight.sum(axis=0)
    return np.divide(weight, total, out=np.zeros_like(weight), where=total > 0)


def _tool_stratified_rates(data: Discovery, rows: np.ndarray, design: CheckpointDesign) -> np.ndarray:
    """(rows, n_features) each rollout's tool-call rate stratified over tools: sum over tools t of w_t x (rate
    among its calls to t), with `_tool_weights`.

    A rollout without calls to t gets the feature's task mean rate on t (rollout_rates' label-free imputation),
    so it adds nothing to t's within-task contrast. A new tool (or any change in the tool mix) moves neither a
    feature's rate on the other tools nor their weights' meaning: the rate is composition-proof whatever the
    feature's source, while the pooled share beside it is not.
    """
    weight = _tool_weights(data, rows)
    tool_totals = data.tool_totals[rows]
    out = np.zeros((rows.size, weight.shape[1]))
    for t, counts in enumerate(data.tool_counts):
        columns = np.flatnonzero(weight[t] > 0)
        if columns.size == 0:
            continue
        totals = np.broadcast_to(tool_totals[:, t : t + 1], (rows.size, columns.size))
        rates = rollout_rates(counts[rows][:, columns], totals, design)
        out[:, columns] += weight[t, columns] * rates
    return out


def _exposure_covariates(data: Discovery, rows: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """(pattern code per feature, within-rollout log-exposure covariates per pattern) for 'any' rows.

    A feature's exposure in a rollout is the number of segments it could fire on: those of every kind it fires
    on anywhere in discovery (both checkpoints pooled, so label-free), counting for tool calls only the calls
    to the tools it fires on. A feature that fires on every call to its tools (a tool's identity, `tool:X`)
    is about the choice of tool, not about the calls (adjusting for calls to X would explain "calls X anywhere"
    away entirely), and so is a feature that never fires: their exposure is the rollout's length. Features
    with the same pattern share one residualised label. Covariates: log(1 + E) and its square.
    """
    kinds = [k for k in KINDS if k in data.counts]
    n_features = data.features.height
    fires = [np.asarray(data.counts[k][rows].sum(axis=0)).ravel() > 0 for k in kinds]
    keys = [f for k, f in zip(kinds, fires, strict=True) if k != "tool_call" or data.tool_support is None]
    identity = np.zeros(n_features, dtype=bool)
    if "tool_call" in kinds and data.tool_support is not None:
        on_tool = fires[kinds.index("tool_call")]
        calls = np.asarray(data.tool_support.T @ data.tool_totals[rows].sum(axis=0)).ravel()
        identity = on_tool & (np.asarray(data.counts["tool_call"][rows].sum(axis=0)).ravel() >= calls)
        keys += list(data.tool_support.toarray().astype(bool) & on_tool[None, :])
    key_matrix = np.column_stack(keys) if keys else np.zeros((n_features, 0), dtype=bool)
    key_matrix[identity] = False
    patterns, code = np.unique(key_matrix, axis=0, return_inverse=True)
    plain = [k for k in kinds if k != "tool_call" or data.tool_support is None]
    covariates = []
    for pattern in patterns:
        exposure = sum((data.totals[k][rows] for k, on in zip(plain, pattern, strict=False) if on), np.zeros(rows.size))
        if data.tool_support is not None and "tool_call" in kinds:
            exposure = exposure + data.tool_totals[rows] @ pattern[len(plain) :].astype(np.float64)
        if not pattern.any():
            exposure = data.lengths[rows]
        log_exposure = np.log1p(exposure)
        covariates.append(np.column_stack([log_exposure, log_exposure**2]))
    return code.ravel(), covariates


@dataclass(frozen=True)
class KindView:
    """One kind's design, rates and covariates over its rollouts (`rows` index the Discovery's rollouts).

    `pattern` gives each feature's covariate set in `covariates` (for 'any' rows, its exposure pattern;
    otherwise one set, None)."""

    kind: str
    rows: np.ndarray
    design: CheckpointDesign
    rates: sp.csc_array | np.ndarray
    counts: sp.csc_array
    totals: np.ndarray
    pattern: np.ndarray
    covariates: list[np.ndarray | None]

    @classmethod
    def of(cls, data: Discovery, kind: str) -> KindView:
        rows, design = _rows_of_kind(data, kind)
        counts = sp.csc_array(data.counts[kind][rows])
        totals = _denominators(data, kind, rows)
        pattern, covariates = np.zeros(data.features.height, dtype=np.int64), [None]
        if kind == ANY:  # fires-anywhere rises with exposure alone: adjust for log-exposure (Freedman-Lane)
            pattern, covariates = _exposure_covariates(data, rows)
        if kind == "tool_call" and data.tool_counts is not None:
            rates = _tool_stratified_rates(data, rows, design)
        else:
            rates = rollout_rates(counts, totals, design)
        return cls(kind, rows, design, rates, counts, totals, pattern, covariates)

    def blocks(self, columns: np.ndarray) -> list[tuple[np.ndarray, PermutationBlock]]:
        """(columns, block) per covariate set among `columns`, each block over those columns' rates."""
        out = []
        for code in np.unique(self.pattern[columns]):
            part = columns[self.pattern[columns] == code]
            out.append((part, PermutationBlock.of_rates(self.rates[:, part], self.design, self.covariates[code])))
        return out


def _describe_kind(data: Discovery, view: KindView, fdr: float, max_permutations: int) -> pl.DataFrame:
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
        prev_b, prev_a = standardised_prevalence(design, view.rates) if design.n_tasks else (rate_b, rate_a)
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


def _task_rows(data: Discovery, view: KindView, columns: np.ndarray, feature_ids: np.ndarray) -> pl.DataFrame:
    """Per-task mean rollout rate of the tested features of one kind, with the segments behind it."""
    codes = data.task[view.rows]
    task_ids = data.rollouts.select("task_code", "task_id").unique().sort("task_code")["task_id"].to_numpy()
    segs = data.totals[view.kind][view.rows]
    present = np.unique(codes)
    frames = []
    for start in range(0, columns.size, FEATURE_CHUNK):
        stop = min(start + FEATURE_CHUNK, columns.size)
        y = view.rates[:, columns[start:stop]]
        y = y.toarray() if sp.issparse(y) else np.asarray(y)
        block = {}
        for name, side in (("before", ~view.design.is_after), ("after", view.design.is_after)):
            onehot = task_onehot(codes[side], len(task_ids))
            sizes = onehot @ np.ones(int(side.sum()))
            with np.errstate(divide="ignore", invalid="ignore"):
                block[name] = ((onehot @ y[side]) / sizes[:, None])[present].T.ravel(), (onehot @ segs[side])[present]
        frames.append(
            pl.DataFrame(
                {
                    "feature_id": np.repeat(feature_ids[start:stop], present.size),
                    "kind": view.kind,
                    "task_id": np.tile(task_ids[present], stop - start),
                    "prevalence_before": block["before"][0],
                    "prevalence_after": block["after"][0],
                    "n_before": np.tile(block["before"][1], stop - start).astype(np.int64),
                    "n_after": np.tile(block["after"][1], stop - start).astype(np.int64),
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


def _intervals(block: PermutationBlock) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(effect, ci_low, ci_high) of a block's features: cluster-robust over tasks, or within task when tasks
    are few."""
    n = block.n_features
    estimate, low, high = (np.full(n, np.nan) for _ in range(3))
    for start, stop in ((s, min(s + FEATURE_CHUNK, n)) for s in range(0, n, FEATURE_CHUNK)):
        effect = effects(block.contrast, dense_columns(block.rates, start, stop), by_task=not block.design.few_tasks)
        estimate[start:stop] = effect.estimate
        low[start:stop], high[start:stop] = effect_interval(effect.estimate, effect.se, effect.df, CONFIDENCE)
    return estimate, low, high


def length_change(data: Discovery) -> dict[str, float]:
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
    data: Discovery,
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
        for i, (kind, _, columns, block) in enumerate(plan):
            estimate, ci_low, ci_high = _intervals(block)
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


def exploratory_ranking(store: Store, config: AnalyzeConfig, rng: np.random.Generator) -> list[dict[str, object]]:
    """With too few tasks to split by task, the whole study's strongest changes, for looking at only.

    Every rollout (both splits) goes through the same statistics; the rows are ranked by p-value, then |delta|,
    and marked exploratory: they share data with everything validated later, so they are never a finding.
    Confirmation stays with the held-out split (within task, "these tasks")."""
    data = load_discovery(store, config.before, config.after, whole_study=True)
    tables = compute_deltas(data, rng, n_permutations=config.permutations, fdr=config.fdr, progress=NullProgress())
    names = store.frame("SELECT feature_id, name FROM features")
    top = (
        tables.deltas.filter(pl.col("tested"))
        .join(names, on="feature_id")
        .with_columns(size=pl.col("delta").abs())
        .sort(["p_value", "size"], descending=[False, True], nulls_last=True)
        .head(EXPLORATORY_TOP)
        .select("feature_id", "name", "kind", "family", "prevalence_before", "prevalence_after", "delta", "p_value")
    )
    return [{**row, "status": "exploratory"} for row in top.iter_rows(named=True)]


def ranked_deltas(store: Store, kind: str | None = None, top: int = 20) -> pl.DataFrame:
    """The tested deltas, most significant first (q ascending, then |delta| descending), for `rldiff deltas`."""
    where, params = ("AND d.kind = ?", [kind]) if kind else ("", [])
    return store.frame(
        "SELECT d.feature_id, f.name, f.label, f.source, d.kind, d.family, d.prevalence_before, "
        "d.prevalence_after, d.delta, d.ratio, d.ci_low, d.ci_high, d.p_value, d.q_value, d.pooled_before, "
        "d.pooled_after, d.rollout_rate_before, "
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


def family_summary(store: Store) -> dict[str, object] | None:
    """Tests and findings per testing family and the rollouts' length change, from the last deltas run."""
    metrics = store.scalar(
        "SELECT metrics FROM runs WHERE stage = ? AND status = 'done' ORDER BY finished_at DESC LIMIT 1", [STAGE]
    )
    if metrics is None:
        return None
    data = json.loads(metrics)
    if "tested_by_family" not in data:
        return None
    return {k: data.get(k) for k in ("tested_by_family", "significant_by_family", "length_ratio")}
