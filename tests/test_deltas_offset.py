"""Rollout-level rows: each rollout's expected chance of firing anywhere, 1 - (1 - r_task)^E, label-free."""

from __future__ import annotations

import numpy as np
import polars as pl
import scipy.sparse as sp

from engine.deltas import ANY, DiscoveryCounts
from engine.deltas.views import KindView, expected_firing
from engine.stats.design import CheckpointDesign


def _discovery(is_after: list[bool]) -> DiscoveryCounts:
    text = np.array([2.0, 4.0, 6.0, 8.0, 1.0, 3.0])  # text segments per rollout, two tasks of three
    fired = np.array([[1.0], [0.0], [3.0], [2.0], [0.0], [1.0]])  # one text feature's firing segments
    rollouts = pl.DataFrame(
        {
            "rollout_key": range(6),
            "task_id": ["a", "a", "a", "b", "b", "b"],
            "task_code": [0, 0, 0, 1, 1, 1],
            "is_after": is_after,
            "reward": [0.0] * 6,
        }
    )
    counts = {"text": sp.csc_array(fired), ANY: sp.csc_array((fired > 0).astype(np.float64))}
    return DiscoveryCounts(
        rollouts, pl.DataFrame({"feature_id": [0], "source": ["sae"]}), {"text": text, ANY: np.ones(6)}, counts, 0, text
    )


def test_expected_firing_from_the_tasks_pooled_per_segment_rate() -> None:
    data = _discovery([False, True, True, False, True, False])
    design = CheckpointDesign.from_labels(data.is_after, data.task)
    offset = expected_firing(data, np.arange(6), design)[:, 0]
    rate = np.array([4 / 12] * 3 + [3 / 12] * 3)  # firing segments over text segments, both checkpoints
    np.testing.assert_allclose(offset, 1 - (1 - rate) ** np.array([2, 4, 6, 8, 1, 3]))
    # label-free: another labelling of the same rollouts gives the same offsets
    other = _discovery([True, False, True, True, False, False])
    again = expected_firing(other, np.arange(6), CheckpointDesign.from_labels(other.is_after, other.task))
    np.testing.assert_allclose(again[:, 0], offset)


def test_rollout_rows_are_tested_on_observed_minus_expected_firing() -> None:
    data = _discovery([False, True, True, False, True, False])
    view = KindView.of(data, ANY)
    ((columns, block),) = view.blocks(np.array([0]))
    assert view.offsets is not None
    np.testing.assert_allclose(block.rates[:, 0], view.rates.toarray()[:, 0] - view.offsets[:, 0])
