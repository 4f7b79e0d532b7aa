"""The TUI's by-reward tab on the feature screen and its A/A check action."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest
from textual.widgets import Static

import tui.jobs
from engine.strata import deltas_by_reward
from tests.factories_tui import settle
from tui.app import RldiffApp
from tui.screens.feature import FeatureScreen

SIZE = (100, 32)


@pytest.fixture
def store_path(sample_study_copy: Path) -> Path:
    """The analysed demo pair, copied: the app opens it for writing."""
    return sample_study_copy


async def test_feature_by_reward_tab(store_path: Path) -> None:
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_feature(0)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, FeatureScreen) and screen.detail is not None
        await pilot.press("w")
        await settle(pilot)
        shown = str(screen.query_one("#feature-reward", Static).render())
        kinds = list(dict.fromkeys(d.row.kind for d in screen.detail.deltas))
        before, after = app.compared
    with duckdb.connect(str(store_path), read_only=True) as con:
        expected = deltas_by_reward(con, pl.DataFrame({"feature_id": [0] * len(kinds), "kind": kinds}), before, after)
    assert "success" in shown and "failure" in shown
    first = expected.row(0, named=True)
    assert f"{100 * first['prevalence_before']:.1f}%" in shown


async def test_check_null_action_reports_and_reopens(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The action's wiring, with a stand-in for `rldiff check-null` (the command itself: tests/test_check_null.py)."""
    progress = json.dumps({"event": "progress", "description": "split", "completed": 1, "total": 1})
    script = f"print({progress!r}); print('validated: 0 of 4 hypotheses tested'); print('PASS: nothing validated.')"
    commands = []

    def fake(store: Path, work: Path) -> list[str]:
        commands.append((store, work))
        return [sys.executable, "-c", script]

    monkeypatch.setattr(tui.jobs, "null_check_command", fake)
    app = RldiffApp(store_path)
    notes: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        statuses: list[str] = []
        app.watch(app, "store_status", lambda status: statuses.append(status.mode))
        monkeypatch.setattr(app, "notify", lambda message, **_: notes.append(message))
        app.action_check_null()
        for _ in range(50):
            await settle(pilot)
            if any(n.startswith("A/A check: ") for n in notes):
                break
            await pilot.pause(0.1)
        assert commands and commands[0][0] == store_path
        assert "A/A check: validated: 0 of 4 hypotheses tested PASS: nothing validated." in notes
        assert "busy" in statuses and app.store_status.writable
