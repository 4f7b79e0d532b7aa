"""Shared fixtures: empty stores, the real public rollouts, and the sample pairs ingested."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.ingest import ingest_file
from engine.store import Store

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DATA = REPO / "sample_data"
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the user's keymap or themes."""
    monkeypatch.setenv("RLDIFF_CONFIG_DIR", str(tmp_path / "config"))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "study.duckdb") as s:
        yield s


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"the public rollouts are not beside the checkout ({SHARED_DATA})")
    return SHARED_DATA


@pytest.fixture
def tau2_store(tmp_path: Path) -> Iterator[Store]:
    """The demo pair: grok-3 under the standard (before) and tighter (after) hand-off policy."""
    with Store(tmp_path / "tau2.duckdb") as s:
        ingest_file(s, SAMPLE_DATA / "tau2-grok3/standard.jsonl.gz", "standard")
        ingest_file(s, SAMPLE_DATA / "tau2-grok3/tighter.jsonl.gz", "tighter")
        yield s
