"""Shared fixtures: empty stores, the real public rollouts, the sample pairs ingested, and one pair analysed."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.ingest import ingest_file
from engine.store import Store
from tests.sample_study import cached_sample_study

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


@pytest.fixture(scope="session")
def sample_study(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo pair analysed by the real stages (tests/sample_study.py): one copy for the whole session, to
    read only (the app and `rldiff` open stores for writing: give those `sample_study_copy`)."""
    cache = getattr(request.config, "cache", None)  # None under `-p no:cacheprovider`: built for this session
    built = cached_sample_study(
        Path(cache.mkdir("sample-study")) if cache is not None else tmp_path_factory.mktemp("sample-study-build")
    )
    target = tmp_path_factory.mktemp("sample-study") / "study.duckdb"
    shutil.copy(built, target)
    return target


@pytest.fixture
def sample_study_copy(sample_study: Path, tmp_path: Path) -> Path:
    """A copy of the analysed demo pair for one test to write to."""
    return Path(shutil.copy(sample_study, tmp_path / "study.duckdb"))
