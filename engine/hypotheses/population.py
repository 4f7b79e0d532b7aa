"""The segments a labeler sees: held-out (validation) or discovery (drafting), of the two compared checkpoints."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from engine.errors import InputError
from engine.hypotheses.budget import Budget
from engine.hypotheses.exemplars import Embedder, no_embedder, store_embedder
from engine.hypotheses.verifier import SegmentView, Verifier
from engine.kinds import Split
from engine.store import Store


@dataclass(frozen=True)
class Population:
    """Segments and rollouts of one split. `segments` carries checkpoint and task for sampling and testing
    only: labelers get `views(...)`, which hold neither."""

    split: str  # a Split; 'user' for hand-labelled segments (engine.hypotheses.calibration)
    before: str
    after: str
    rollouts: pl.DataFrame  # rollout_key, checkpoint, task_id, reward
    segments: pl.DataFrame  # segment_id, rollout_key, message_index, kind, text, tool_name, tool_args,
    # checkpoint, task_id, structural (names of its structural features)
    embedder: Embedder = field(default_factory=no_embedder)  # the study's, for `similar_to` verifiers

    def of_kinds(self, kinds: list[str]) -> pl.DataFrame:
        return self.segments.filter(pl.col("kind").is_in(kinds))

    @staticmethod
    def views(segments: pl.DataFrame) -> list[SegmentView]:
        columns = ["segment_id", "kind", "text", "tool_name", "tool_args"]
        if "structural" in segments.columns:
            columns.append("structural")
        return [
            SegmentView(
                r["segment_id"],
                r["kind"],
                r["text"],
                r["tool_name"],
                r["tool_args"],
                frozenset(r.get("structural") or ()),
            )
            for r in segments.select(columns).iter_rows(named=True)
        ]

    def verifier_labels(self, verifier: Verifier, kinds: list[str], budget: Budget | None = None) -> pl.DataFrame:
        """segment_id, label, evidence, weight for every segment of `kinds` (a verifier labels all of them);
        `budget` is checked between segments (it raises when spent or cancelled)."""
        segments = self.of_kinds(kinds)
        verdicts = verifier.label_all(self.views(segments), budget.check if budget is not None else None)
        return pl.DataFrame(
            {
                "segment_id": segments["segment_id"],
                "label": [v.label for v in verdicts],
                "evidence": [v.evidence for v in verdicts],
                "weight": np.ones(segments.height),
            },
            schema={"segment_id": pl.Int64, "label": pl.Boolean, "evidence": pl.Utf8, "weight": pl.Float64},
        )

    def rollout_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(rollout_key, is_after, task code, reward) over this split's rollouts, in a fixed order."""
        r = self.rollouts.sort("rollout_key")
        task = np.unique(r["task_id"].to_numpy(), return_inverse=True)[1]
        reward = r["reward"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        return r["rollout_key"].to_numpy(), (r["checkpoint"] == self.after).to_numpy(), task, reward

    def task_ids(self) -> np.ndarray:
        """The task id of each task code `rollout_arrays` gives (code i is the i-th)."""
        return np.unique(self.rollouts["task_id"].to_numpy())


def split_size(store: Store, before: str, after: str, split: Split) -> int:
    """How many rollouts of the two checkpoints `split` (held-out or discovery) holds."""
    return int(
        store.scalar("SELECT count(*) FROM rollouts WHERE split = ? AND checkpoint IN (?, ?)", [split, before, after])
    )


def load_population(store: Store, before: str, after: str, split: Split) -> Population:
    """Rollouts and segments of `split` (held-out or discovery) for the two checkpoints."""
    rollouts = store.frame(
        "SELECT rollout_key, checkpoint, task_id, reward FROM rollouts "
        "WHERE split = ? AND checkpoint IN (?, ?) ORDER BY rollout_key",
        [split, before, after],
    )
    if rollouts.height == 0:
        raise InputError(
            f"{store.path}: no {split} rollouts for {before!r} and {after!r}: run `rldiff analyze` first, or, where "
            "it ran, the split held none out (a task's only rollout of a checkpoint stays in discovery)"
        )
    segments = store.frame(
        "SELECT s.segment_id, s.rollout_key, s.message_index, s.kind, s.text, s.tool_name, s.tool_args, "
        "r.checkpoint, r.task_id, "
        "coalesce(st.names, []::VARCHAR[]) AS structural "
        "FROM segments s JOIN rollouts r USING (rollout_key) LEFT JOIN ("
        "  SELECT sf.segment_id, list(f.name) AS names FROM segment_features sf JOIN features f USING (feature_id) "
        "  WHERE f.source = 'structural' GROUP BY sf.segment_id) st USING (segment_id) "
        "WHERE r.split = ? AND r.checkpoint IN (?, ?) ORDER BY s.segment_id",
        [split, before, after],
    )
    return Population(split, before, after, rollouts, segments, store_embedder(store))
