"""The overview's exploratory ranking of a small study (the demo pair shares 4 tasks): pointed to, shown only on
request, and the showing logged as a held-out view, because the ranking includes the held-out rollouts."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from textual.widgets import Static

from engine.safe_text import line
from engine.store.queries.overview import EXPLORATORY_RULE, EXPLORATORY_TITLE
from tests.factories_tui import settle
from tests.test_tui_app import another_process_holding
from tui.app import RldiffApp
from tui.screens.feature import FeatureScreen
from tui.screens.overview import OverviewScreen
from tui.widgets.row_table import RowTable

SIZE = (120, 40)


def rows(path: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql).fetchall()


def shown(app: RldiffApp, selector: str) -> str:
    return " ".join(str(app.screen.query_one(selector, Static).render()).split())


@pytest.fixture
def store_path(sample_study_copy: Path) -> Path:
    return sample_study_copy


async def test_the_ranking_is_shown_on_request_and_the_showing_logged(store_path: Path) -> None:
    assert rows(store_path, "SELECT value FROM meta WHERE key = 'split_mode'") == [("rollout",)]
    ranking = json.loads(rows(store_path, "SELECT metrics FROM runs WHERE stage = 'deltas'")[0][0])["exploratory"]
    first = ranking[0]
    label = rows(store_path, f"SELECT label FROM features WHERE feature_id = {int(first['feature_id'])}")[0][0]
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        table = app.screen.query_one("#exploratory", RowTable)
        header = shown(app, "#study")
        assert "An exploratory ranking of the whole study is ready: press x" in header
        assert in_key_bar(app, "x")
        assert not table.display and table.row_count == 0
        assert rows(store_path, "SELECT count(*) FROM heldout_views") == [(0,)]

        await pilot.press("x")
        await settle(pilot)
        assert table.display and table.row_count == len(ranking)
        assert EXPLORATORY_TITLE in shown(app, "#exploratory-title")
        assert " ".join(EXPLORATORY_RULE.split()) in shown(app, "#exploratory-title")
        drawn = table.render_line(1).text  # the first row, under the header
        assert line(label)[:20] in drawn and first["kind"] in drawn and first["family"] in drawn
        assert f"{first['delta'] * 100:+.1f}" in drawn
        assert "press x" not in shown(app, "#study")
        assert rows(store_path, "SELECT via, hypothesis_id FROM heldout_views") == [("tui", None)]
        findings = app.screen.query_one("#findings", RowTable)
        assert findings.display

        await pilot.press("x")  # hides it again; nothing more is logged
        await settle(pilot)
        assert not table.display and "press x" in shown(app, "#study")
        await pilot.press("x")
        await settle(pilot)
        assert table.display and app.screen.focused is table
        assert rows(store_path, "SELECT count(*) FROM heldout_views") == [(1,)]

        await pilot.press("down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, FeatureScreen)
        assert (app.screen.feature_id, app.screen.kind) == (ranking[1]["feature_id"], ranking[1]["kind"])


def in_key_bar(app: RldiffApp, key: str) -> bool:
    """Whether the footer offers `key` (Textual drops a binding whose check_action says False)."""
    active = app.screen.active_bindings.get(key)
    return active is not None and active.enabled and active.binding.show


async def test_a_study_split_by_task_shows_and_logs_nothing(store_path: Path) -> None:
    """The ranking is still in the deltas run's metrics; a study marked split by task is not small, so the key
    is not offered, and pressing it neither shows the ranking nor logs a view."""
    with duckdb.connect(str(store_path)) as con:
        con.execute("UPDATE meta SET value = 'task' WHERE key = 'split_mode'")
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "exploratory ranking" not in shown(app, "#study")
        assert not in_key_bar(app, "x")
        await pilot.press("x")
        await settle(pilot)
        table = app.screen.query_one("#exploratory", RowTable)
        assert not table.display and table.row_count == 0
    assert rows(store_path, "SELECT count(*) FROM heldout_views") == [(0,)]


async def test_a_read_only_store_shows_nothing_it_cannot_log(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process reading the store keeps the app read-only: the view cannot be logged, so the ranking is
    not shown, and the user is told why."""
    app = RldiffApp(store_path, retry_seconds=60)
    titles: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **kw: titles.append(kw.get("title", "")))
    with another_process_holding(store_path, read_only=True):
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert app.store_status.mode == "read-only" and "press x" in shown(app, "#study")
            await pilot.press("x")
            await settle(pilot)
            assert app.screen.query_one("#exploratory", RowTable).row_count == 0
            assert titles == ["not saved"]
    assert rows(store_path, "SELECT count(*) FROM heldout_views") == [(0,)]


async def test_the_pointer_names_a_remapped_key(store_path: Path, tmp_path: Path) -> None:
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('[keymap]\n"overview.exploratory" = "ctrl+e"\n', encoding="utf-8")
    app = RldiffApp(store_path, keymap_path=keymap)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "is ready: press ctrl+e" in shown(app, "#study")
        await pilot.press("ctrl+e")
        await settle(pilot)
        assert app.screen.query_one("#exploratory", RowTable).row_count > 0
    assert rows(store_path, "SELECT via FROM heldout_views") == [("tui",)]
