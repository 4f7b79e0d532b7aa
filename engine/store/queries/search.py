"""Jump-to search for the command palette."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.store.queries.base import Connection


@dataclass(frozen=True)
class SearchHit:
    category: Literal["feature", "cluster", "hypothesis", "rollout"]
    id: int
    title: str
    detail: str


_SEARCHES: tuple[tuple[str, str], ...] = (  # (category, SQL selecting id, title, detail); $p pattern, $t text
    ("feature", "SELECT f.feature_id, coalesce(CASE WHEN f.label ILIKE $p OR f.name ILIKE $p THEN f.label END, "
     "k.label) AS title, f.name || ' · ' || f.source FROM features f LEFT JOIN (SELECT feature_id, min(label) AS label "
     "FROM feature_kind_labels WHERE label ILIKE $p GROUP BY feature_id) k USING (feature_id) "
     "WHERE f.label ILIKE $p OR f.name ILIKE $p OR k.label IS NOT NULL ORDER BY length(title), f.feature_id"),
    ("cluster", "SELECT cluster_id, label, format('cluster {} · {} · {} features', cluster_id, kind, size) "
     "FROM clusters WHERE label ILIKE $p OR cluster_id::VARCHAR = $t ORDER BY cluster_id"),
    ("hypothesis", "SELECT hypothesis_id, statement, format('hypothesis {} · {}', hypothesis_id, status) "
     "FROM hypotheses WHERE statement ILIKE $p OR hypothesis_id::VARCHAR = $t ORDER BY hypothesis_id"),
    ("rollout", "SELECT rollout_key, rollout_id, format('{} · task {}', checkpoint, task_id) FROM rollouts "
     "WHERE rollout_id ILIKE $p OR task_id ILIKE $p ORDER BY task_id, rollout_key"),
)  # fmt: skip


def search(con: Connection, text: str, limit: int = 8) -> list[SearchHit]:
    """Features, clusters, hypotheses and rollouts whose name contains `text` (case-insensitive); a feature also
    by the label of one of its kinds, which it is then shown by."""
    params = {"p": f"%{text}%", "t": text, "n": limit}
    return [
        SearchHit(category, int(i), title, detail)  # type: ignore[arg-type]
        for category, sql in _SEARCHES
        for i, title, detail in con.execute(
            f"{sql} LIMIT $n", {k: v for k, v in params.items() if f"${k}" in f"{sql} LIMIT $n"}
        ).fetchall()
    ]
