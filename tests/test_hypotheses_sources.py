"""Drafting sources: significant features and clusters, taken from each testing family in turn."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from engine.hypotheses.sources import MAX_SOURCES, DraftSource, source_queue
from engine.store import Store


def _study(path: Path, features: list[tuple[int, str, str, str, float]], clusters: list[tuple[int, float, list[int]]]):
    """A store with `features` (id, source, kind, family, q) significant on discovery and `clusters`
    (id, q, member ids)."""
    store = Store(path)
    store.append(
        "features",
        pl.DataFrame(
            {
                "feature_id": [f[0] for f in features],
                "source": [f[1] for f in features],
                "name": [f"{f[1]}:{f[0]}" for f in features],
                "label": [f"label {f[0]}" for f in features],
                "threshold": [0.5] * len(features),
            }
        ),
    )
    store.append(
        "feature_deltas",
        pl.DataFrame(
            {
                "feature_id": [f[0] for f in features],
                "kind": [f[2] for f in features],
                "family": [f[3] for f in features],
                "delta": [0.1] * len(features),
                "q_value": [f[4] for f in features],
                "tested": [True] * len(features),
            }
        ),
    )
    for cluster_id, q, members in clusters:
        store.execute(
            "INSERT INTO clusters (cluster_id, label, kind, size, delta, q_value) VALUES (?, 'c', 'text', ?, 0.1, ?)",
            [cluster_id, len(members), q],
        ).fetchall()
        for m in members:
            store.execute("INSERT INTO cluster_members VALUES (?, ?, 1.0)", [cluster_id, m]).fetchall()
    return store


def test_a_few_structural_and_concept_findings_are_drafted_beside_many_sae_latents(tmp_path: Path) -> None:
    sae = [(i, "sae", "text", "sae", 1e-6 * (i + 1)) for i in range(50)]  # far smaller q than the others
    others = [(100, "structural", "tool_call", "structural", 0.01), (101, "concept", "reasoning", "concept", 0.02)]
    with _study(tmp_path / "s.duckdb", sae + others, []) as store:
        names = [s.names[0] for s in source_queue(store, 0.05).first(6)]
    # one of each family in turn, each family strongest first
    assert names == ["structural:100", "concept:101", "sae:0", "sae:1", "sae:2", "sae:3"]


def test_a_looser_drafting_level_adds_sources_without_taking_a_significant_ones_place(tmp_path: Path) -> None:
    """Sources below the drafting level but not significant fill the slots the significant ones leave: taken in
    one turn with them, the weak rows of other families crowded a significant concept out of the limit."""
    weak = [(i, "sae", "text", "sae", 0.2) for i in range(10)] + [(50, "structural", "text", "structural", 0.3)]
    strong = [(100 + i, "concept", "reasoning", "concept", 0.001 * (i + 1)) for i in range(4)]
    with _study(tmp_path / "s.duckdb", weak + strong, []) as store:
        names = [s.names[0] for s in source_queue(store, 0.5, significant=0.05).first(6)]
        one_turn = [s.names[0] for s in source_queue(store, 0.5).first(6)]
    assert names == ["concept:100", "concept:101", "concept:102", "concept:103", "structural:50", "sae:0"]
    assert "concept:103" not in one_turn  # the structural and SAE queues took their turns


def test_a_cluster_holding_a_structural_feature_waits_with_the_structural_family(tmp_path: Path) -> None:
    features = [(i, "sae", "text", "sae", 1e-6) for i in range(10)] + [(20, "structural", "text", "structural", 0.01)]
    clusters = [(0, 1e-6, [0, 1]), (1, 1e-6, [2, 3]), (2, 0.01, [4, 20])]
    with _study(tmp_path / "s.duckdb", features, clusters) as store:
        first = source_queue(store, 0.05).first(2)
    assert first[0].cluster_id == 2  # the structural queue goes first, though its q is the largest
    assert first[1].cluster_id == 0


def test_a_cluster_is_drafted_as_its_strongest_members_kind() -> None:
    """A latent that fires with a structural fact does not make the fact's cluster a phrase (planted seed 30: the
    probe finding was lost so), and a length band that fires with a behaviour's latents does not make theirs a
    length statement (seed 0: an out-of-scope finding was)."""

    def origin(*origins: str) -> str:
        names = tuple(f"{o}:{i}" for i, o in enumerate(origins))
        return DraftSource(("text",), tuple(range(len(origins))), names, names, 0.1, 0.01, 0.1, 0.2,
                           origins=origins).origin  # fmt: skip

    assert origin("structural", "sae") == "structural"
    assert origin("sae", "structural") == "sae"
    assert origin("concept", "group") == "concept"
    assert origin("ngram") == "ngram"
    assert origin("sae", "concept") == "sae"


def test_a_cluster_whose_fact_and_latent_are_equally_strong_keeps_the_latents_phrase(tmp_path: Path) -> None:
    """Planted seed 22: "mentions an amount of money" at membership 1.0 beside a re-checking latent at 1.0; drafted
    as the fact, it would label every price in the study."""
    features = [(4, "sae", "reasoning", "sae", 1e-6), (20, "structural", "reasoning", "structural", 1e-6)]
    with _study(tmp_path / "s.duckdb", features, [(0, 1e-6, [20, 4])]) as store:
        [cluster] = source_queue(store, 0.05).first(1)
    assert cluster.names == ("sae:4", "structural:20") and cluster.origin == "sae"


def test_sources_go_by_their_credible_change_not_by_monte_carlo_q(tmp_path: Path) -> None:
    """Within a family the largest credible change comes first (the distance of its interval from 0), whatever
    the q: the clearest changes share the refined Monte Carlo floor, where q-values differ only by the draws.
    A tie in the credible change goes to the larger delta."""
    features = [(i, "sae", "text", "sae", q) for i, q in enumerate([1e-6, 2e-6, 1e-3, 3e-6])]
    intervals = {0: (0.03, 0.01, 0.05), 1: (0.3, 0.1, 0.5), 2: (-0.3, -0.4, -0.2), 3: (0.5, 0.1, 0.9)}
    with _study(tmp_path / "s.duckdb", features, []) as store:
        for feature_id, (delta, low, high) in intervals.items():
            store.execute(
                "UPDATE feature_deltas SET delta = ?, ci_low = ?, ci_high = ? WHERE feature_id = ?",
                [delta, low, high, feature_id],
            ).fetchall()
        names = [s.names[0] for s in source_queue(store, 0.05).first(MAX_SOURCES)]
    assert names == ["sae:2", "sae:3", "sae:1", "sae:0"]
