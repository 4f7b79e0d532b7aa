"""Clusters of related features and their members."""

from __future__ import annotations

from dataclasses import dataclass

from engine.store.queries.base import ROW_LABEL, Connection, fetch_dicts


@dataclass(frozen=True)
class ClusterRow:
    cluster_id: int
    label: str
    kind: str
    size: int
    prevalence_before: float | None
    prevalence_after: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    q_value: float | None


@dataclass(frozen=True)
class ClusterMember:
    feature_id: int
    label: str
    source: str
    membership: float | None
    prevalence_before: float | None
    prevalence_after: float | None
    delta: float | None
    q_value: float | None


def clusters(con: Connection) -> list[ClusterRow]:
    """All clusters, the strongest combined change first."""
    return [
        ClusterRow(**r)
        for r in fetch_dicts(con, "SELECT * FROM clusters ORDER BY abs(delta) DESC NULLS LAST, cluster_id")
    ]


def cluster_members(con: Connection, cluster_id: int) -> list[ClusterMember]:
    """A cluster's features with their deltas for the cluster's segment kind."""
    return [
        ClusterMember(**r)
        for r in fetch_dicts(
            con,
            f"SELECT m.feature_id, {ROW_LABEL} AS label, f.source, m.membership, d.prevalence_before, "
            "d.prevalence_after, d.delta, d.q_value FROM cluster_members m JOIN clusters c USING (cluster_id) "
            "JOIN features f ON f.feature_id = m.feature_id "
            "LEFT JOIN feature_deltas d ON d.feature_id = m.feature_id AND d.kind = c.kind "
            "LEFT JOIN feature_kind_labels kl ON kl.feature_id = m.feature_id AND kl.kind = c.kind "
            "WHERE m.cluster_id = ? ORDER BY abs(d.delta) DESC NULLS LAST, m.feature_id",
            [cluster_id],
        )
    ]
