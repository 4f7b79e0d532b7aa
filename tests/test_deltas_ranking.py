"""The exploratory ranking: conservative effect within family, one row per feature, families interleaved."""

from __future__ import annotations

import polars as pl

from engine.deltas.ranking import exploratory_order


def _rows() -> pl.DataFrame:
    sae = {  # many small, very significant changes
        "feature_id": list(range(100)),
        "family": ["sae"] * 100,
        "delta": [0.05 + 0.001 * i for i in range(100)],
        "ci_low": [0.03 + 0.001 * i for i in range(100)],
        "ci_high": [0.07 + 0.001 * i for i in range(100)],
        "p_value": [1e-5] * 100,
    }
    other = {
        "feature_id": [100, 101, 102, 103],
        "family": ["rollout", "rollout", "structural", "structural"],
        "delta": [-0.56, 0.40, 0.30, -0.60],
        "ci_low": [-0.80, -0.05, 0.02, -1.30],  # the second covers 0; the last is large but barely credible
        "ci_high": [-0.30, 0.85, 0.58, -0.01],
        "p_value": [0.002, 0.09, 0.03, 0.045],
    }
    return pl.concat([pl.DataFrame(sae), pl.DataFrame(other)])


def test_a_large_credible_change_tops_many_small_significant_ones() -> None:
    order = exploratory_order(_rows(), 10)
    assert order["feature_id"][0] == 100  # at least 30 points, against at most 13 for any SAE row
    assert order["score"][0] == 0.30


def test_families_are_interleaved_and_an_interval_covering_zero_scores_zero() -> None:
    order = exploratory_order(_rows(), 10)
    assert order["family"].to_list()[:3] == ["rollout", "sae", "structural"]
    assert order.filter(pl.col("feature_id") == 101)["score"].item() == 0.0
    # within a family: by conservative effect, not by |delta| (103 is the largest delta but least supported)
    structural = order.filter(pl.col("family") == "structural")["feature_id"].to_list()
    assert structural == [102, 103]
    assert order.height == 10


def test_a_feature_is_listed_once_at_its_best_kind() -> None:
    """Feature 100 also has a weaker row in another family (another kind of the same behaviour): only its best
    row is listed, and the structural family's turn goes to its next feature."""
    again = pl.DataFrame(
        {"feature_id": [100], "family": ["structural"], "delta": [-0.40], "ci_low": [-0.60], "ci_high": [-0.20]}
    ).with_columns(p_value=pl.lit(0.001))
    order = exploratory_order(pl.concat([_rows(), again]), 10)
    assert order["feature_id"].to_list().count(100) == 1
    assert order.filter(pl.col("feature_id") == 100)["family"].item() == "rollout"
    assert order.filter(pl.col("family") == "structural")["feature_id"].to_list() == [102, 103]


def test_an_interval_of_nan_scores_zero_not_first() -> None:
    """A row with no interval (NaN, where the standard error is zero) is missing evidence, not the strongest:
    polars orders NaN above every number, so it is read as missing."""
    rows = _rows().with_columns(
        ci_low=pl.when(pl.col("feature_id") == 101).then(float("nan")).otherwise(pl.col("ci_low")),
        ci_high=pl.when(pl.col("feature_id") == 101).then(float("nan")).otherwise(pl.col("ci_high")),
    )
    order = exploratory_order(rows, 104)
    assert order.filter(pl.col("feature_id") == 101)["score"].item() == 0.0
    assert order.filter(pl.col("family") == "rollout")["feature_id"].to_list() == [100, 101]
