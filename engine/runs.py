"""Run records: each stage records what it finished, so a re-run skips work whose inputs did not change."""

from __future__ import annotations

import hashlib
import json
import platform
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from engine.store import Store
from engine.store.queries import runs as records

# Results computed from a stage's output: publishing new output clears these tables and marks their runs
# 'stale' (so they re-run), in the publishing transaction, so no reader shows old statistics under the new
# output's labels after a crash between stages. Hypotheses are kept (users' own and triaged ones live there);
# their stale run is what readers report.
DOWNSTREAM: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "features": (
        ("deltas", ("feature_task_deltas", "feature_deltas")),
        ("clusters", ("cluster_members", "clusters")),
        ("hypotheses", ()),
    ),
}
_TRACKED = ("rldiff", "duckdb", "polars", "numpy", "scipy", "torch", "transformers", "sae-lens", "hdbscan")


def library_versions() -> dict[str, str]:
    """Versions of the libraries whose behaviour shapes results."""
    versions = {"python": platform.python_version()}
    for name in _TRACKED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def is_done(store: Store, stage: str, config: dict[str, Any], input_hash: str) -> bool:
    """Whether `stage` already finished with this configuration on these inputs."""
    return records.is_done(store, stage, config_hash(config), input_hash)


def invalidate_downstream(store: Store, stage: str) -> None:
    """Clear what was computed from `stage`'s previous output and mark those runs stale; call it inside the
    transaction that publishes the new output."""
    for later, tables in DOWNSTREAM.get(stage, ()):
        records.mark_stale(store, later, tables)


@dataclass
class RunRecord:
    """A stage run in progress; stages add metrics as they go."""

    run_id: str
    metrics: dict[str, Any] = field(default_factory=dict)


@contextmanager
def record_run(
    store: Store, stage: str, config: dict[str, Any], input_hash: str, seed: int | None
) -> Iterator[RunRecord]:
    """Record a stage run: 'running' at start, 'done' with metrics at the end, 'failed' on error."""
    run = RunRecord(run_id=f"{stage}-{uuid.uuid4().hex[:12]}")
    stored_config = {**config, "_hash": config_hash(config)}
    records.start_run(
        store,
        run.run_id,
        stage,
        json.dumps(stored_config, default=str),
        input_hash,
        json.dumps(library_versions()),
        seed,
        datetime.now(UTC),
    )
    status = "failed"
    try:
        yield run
        status = "done"
    finally:
        records.finish_run(store, run.run_id, status, json.dumps(run.metrics, default=str), datetime.now(UTC))
