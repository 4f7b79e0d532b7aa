"""Discovery data of the deltas stage: the rollouts of two checkpoints in shared tasks and what fired in them,
as per-kind sparse firing counts (and per-tool counts for tool calls), read from the store."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.sparse as sp

from engine.kinds import ANY, DISCOVERY, SEGMENT_KINDS
from engine.store import Store

KINDS = SEGMENT_KINDS


@dataclass(frozen=True)
class DiscoveryCounts:
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

    def per_tool(self) -> tuple[np.ndarray, sp.csr_array, tuple[sp.csc_array, ...]] | None:
        """(tool_totals, tool_support, tool_counts) when tool calls were loaded per tool, else None."""
        if self.tool_totals is None or self.tool_support is None or self.tool_counts is None:
            return None
        return self.tool_totals, self.tool_support, self.tool_counts


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
        count, total = row if row is not None else (0, 0)
        digest.update(f"{table}:{count}:{total};".encode())
    return digest.hexdigest()[:16]


def load_discovery(
    store: Store, before: str, after: str, groups: pl.DataFrame | None = None, *, whole_study: bool = False
) -> DiscoveryCounts:
    """Read the discovery split (`whole_study`: every rollout) of `before` and `after` into per-kind sparse
    firing counts.

    Columns are features (feature_id order) or, with `groups` (feature_id, group: 0..n-1), groups of
    features: a segment counts for a group when any member fires in it (clusters use this).
    """
    rollouts = store.frame(
        "SELECT rollout_key, task_id, checkpoint = ? AS is_after, reward FROM rollouts "
        "WHERE (split = ? OR ?) AND checkpoint IN (?, ?) ORDER BY rollout_key",
        [after, DISCOVERY, whole_study, before, after],
    )
    shared = rollouts.group_by("task_id").agg(pl.col("is_after").n_unique().alias("sides"))
    shared_ids = shared.filter(pl.col("sides") == 2)["task_id"]
    kept = rollouts.filter(pl.col("task_id").is_in(shared_ids.implode()))
    task_code = np.unique(kept["task_id"].to_numpy(), return_inverse=True)[1].ravel()
    kept = kept.with_columns(task_code=pl.Series(task_code, dtype=pl.Int64)).with_row_index("r")
    if groups is None:
        columns = store.frame("SELECT feature_id, source FROM features ORDER BY feature_id")
        groups = columns.with_row_index("group").select("feature_id", pl.col("group").cast(pl.Int64))
    else:
        n_groups = int(groups["group"].to_numpy().max()) + 1 if groups.height else 0
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
        (tool_calls["r"].to_numpy(), np.array([tool_code[t] for t in tool_calls["tool"]], dtype=np.int64)),
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
    return DiscoveryCounts(
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
