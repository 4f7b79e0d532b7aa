"""The clusters stage: co-firing significant features grouped, tested, labelled; tiny inputs survive."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import polars as pl
import pytest

from engine import clusters, deltas
from engine.config import AnalyzeConfig
from engine.progress import NullProgress
from engine.store import Store
from tests.factories_stats import build_study

CONFIG = AnalyzeConfig(before="before", after="after", permutations=499)


def _analyse(store) -> int:
    deltas.run(store, CONFIG, np.random.default_rng(0), NullProgress())
    return clusters.run(store, CONFIG, np.random.default_rng(1), NullProgress())


def _members(store) -> dict[int, set[int]]:
    rows = store.frame("SELECT cluster_id, feature_id FROM cluster_members")
    return {cid: set(g["feature_id"]) for (cid,), g in rows.group_by("cluster_id")}


def _build(store: Store) -> Store:
    build_study(
        store,
        np.random.default_rng(0),
        n_tasks=40,
        rollouts_per_checkpoint=4,
        rollout_sd=0.5,
        shifts={0: 0.3, 1: -0.25, 6: 0.25},
        copies={3: 0, 4: 0, 5: 1},
    )
    return store


@pytest.fixture
def study(store):
    return _build(store)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, int]]:
    """The study analysed once for the tests that only read the result (the permutation tests are the cost)."""
    with Store(tmp_path_factory.mktemp("clusters") / "study.duckdb") as store:
        yield store, _analyse(_build(store))


def test_co_firing_shifts_form_clusters_and_are_tested(analysed):
    study, written = analysed
    assert written >= 2
    groups = list(_members(study).values())
    assert {0, 3, 4} in groups and {1, 5} in groups
    rows = study.frame("SELECT * FROM clusters ORDER BY cluster_id")
    up = rows.filter(pl.col("label").str.contains("feature 0"))
    assert up.height == 1 and up["size"].item() == 3 and up["delta"].item() > 0.1 and up["q_value"].item() < 0.05
    assert up["kind"].item() in deltas.KINDS
    down = rows.filter(pl.col("label").str.contains("feature 5"))
    assert down["delta"].item() < 0 and down["q_value"].item() < 0.05
    # Feature 6 shifts on its own: significant, unclustered, still in feature_deltas.
    assert study.scalar("SELECT min(q_value) FROM feature_deltas WHERE feature_id = 6") < 0.05
    assert study.scalar("SELECT count(*) FROM cluster_members WHERE feature_id = 6") == 0
    membership = study.frame("SELECT membership FROM cluster_members")["membership"]
    assert ((membership > 0) & (membership <= 1)).all()
    metrics = json.loads(study.scalar("SELECT metrics FROM runs WHERE stage = 'clusters'"))
    assert metrics["decoder_used"] is False
    assert metrics["n_clustered"] + metrics["n_unclustered"] == metrics["n_significant"]


def test_cluster_prevalence_is_any_member_firing(analysed):
    study, _ = analysed
    cid = study.scalar("SELECT cluster_id FROM clusters WHERE label LIKE '%feature 5%'")
    kind = study.scalar("SELECT kind FROM clusters WHERE cluster_id = ?", [cid])
    direct = study.frame(
        "SELECT r.checkpoint, count(DISTINCT s.segment_id) FILTER (WHERE sf.feature_id IS NOT NULL) / "
        "count(DISTINCT s.segment_id) AS prevalence FROM segments s JOIN rollouts r USING (rollout_key) "
        "LEFT JOIN segment_features sf ON sf.segment_id = s.segment_id AND sf.activation >= 1.0 AND sf.feature_id IN "
        "(SELECT feature_id FROM cluster_members WHERE cluster_id = ?) WHERE r.split = 'discovery' AND s.kind = ? "
        "GROUP BY 1",
        [cid, kind],
    )
    by = dict(direct.iter_rows())
    row = study.frame("SELECT * FROM clusters WHERE cluster_id = ?", [cid]).row(0, named=True)
    assert row["prevalence_before"] == pytest.approx(by["before"])
    assert row["prevalence_after"] == pytest.approx(by["after"])


@pytest.mark.parametrize("shifts, copies, expected", [
    ({}, {}, 0),  # null data: nothing significant
    ({0: 0.35}, {}, 0),  # one feature
    ({0: 0.35, 1: 0.35}, {1: 0}, 1),  # two co-firing features: one cluster
    ({0: 0.35, 1: 0.35}, {}, 0),  # two unrelated features: no cluster
])  # fmt: skip
def test_tiny_inputs(store, shifts, copies, expected):
    build_study(store, np.random.default_rng(3), n_tasks=30, n_features=6, rollout_sd=0.3, shifts=shifts, copies=copies)
    assert _analyse(store) == expected
    assert store.scalar("SELECT count(*) FROM clusters") == expected
    significant = clusters.significant_features(store, CONFIG.fdr)
    assert set(significant["feature_id"]) >= set(shifts)


def test_rerun_is_skipped(analysed):
    study, first = analysed
    assert clusters.run(study, CONFIG, np.random.default_rng(1), NullProgress()) == 0
    assert study.scalar("SELECT count(*) FROM clusters") == first


def test_decoder_cosine_joins_sae_features_that_rarely_co_fire():
    coactivation = np.array([[0.0, 0.9, 0.95], [0.9, 0.0, 0.95], [0.95, 0.95, 0.0]])
    decoder = np.array([[1.0, 0.0], [0.99, 0.05], [0.0, 1.0]])
    sae_index = np.array([0.0, 1.0, np.nan])  # the third is structural
    d_dec = clusters.decoder_distance(decoder, sae_index)
    assert d_dec[0, 1] < 0.01 and np.isnan(d_dec[0, 2])
    combined = clusters.combined_distance(coactivation, d_dec)
    assert combined[0, 1] == pytest.approx(0.45, abs=0.01) and combined[0, 2] == 0.95
    labels, _ = clusters.cluster_labels(combined)
    assert labels[0] == labels[1] >= 0 and labels[2] == -1
    labels, _ = clusters.cluster_labels(coactivation)  # co-activation alone: too far apart
    assert (labels == -1).all()


def _saved_sae(tmp_path, name="sae", rows=40):
    import torch
    from safetensors.torch import save_file

    folder = tmp_path / name
    folder.mkdir()
    save_file({"W_dec": torch.eye(rows, 8)}, str(folder / "sae_weights.safetensors"))
    return folder


def test_decoder_is_found_where_the_store_says_the_sae_came_from(study, tmp_path):
    assert clusters.decoder_directions(study) is None  # no SAE recorded
    study.set_meta("sae_source", str(_saved_sae(tmp_path)))
    assert clusters.decoder_directions(study).shape == (40, 8)


def test_older_stores_find_the_decoder_from_the_features_run(study, tmp_path):
    """Stores whose features ran before the location was kept in `meta`; the key wins when both say."""
    folder = _saved_sae(tmp_path)
    study.execute(
        "INSERT INTO runs (run_id, stage, config, input_hash, versions, status, metrics, started_at, finished_at) "
        "VALUES ('features-x', 'features', '{}', '', '{}', 'done', ?, now(), now())",
        [json.dumps({"sae_source": str(folder)})],
    )
    decoder = clusters.decoder_directions(study)
    assert decoder.shape == (40, 8)
    _analyse(study)
    assert json.loads(study.scalar("SELECT metrics FROM runs WHERE stage = 'clusters'"))["decoder_used"] is True
    study.set_meta("sae_source", str(_saved_sae(tmp_path, "newer", rows=24)))
    assert clusters.decoder_directions(study).shape == (24, 8)


def test_blobs_barely_tighter_than_random_pairs_are_not_clusters():
    """Structureless distances with two planted tight pairs: plain hdbscan clusters most of the noise."""
    rng = np.random.default_rng(0)
    distance = rng.uniform(0.55, 0.75, (40, 40))
    distance[0, 1] = distance[1, 0] = 0.1
    distance[2, 3] = distance[3, 2] = 0.15
    distance = np.minimum(distance, distance.T)
    np.fill_diagonal(distance, 0.0)
    plain, _ = clusters._hdbscan(distance, "eom")
    assert (plain[4:] >= 0).mean() > 0.5
    labels, membership = clusters.cluster_labels(distance)
    assert labels[0] == labels[1] >= 0 and labels[2] == labels[3] >= 0 and labels[0] != labels[2]
    assert (labels[4:] >= 0).mean() < 0.2
    assert (membership[labels < 0] == 0).all()
