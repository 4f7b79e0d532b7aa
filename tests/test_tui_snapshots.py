"""SVG snapshots of every screen in every shipped theme at 80x24 and 120x40 (pytest-textual-snapshot).

Update after an intended change with `pytest tests/test_tui_snapshots.py --snapshot-update` and look at the
report (snapshot_report.html) before committing the new SVGs under tests/__snapshots__/.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from tests.factories_tui import build_store, settle
from tui.app import RldiffApp

THEMES = ("rldiff-dark", "rldiff-light", "rldiff-high-contrast")
SIZES = ((80, 24), (120, 40))
# screen -> keys from the overview that reach it
SCREENS = {
    "overview": (),
    "deltas": ("2",),
    "feature": ("2", "enter"),
    "clusters": ("3",),
    "hypotheses": ("4",),
    "rollouts": ("5",),
    "viewer": ("5", "enter"),
}
# dialogs and sub-views, in the default theme
DIALOGS = {
    "help": ("question_mark",),
    "feature-tasks": ("2", "enter", "t"),
    "viewer-side-by-side": ("5", "enter", "s"),
    "add-hypothesis": ("4", "plus"),
    "label-segments": ("4", "l"),
    "note": ("4", "n"),
}


@pytest.fixture(autouse=True)
def no_user_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """No user keymap or themes, and the same config path in the help screen on every machine."""
    monkeypatch.setenv("RLDIFF_CONFIG_DIR", "/nonexistent/rldiff-config")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("snapshots") / "study.duckdb", hostile=True)


def navigate(keys: tuple[str, ...]):  # noqa: ANN201
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("screen", SCREENS)
def test_screen(snap_compare, store_path: Path, screen: str, theme: str, size: tuple[int, int]) -> None:  # noqa: ANN001
    assert snap_compare(RldiffApp(store_path, theme=theme), terminal_size=size, run_before=navigate(SCREENS[screen]))


@pytest.mark.parametrize("view", DIALOGS)
def test_dialog(snap_compare, store_path: Path, view: str) -> None:  # noqa: ANN001
    assert snap_compare(RldiffApp(store_path), terminal_size=(80, 24), run_before=navigate(DIALOGS[view]))
