"""SVG snapshots (pytest-textual-snapshot): each screen once at 80x24 in the default theme, the other themes on
two screens, and the dialogs and sub-views; each case says what it guards (17 in all). The wide layout has no
snapshot: test_tui_app's flows run at 100x32 and 120x40 and check what they show.

Update after an intended change with `pytest tests/test_tui_snapshots.py --snapshot-update` and look at the
report (snapshot_report.html) before committing the new SVGs under tests/__snapshots__/.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from tests.factories_tui import build_store, settle
from tui.app import RldiffApp

DEFAULT, LIGHT, HIGH_CONTRAST = "rldiff-dark", "rldiff-light", "rldiff-high-contrast"
SMALL = (80, 24)
# screen -> (keys from the overview that reach it, what its snapshot guards)
SCREENS = {
    "overview": ((), "the study at a glance: checkpoints, split, warnings, top changes"),
    "deltas": (("2",), "the deltas table: labels wrapped to 80 columns, families under kinds, hostile text stripped"),
    "feature": (("2", "enter"), "a feature: rates by kind with CIs and q, examples with the span that fires"),
    "clusters": (("3",), "clusters, and the members of the selected one"),
    "hypotheses": (("4",), "hypotheses: verdict, decision, held-out delta and q, rejected ones last"),
    "rollouts": (("5",), "the rollout list: task, checkpoint, reward, split, sizes"),
    "viewer": (("5", "enter"), "one transcript: roles, reasoning, tool calls and results"),
}
# (screen, theme, size, what it guards) beyond each screen in the default theme at 80x24
VARIANTS = (
    ("overview", LIGHT, SMALL, "the light theme's contrast on text and panels"),
    ("deltas", LIGHT, SMALL, "the light theme's colours of increases, decreases and q-values"),
    ("overview", HIGH_CONTRAST, SMALL, "the high-contrast theme on text and panels"),
    ("deltas", HIGH_CONTRAST, SMALL, "the high-contrast theme's colours of increases, decreases and q-values"),
)
CASES = [pytest.param(name, DEFAULT, SMALL, id=f"{name}-{DEFAULT}-80x24") for name in SCREENS] + [
    pytest.param(name, theme, size, id=f"{name}-{theme}-{size[0]}x{size[1]}") for name, theme, size, _ in VARIANTS
]
# dialogs and sub-views in the default theme: keys from the overview, what the snapshot guards
DIALOGS = {
    "help": (("question_mark",), "every key binding, with the user's config path"),
    "feature-tasks": (("2", "enter", "t"), "a feature's rates task by task"),
    "viewer-side-by-side": (("5", "enter", "s"), "before and after transcripts of one task side by side"),
    "add-hypothesis": (("4", "plus"), "the form for a hypothesis of one's own"),
    "label-segments": (("4", "l"), "hand labelling for the labeler's calibration"),
    "note": (("4", "n"), "a note on a hypothesis"),
}


@pytest.fixture(autouse=True)
def no_user_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """No user keymap or themes, and the same config path in the help screen on every machine."""
    monkeypatch.setenv("RLDIFF_CONFIG_DIR", "/nonexistent/rldiff-config")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A purpose-built store, not the analysed demo pair: a snapshot must draw the same on every machine, and the
    demo pair's SAE labels and thresholds come from float training that may differ in its last bits between
    CPUs; this one is drawn from one seeded generator, with hostile text in a reply, a result and a label."""
    return build_store(tmp_path_factory.mktemp("snapshots") / "study.duckdb", hostile=True)


def navigate(keys: tuple[str, ...]):  # noqa: ANN201
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run_before


@pytest.mark.parametrize(("screen", "theme", "size"), CASES)
def test_screen(snap_compare, store_path: Path, screen: str, theme: str, size: tuple[int, int]) -> None:  # noqa: ANN001
    keys, _ = SCREENS[screen]
    assert snap_compare(RldiffApp(store_path, theme=theme), terminal_size=size, run_before=navigate(keys))


@pytest.mark.parametrize("view", DIALOGS)
def test_dialog(snap_compare, store_path: Path, view: str) -> None:  # noqa: ANN001
    keys, _ = DIALOGS[view]
    assert snap_compare(RldiffApp(store_path), terminal_size=SMALL, run_before=navigate(keys))
