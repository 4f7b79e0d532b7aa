"""Step 5 of the features stage: structural features (`engine.features.structural`) from the rollouts'
messages and segments, a block of rollouts at a time, staged with their examples."""

from __future__ import annotations

from array import array
from collections import defaultdict

import numpy as np
import polars as pl
import pyarrow as pa

from engine.features import structural
from engine.features.run import DISCOVERY_ROLLOUTS, SEGMENTS, FeatureRun

ROLLOUT_BLOCK = 500  # rollouts whose messages are read at once


def write_structural(run: FeatureRun, base: int) -> int:
    """Stage structural features with ids from `base`, computed a block of rollouts at a time; returns the
    next free id."""
    store, staging = run.store, run.staging
    keys = [k for (k,) in store.execute(
        "SELECT rollout_key FROM rollouts WHERE checkpoint IN (?, ?) ORDER BY rollout_key", run.params
    ).fetchall()]  # fmt: skip
    names: dict[str, int] = {}
    segment_ids, name_ids = array("q"), array("q")
    for start in range(0, len(keys), ROLLOUT_BLOCK):
        lo, hi = keys[start], keys[min(start + ROLLOUT_BLOCK, len(keys)) - 1]
        messages = store.frame(
            "SELECT rollout_key, message_index, role, content, tool_calls, tool_call_id, is_error FROM messages "
            "WHERE rollout_key BETWEEN ? AND ? ORDER BY rollout_key, message_index",
            [lo, hi],
        )
        segments = store.frame(
            "SELECT s.rollout_key, segment_id, message_index, part_index, kind, text, tool_name, tool_args, "
            f"args_valid {SEGMENTS} AND s.rollout_key BETWEEN ? AND ? ORDER BY s.rollout_key, segment_id",
            [*run.checkpoints, lo, hi],
        )
        by_rollout: dict[int, list[structural.Message]] = defaultdict(list)
        for row in messages.iter_rows(named=True):
            by_rollout[row["rollout_key"]].append(structural.message_from_row(row))
        for (rollout_key,), group in segments.group_by("rollout_key", maintain_order=True):
            parts = [structural.Segment(**row) for row in group.drop("rollout_key").iter_rows(named=True)]
            for segment_id, name in structural.rollout_features(by_rollout[rollout_key], parts):
                segment_ids.append(segment_id)
                name_ids.append(names.setdefault(name, len(names)))
    ordered = sorted(names)
    feature_of = np.empty(len(names), dtype=np.int64)
    for position, name in enumerate(ordered):
        feature_of[names[name]] = base + position
    store.append(f"{staging}.features", pl.DataFrame([{
        "feature_id": base + i, "source": "structural", "name": name, "label": structural.label(name),
        "threshold": structural.THRESHOLD, "run_id": run.run_id} for i, name in enumerate(ordered)]))  # fmt: skip
    store.append(f"{staging}.segment_features", pa.table({
        "segment_id": np.frombuffer(segment_ids, dtype=np.int64),
        "feature_id": feature_of[np.frombuffer(name_ids, dtype=np.int64)],
        "activation": np.ones(len(segment_ids), dtype=np.float32),
    }))  # fmt: skip
    store.scalar(
        f"""
        INSERT INTO {staging}.feature_examples (feature_id, checkpoint, rank, segment_id, activation, tokens)
        SELECT feature_id, checkpoint, rank, segment_id, activation, NULL FROM (
            SELECT sf.feature_id, r.checkpoint, sf.segment_id, sf.activation,
                   row_number() OVER (PARTITION BY sf.feature_id, r.checkpoint ORDER BY hash(sf.segment_id)) AS rank
            FROM {staging}.segment_features sf JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key)
            WHERE sf.feature_id >= ? AND {DISCOVERY_ROLLOUTS}) WHERE rank <= ?
        """,
        [base, run.settings.top_examples],
    )
    run.metrics.update(structural_features=len(names), structural_segment_features=len(segment_ids))
    return base + len(names)
