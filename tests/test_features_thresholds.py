"""Feature thresholds: the exact 99th percentile from a bounded top-k, equal to DuckDB's quantile_cont."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from engine.features.thresholds import quantile_from_top, strong_activations
from engine.store import Store


@pytest.mark.parametrize("n", [1, 2, 3, 99, 100, 101, 102, 250, 1000, 4321])
def test_quantile_from_the_top_equals_numpy(n: int) -> None:
    values = np.random.default_rng(n).gamma(2.0, size=n)
    top = sorted(values, reverse=True)
    assert quantile_from_top(n, top) == pytest.approx(float(np.quantile(values, 0.99)), rel=1e-12)


def test_thresholds_match_quantile_cont(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    sizes = [1, 2, 57, 100, 101, 999, 5000]  # rows per feature, feature ids 10..16
    frame = pl.DataFrame(
        {
            "segment_id": np.arange(sum(sizes)),
            "feature_id": np.repeat(np.arange(10, 10 + len(sizes)), sizes),
            "activation": rng.exponential(1.0, sum(sizes)).astype(np.float32),
        }
    )
    with Store(tmp_path / "s.duckdb") as store:
        store.execute("CREATE TABLE sf (segment_id BIGINT, feature_id BIGINT, activation FLOAT)")
        store.append("sf", frame)
        exact = store.frame(
            "SELECT feature_id, quantile_cont(activation, 0.99) AS p99 FROM sf "
            "WHERE feature_id >= 11 AND feature_id < 17 GROUP BY feature_id ORDER BY feature_id"
        )
        ours = strong_activations(store, "sf", 11, 17)
        assert ours["feature_id"].to_list() == list(range(11, 17))  # only the features asked for
        assert ours["p99"].to_numpy() == pytest.approx(exact["p99"].to_numpy(), rel=1e-6)
        assert strong_activations(store, "sf", 100, 200).height == 0
