"""The study summary: what `rldiff info` prints, `ingest` ends with, and the TUI's overview shows."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from engine.store import Store

SEGMENT_KINDS = ("reasoning", "text", "tool_call")


@dataclass(frozen=True)
class MeanCI:
    mean: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class CheckpointSummary:
    checkpoint: str
    tasks: int
    rollouts: int
    segments: dict[str, int]  # by kind
    reward: MeanCI | None  # None when no rollout has a reward


@dataclass(frozen=True)
class StudySummary:
    path: str
    checkpoints: list[CheckpointSummary]
    shared_tasks: int  # tasks with rollouts in every checkpoint


def clustered_mean_ci(values: np.ndarray, clusters: np.ndarray, confidence: float = 0.95) -> MeanCI:
    """Mean with a CI whose standard error treats rollouts of one task as correlated (cluster-robust)."""
    n = len(values)
    mean = float(values.mean())
    _, codes = np.unique(clusters, return_inverse=True)
    groups = codes.max() + 1
    if groups < 2:
        return MeanCI(mean, math.nan, math.nan, n)
    resid = np.bincount(codes, weights=values - mean)
    se = math.sqrt(float((resid**2).sum()) * groups / (groups - 1)) / n
    half = float(stats.t.ppf(0.5 + confidence / 2, groups - 1)) * se
    return MeanCI(mean, mean - half, mean + half, n)


def study_summary(store: Store) -> StudySummary:
    counts = {
        (c, k): n
        for c, k, n in store.execute(
            "SELECT r.checkpoint, s.kind, count(*) FROM segments s JOIN rollouts r USING (rollout_key) GROUP BY ALL"
        ).fetchall()
    }
    result = []
    for checkpoint in store.checkpoints():
        frame = store.frame("SELECT task_id, reward FROM rollouts WHERE checkpoint = ?", [checkpoint])
        rewarded = frame.drop_nulls("reward")
        reward = (
            clustered_mean_ci(rewarded["reward"].to_numpy(), rewarded["task_id"].to_numpy())
            if rewarded.height
            else None
        )
        result.append(
            CheckpointSummary(
                checkpoint=checkpoint,
                tasks=frame["task_id"].n_unique(),
                rollouts=frame.height,
                segments={k: counts.get((checkpoint, k), 0) for k in SEGMENT_KINDS},
                reward=reward,
            )
        )
    shared = store.scalar(
        "SELECT count(*) FROM (SELECT task_id FROM rollouts GROUP BY task_id "
        "HAVING count(DISTINCT checkpoint) = (SELECT count(*) FROM checkpoints))"
    )
    return StudySummary(path=str(store.path), checkpoints=result, shared_tasks=int(shared or 0))
