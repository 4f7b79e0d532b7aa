"""Simulated nested rollout data for the statistics tests: tasks, rollouts per checkpoint, segments."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.kinds import DISCOVERY, HELDOUT


@dataclass(frozen=True)
class Simulated:
    counts: np.ndarray  # (rollouts, features) firing segments
    totals: np.ndarray  # (rollouts,) segments
    is_after: np.ndarray
    task: np.ndarray
    true_delta: np.ndarray  # (features,) expected pooled delta given the design


def simulate(
    rng: np.random.Generator,
    *,
    n_tasks: int = 40,
    rollouts_per_checkpoint: int = 3,
    n_features: int = 300,
    segments_mean: float = 12.0,
    task_sd: float = 1.0,
    rollout_sd: float = 1.0,
    shift: float = 0.0,
    shifted_features: int = 0,
    shifted_tasks: int = 0,
    after_length: float = 1.0,
) -> Simulated:
    """Segments fire with probability 0.6 * sigmoid(feature base + task effect + rollout effect).

    Task effects make tasks differ; rollout effects make a rollout's segments fire together (clustering).
    The first `shifted_features` features get `shift` added to their firing probability in the after
    checkpoint of the first `shifted_tasks` tasks; `true_delta` is the resulting expected delta (on rollout
    rates and pooled shares alike). After-rollouts have `after_length` times as many segments on average.
    """
    k = rollouts_per_checkpoint
    task = np.repeat(np.arange(n_tasks), 2 * k)
    is_after = np.tile(np.r_[np.zeros(k, bool), np.ones(k, bool)], n_tasks)
    n = task.size
    base = rng.normal(-1.0, 0.7, n_features)
    logit = base + rng.normal(0, task_sd, (n_tasks, n_features))[task] + rng.normal(0, rollout_sd, (n, n_features))
    prob = 0.6 / (1 + np.exp(-logit))
    planted = (task < shifted_tasks)[:, None] & is_after[:, None] & (np.arange(n_features) < shifted_features)
    prob = prob + shift * planted
    totals = rng.poisson((segments_mean - 1) * np.where(is_after, after_length, 1.0)) + 1
    counts = rng.binomial(totals[:, None], prob)
    true_delta = np.zeros(n_features)
    true_delta[:shifted_features] = shift * shifted_tasks / n_tasks
    return Simulated(counts, totals, is_after, task, true_delta)


def build_study(
    store,
    rng: np.random.Generator,
    *,
    n_tasks: int = 30,
    rollouts_per_checkpoint: int = 3,
    n_features: int = 40,
    segments_per_kind: dict[str, int] | None = None,
    shifts: dict[int, float] | None = None,
    rollout_sd: float = 1.0,
    environments: int | None = None,
    split: str | None = DISCOVERY,
    reward_feature: int | None = None,
    copies: dict[int, int] | None = None,
) -> None:
    """Fill an empty store with checkpoints 'before'/'after', rollouts, segments, features and activations.

    Feature j fires in a segment with probability 0.5 * sigmoid(base_j + task effect + rollout effect), plus
    shifts[j] in every 'after' segment (a negative shift adds |shift| to every 'before' segment instead, so the
    true delta is exactly shifts[j]); firing activations lie in [1, 3], and a third of non-firing segments
    get a sub-threshold activation in (0, 0.9) (threshold 1.0), so thresholding is exercised. Rewards are
    0/1; with `reward_feature`, rollouts where that feature fires succeed more often within every task.
    `copies` {j: i} makes feature j also fire in every segment where feature i fires (co-activation).
    `split` fills rollouts.split: 'discovery' for all, 'alternate' for even tasks in discovery and odd ones
    held out, None to leave it to the split stage.
    """
    import datetime as dt

    import polars as pl

    segments_per_kind = segments_per_kind or {"text": 3, "tool_call": 2}
    shifts = shifts or {}
    now = dt.datetime(2025, 1, 1)
    store.append(
        "checkpoints", pl.DataFrame({"checkpoint": ["before", "after"], "ordinal": [0, 1], "created_at": [now, now]})
    )
    k = rollouts_per_checkpoint
    n = n_tasks * 2 * k
    task = np.repeat(np.arange(n_tasks), 2 * k)
    is_after = np.tile(np.r_[np.zeros(k, bool), np.ones(k, bool)], n_tasks)
    base = rng.normal(-1.0, 0.7, n_features)
    task_effect = rng.normal(0, 1.0, (n_tasks, n_features))
    rollout_effect = rng.normal(0, rollout_sd, (n, n_features))
    seg_rows, sf_rows = [], []
    fires_any = np.zeros((n, n_features), dtype=bool)
    segment_id = 0
    for r in range(n):
        for kind, count in segments_per_kind.items():
            for i in range(count):
                seg_rows.append((segment_id, r, i, 0, kind, f"{kind} {r}-{i}", "content", f"h{segment_id}"))
                prob = 0.5 / (1 + np.exp(-(base + task_effect[task[r]] + rollout_effect[r])))
                shift = np.array([shifts.get(j, 0.0) for j in range(n_features)])
                prob = prob + np.where(shift > 0, is_after[r], 1 - is_after[r]) * np.abs(shift)
                fire = rng.uniform(size=n_features) < prob
                for j, i in (copies or {}).items():
                    fire[j] |= fire[i]
                fires_any[r] |= fire
                for j in np.flatnonzero(fire):
                    sf_rows.append((segment_id, j, float(rng.uniform(1, 3))))
                for j in np.flatnonzero(~fire & (rng.uniform(size=n_features) < 1 / 3)):
                    sf_rows.append((segment_id, j, float(rng.uniform(0.01, 0.9))))
                segment_id += 1
    p_success = np.full(n, 0.5)
    if reward_feature is not None:
        p_success = np.where(fires_any[:, reward_feature], 0.8, 0.2)
    reward = (rng.uniform(size=n) < p_success).astype(float)
    env = [None] * n if environments is None else [f"env{t % environments}" for t in task]
    store.append(
        "rollouts",
        pl.DataFrame(
            {
                "rollout_key": np.arange(n),
                "checkpoint": np.where(is_after, "after", "before"),
                "rollout_id": [f"t{t}-r{r}" for r, t in enumerate(task)],
                "task_id": [f"t{t}" for t in task],
                "environment_id": pl.Series(env, dtype=pl.String),
                "trial": np.arange(n) % (2 * k),
                "reward": reward,
                "split": pl.Series(
                    np.where(task % 2 == 0, DISCOVERY, HELDOUT) if split == "alternate" else [split] * n,
                    dtype=pl.String,
                ),
                "source_hash": "src",
                "source_line": np.arange(n) + 1,
                "n_messages": 4,
            }
        ),
    )
    store.append(
        "segments",
        pl.DataFrame(
            seg_rows,
            orient="row",
            schema=[
                "segment_id",
                "rollout_key",
                "message_index",
                "part_index",
                "kind",
                "text",
                "origin",
                "content_hash",
            ],
        ),
    )
    store.append(
        "features",
        pl.DataFrame(
            {
                "feature_id": np.arange(n_features),
                "source": ["sae"] * (n_features - 2) + ["structural"] * 2,
                "name": [f"f:{j}" for j in range(n_features)],
                "label": [f"feature {j}" for j in range(n_features)],
                "sae_index": list(range(n_features - 2)) + [None, None],
                "threshold": 1.0,
            }
        ),
    )
    store.append(
        "segment_features", pl.DataFrame(sf_rows, orient="row", schema=["segment_id", "feature_id", "activation"])
    )
