"""The TUI driven through Textual's Pilot on the analysed demo pair (tests/sample_study.py): each screen's main
flows, asserting on the app's state, the messages its screens were sent, and what the store holds afterwards.

Over 400 lines: one app fixture and its helpers shared by every screen's flows (the widgets, the snapshots
and the strata screen have files of their own)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import TypeVar

import duckdb
import pytest
from rich.text import Text
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Input, Static

from engine.hypotheses.cautions import has_caution
from engine.hypotheses.reasons import tally
from engine.kinds import DISCOVERY, HELDOUT
from engine.store.queries import DeltaRow
from tests.factories_tui import settle
from tests.hostile import plant_hostile
from tests.restated import restate_a_finding
from tui.app import RldiffApp
from tui.messages import ClusterMembersLoaded, ClustersLoaded, DeltaPageLoaded, OverviewLoaded
from tui.screens import deltas as deltas_screen
from tui.screens.clusters import ClustersScreen
from tui.screens.deltas import DeltasScreen
from tui.screens.feature import FeatureScreen
from tui.screens.help import HelpScreen
from tui.screens.hypotheses import HypothesesScreen
from tui.screens.hypothesis_forms import HypothesisForm, LabelScreen, NoteScreen
from tui.screens.overview import OverviewScreen
from tui.screens.rollouts import RolloutsScreen, RolloutViewerScreen
from tui.widgets.banner import StoreBanner
from tui.widgets.paged_table import PagedTable
from tui.widgets.row_table import RowTable
from tui.widgets.transcript import Transcript

M = TypeVar("M", bound=Message)

SIZE = (100, 32)


@pytest.fixture
def store_path(sample_study_copy: Path) -> Path:
    """The analysed demo pair, copied: the app opens it for writing."""
    return sample_study_copy


def rows(path: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as con:  # the app keeps the store open read-only too
        return con.execute(sql, params or []).fetchall()


@contextmanager
def another_process_holding(path: Path, *, read_only: bool) -> Iterator[subprocess.Popen[str]]:
    """A second process with the store open (read-only: a shared lock; else the exclusive write lock)."""
    code = (
        "import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == '1'); "
        "print('ready', flush=True); sys.stdin.read()"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(path), "1" if read_only else "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield process
    finally:
        if process.stdin is not None and not process.stdin.closed:
            process.stdin.close()
        process.wait(timeout=10)


def release(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=10)


async def test_overview_shows_the_study_and_opens_a_finding(store_path: Path) -> None:
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.store_status.writable and not app.screen.query_one(StoreBanner).display
        assert isinstance(app.screen, OverviewScreen) and app.compared == ("standard", "tighter")
        findings = app.screen.query_one("#findings", RowTable)
        expected = rows(store_path, "SELECT count(*) FROM hypotheses WHERE status = 'validated' AND "
                        "coalesce(decision, '') <> 'rejected'")[0][0]  # fmt: skip
        assert findings.row_count == expected > 0
        title = " ".join(str(app.screen.query_one("#findings-title", Static).render()).split())
        statuses = rows(store_path, "SELECT status, reason FROM hypotheses")
        said = tally(SimpleNamespace(status=status, reason=reason) for status, reason in statuses)
        assert title == f"Top validated findings {len(statuses)} hypotheses: {said}"  # why the others were not
        first = findings.row_keys[findings.cursor_row]
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, HypothesesScreen)
        assert app.screen.current is not None and str(app.screen.current.hypothesis_id) == first


async def test_overview_says_up_front_when_the_study_is_small(store_path: Path) -> None:
    with duckdb.connect(str(store_path)) as con:
        con.execute("DELETE FROM meta WHERE key IN ('split_mode', 'split_warning')")
        con.execute("INSERT INTO meta VALUES ('split_mode', 'rollout'), ('split_warning', 'only 4 tasks are shared')")
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        shown = " ".join(str(app.screen.query_one("#study", Static).render()).split())
    assert "Small study: only 4 tasks are shared" in shown and "exploratory, never validated" in shown


def _received(messages: list[Message], kind: type[M]) -> list[M]:
    return [m for m in messages if isinstance(m, kind)]


async def test_deltas_say_how_much_longer_the_rollouts_are(store_path: Path) -> None:
    """'any' rows are tested adjusted for length: the screen says how much the length changed."""
    segments = rows(
        store_path,
        "SELECT json_extract(metrics, '$.segments_per_rollout_before')::DOUBLE, "
        "json_extract(metrics, '$.segments_per_rollout_after')::DOUBLE FROM runs WHERE stage = 'deltas'",
    )[0]
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await settle(pilot)
        shown = str(app.screen.query_one("#delta-length", Static).render())
    assert f"Rollouts are {segments[1] / segments[0]:.2f}x as long after" in shown
    assert f"({segments[0]:.1f} -> {segments[1]:.1f} segments a rollout)" in shown


async def test_deltas_filter_sort_search_page_and_open(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deltas_screen, "PAGE", 50)  # pages of 50: the study's tested deltas take several
    app = RldiffApp(store_path)
    messages: list[Message] = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await pilot.press("2")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DeltasScreen)

        def shown() -> list[DeltaRow]:
            """The rows the screen was sent for its current filter, pages in order."""
            pages = [m.page for m in _received(messages, DeltaPageLoaded) if m.filter == screen.filter]
            first = max(i for i, page in enumerate(pages) if page.offset == 0)
            return [row for page in pages[first:] for row in page.rows]

        table = screen.query_one(PagedTable)
        assert table.total == rows(store_path, "SELECT count(*) FROM feature_deltas WHERE tested")[0][0]
        assert table.loaded == 50 < table.total  # one page, not the whole table
        await pilot.press("end")
        await settle(pilot)
        assert table.loaded > 50  # the next page came as the cursor neared the end
        await pilot.press("home")
        while screen.filter.kind != "text":  # the kinds in turn
            await pilot.press("f")
            await settle(pilot)
        assert {r.kind for r in shown()} == {"text"}
        await pilot.press("d", "d")  # direction: decrease
        await settle(pilot)
        assert shown() and all(r.delta is not None and r.delta < 0 for r in shown())
        await pilot.press("g")  # q <= 0.05
        await settle(pilot)
        assert all(r.q_value is not None and r.q_value <= 0.05 for r in shown())
        while screen.filter.kind is not None:  # all kinds again
            await pilot.press("f")
        await pilot.press("d", "o", "o", "o")  # all directions again; sort: Δ↓
        await settle(pilot)
        deltas = [r.delta or 0.0 for r in shown()]
        assert screen.filter.sort == "decrease" and deltas == sorted(deltas)
        await pilot.press("slash", *"transfer_to", "enter")
        await settle(pilot)
        assert screen.filter.max_q == 0.05  # still filtered by q
        matching = rows(store_path, "SELECT count(*) FROM feature_deltas d JOIN features f USING (feature_id) "
                        "LEFT JOIN feature_kind_labels kl ON kl.feature_id = d.feature_id AND kl.kind = d.kind "
                        "WHERE tested AND q_value <= 0.05 AND coalesce(kl.label, f.label) ILIKE '%transfer_to%'"
                        )[0][0]  # fmt: skip
        assert len(shown()) == matching > 0 and all("transfer_to" in r.label for r in shown())
        assert isinstance(app.focused, PagedTable)
        feature_id, kind = shown()[0].feature_id, shown()[0].kind
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, FeatureScreen)
        assert app.screen.detail is not None and (app.screen.detail.feature_id, app.screen.kind) == (feature_id, kind)


async def _first_feature(app: RldiffApp, pilot: Pilot) -> FeatureScreen:
    """The feature screen of the first feature, loaded."""
    await settle(pilot)
    app.open_feature(0)
    await settle(pilot)
    feature = app.screen
    assert isinstance(feature, FeatureScreen) and feature.detail is not None
    return feature


async def test_the_feature_screen_is_titled_by_the_label_of_the_row_it_was_opened_from(store_path: Path) -> None:
    """Opened from a row of one kind, the feature screen is titled by that kind's label, the feature's own
    (from its strongest examples of any kind) beneath; opened without a kind, by its own."""
    [(feature_id, kind, own, of_kind)] = rows(
        store_path,
        "SELECT d.feature_id, d.kind, f.label, kl.label FROM feature_deltas d JOIN features f USING (feature_id) "
        "JOIN feature_kind_labels kl ON kl.feature_id = d.feature_id AND kl.kind = d.kind "
        "WHERE kl.label <> f.label ORDER BY d.feature_id, d.kind LIMIT 1",
    )
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        heads = []
        for opened_as in (kind, None):
            app.open_feature(feature_id, opened_as)
            await settle(pilot)
            head = app.screen.query_one("#feature-head", Static).content
            assert isinstance(head, Text)
            heads.append(head.plain.splitlines())
    assert heads[0][:2] == [of_kind, f"all kinds: {own}"]
    assert heads[1][0] == own and not heads[1][1].startswith("all kinds")


async def test_feature_statistics_show_the_pooled_share_beside_the_rates(store_path: Path) -> None:
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        feature = await _first_feature(app, pilot)
        shown = str(feature.query_one("#feature-stats", Static).render())
    assert feature.detail is not None
    assert "pooled" in shown.splitlines()[0]
    stored = rows(
        store_path,
        "SELECT kind, round(100 * pooled_before), round(100 * pooled_after) FROM feature_deltas WHERE feature_id = ?",
        [feature.detail.feature_id],
    )
    assert stored
    for kind, before, after in stored:
        line = next(line for line in shown.splitlines() if line.startswith(kind))
        assert f"{before:.0f}%→{after:.0f}%" in line


async def test_feature_example_opens_the_rollout_at_its_segment(store_path: Path) -> None:
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        feature = await _first_feature(app, pilot)
        assert feature.detail is not None
        example = feature.detail.examples[1]
        await pilot.press("down", "enter")
        await settle(pilot)
        viewer = app.screen
        assert isinstance(viewer, RolloutViewerScreen)
        assert (viewer.rollout_key, viewer.segment_id) == (example.segment.rollout_key, example.segment.segment_id)
        main = viewer.query_one("#main-transcript", Transcript)
        marked = [block for block in main.blocks if block.focus_part is not None]
        assert len(marked) == 1  # the segment is marked (and its reasoning unfolded if it is reasoning)
        assert marked[0].focus_part.segment_id == example.segment.segment_id
        assert main.blocks[main.current] is marked[0]
        await pilot.press("o")  # the same task in the other checkpoint
        await settle(pilot)
        other = rows(store_path, "SELECT task_id, checkpoint FROM rollouts WHERE rollout_key = ?", [viewer.rollout_key])
        assert other[0] == (
            example.segment.task_id,
            "tighter" if example.segment.checkpoint == "standard" else "standard",
        )
        await pilot.press("s")  # side by side
        await settle(pilot)
        right = viewer.query_one("#other-transcript", Transcript)
        assert right.display and right.data is not None and right.data.rollout.task_id == example.segment.task_id
        assert right.data.rollout.checkpoint == example.segment.checkpoint
        await pilot.press("e")
        assert all(block.expanded for t in viewer.query(Transcript) for block in t.blocks if block.has_reasoning)
        await pilot.press("escape", "escape")
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)


async def test_clusters_list_members_and_open_one(store_path: Path) -> None:
    app = RldiffApp(store_path)
    messages: list[Message] = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await pilot.press("3")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ClustersScreen)
        clusters = _received(messages, ClustersLoaded)[-1].clusters
        assert len(clusters) == rows(store_path, "SELECT count(*) FROM clusters")[0][0]
        first = clusters[0].cluster_id
        members = rows(store_path, "SELECT feature_id FROM cluster_members WHERE cluster_id = ?", [first])
        loaded = _received(messages, ClusterMembersLoaded)[-1]
        assert loaded.cluster_id == first
        assert {m.feature_id for m in loaded.members} == {m[0] for m in members}
        await pilot.press("down")
        await settle(pilot)
        loaded = _received(messages, ClusterMembersLoaded)[-1]
        assert loaded.cluster_id == clusters[1].cluster_id  # the members follow the cursor
        await pilot.press("enter")
        assert app.focused is screen.query_one("#members", RowTable)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, FeatureScreen) and app.screen.feature_id == loaded.members[0].feature_id


async def open_hypotheses(app: RldiffApp, pilot: Pilot) -> HypothesesScreen:
    """The hypotheses screen (key 4), loaded."""
    await pilot.press("4")
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, HypothesesScreen)
    return screen


async def test_triage_decisions_and_notes_persist(store_path: Path) -> None:
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_hypotheses(app, pilot)
        first, second, third = (h.hypothesis_id for h in screen.rows[:3])
        await pilot.press("a")
        await settle(pilot)
        await pilot.press("j", "r")
        await settle(pilot)
        await pilot.press("j", "a")
        await settle(pilot)
        await pilot.press("u", "k")
        await settle(pilot)
        assert screen.current is not None and screen.current.hypothesis_id == second
        assert screen.current.decision == "rejected"  # the table row was updated in place
        await pilot.press("n")
        await settle(pilot)
        assert isinstance(app.screen, NoteScreen)
        app.screen.query_one(Input).value = ""
        await pilot.press(*"hand-offs only", "enter")
        await settle(pilot)
        assert isinstance(app.screen, HypothesesScreen)
    stored = dict(rows(store_path, "SELECT hypothesis_id, decision FROM hypotheses"))
    assert (stored[first], stored[second], stored[third]) == ("accepted", "rejected", None)
    assert rows(store_path, "SELECT note FROM hypotheses WHERE hypothesis_id = ?", [second]) == [("hand-offs only",)]


async def test_hypothesis_filters(store_path: Path) -> None:
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_hypotheses(app, pilot)
        await pilot.press("f")
        await settle(pilot)
        assert screen.rows and {h.status for h in screen.rows} == {"validated"}
        await pilot.press("d", "d")  # decision: accepted
        await settle(pilot)
        accepted = rows(store_path, "SELECT hypothesis_id FROM hypotheses WHERE decision = 'accepted' "
                        "AND status = 'validated'")  # fmt: skip
        assert [h.hypothesis_id for h in screen.rows] == [a[0] for a in accepted]
        app.jump("hypothesis", 2)  # hidden by the filters: they are cleared
        await settle(pilot)
        assert screen.status_filter is None and screen.current is not None and screen.current.hypothesis_id == 2


async def test_labelling_segments_writes_user_labels(store_path: Path) -> None:
    app = RldiffApp(store_path)
    before = set(rows(store_path, "SELECT hypothesis_id, segment_id FROM user_labels"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await settle(pilot)
        hypothesis = app.screen.current
        await pilot.press("l")
        await settle(pilot)
        label_screen = app.screen
        assert isinstance(label_screen, LabelScreen)
        shown = [c.segment_id for c in label_screen.candidates[:3]]
        await pilot.press("y")
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
        await pilot.press("s", "escape")
        await settle(pilot)
        assert isinstance(app.screen, HypothesesScreen)
    added = (
        set(rows(store_path, "SELECT hypothesis_id, segment_id, label FROM user_labels"))
        - {(*b, True) for b in before}
        - {(*b, False) for b in before}
    )
    assert added == {(hypothesis.hypothesis_id, shown[0], True), (hypothesis.hypothesis_id, shown[1], False)}
    views = rows(store_path, "SELECT via, hypothesis_id FROM heldout_views WHERE via = 'tui'")
    assert views == [("tui", hypothesis.hypothesis_id)]  # the candidates are held-out verdicts: a logged view


@pytest.mark.slow  # end to end: two `rldiff` subprocesses, each importing the engine (26 s wall on a loaded box)
async def test_add_a_hypothesis_and_test_it_in_a_subprocess(store_path: Path) -> None:
    app = RldiffApp(store_path)
    statuses = []
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await settle(pilot)
        app.watch(app, "store_status", lambda status: statuses.append(status.mode))
        progress = []
        app.watch(app, "hypothesis_test", lambda state: progress.append(state))
        await pilot.press("plus")
        await settle(pilot)
        form = app.screen
        assert isinstance(form, HypothesisForm)
        await pilot.press(*"the agent apologises less")
        form.query_one("#pattern", Input).value = "sorry|apolog"
        await pilot.press("ctrl+s")
        deadline = time.monotonic() + 180  # two CLI subprocesses (add, then test); slow on a loaded machine
        while time.monotonic() < deadline:
            await settle(pilot)
            if app.hypothesis_test is not None and app.hypothesis_test.finished:
                break
            await pilot.pause(0.2)
        assert app.hypothesis_test is not None and app.hypothesis_test.finished
        assert app.hypothesis_test.ok, app.hypothesis_test.status
        # the CLI reported its steps as JSON lines (RLDIFF_PROGRESS=jsonl), which drove the progress bar to its
        # end (the total comes only from those lines; a status line after the last step keeps the count)
        steps = [(s.completed, s.total) for s in progress if s is not None and s.total is not None]
        assert (3.0, 3.0) in steps
        await settle(pilot)
        assert "busy" in statuses and statuses[-1] == "read-write"  # released for the test, reopened after
        assert app.screen.current is not None and app.screen.current.statement == "the agent apologises less"
        assert app.screen.current.status != "proposed"
    added = rows(store_path, "SELECT origin, labeler, status, tested_at IS NOT NULL, n_labeled FROM hypotheses "
                 "WHERE statement = 'the agent apologises less'")  # fmt: skip
    assert len(added) == 1 and added[0][:2] == ("user", "verifier") and added[0][2] != "proposed" and added[0][3]
    assert rows(store_path, "SELECT count(*) FROM hypothesis_labels WHERE hypothesis_id = (SELECT hypothesis_id "
                "FROM hypotheses WHERE statement = 'the agent apologises less')")[0][0] == added[0][4] > 0  # fmt: skip


async def test_a_failing_test_is_reported_and_the_store_reopened(store_path: Path) -> None:
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.start_hypothesis_test(0, [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"])
        for _ in range(50):
            await settle(pilot)
            if app.hypothesis_test is not None and app.hypothesis_test.finished:
                break
            await pilot.pause(0.1)
        assert app.hypothesis_test is not None and not app.hypothesis_test.ok
        assert app.hypothesis_test.status == "boom" and app.store_status.writable


async def test_read_only_when_another_process_reads_then_writable(store_path: Path) -> None:
    app = RldiffApp(store_path, retry_seconds=0.2)
    [(undecided,)] = rows(store_path, "SELECT min(hypothesis_id) FROM hypotheses WHERE decision IS NULL")
    with another_process_holding(store_path, read_only=True) as reader:
        async with app.run_test(size=SIZE) as pilot:
            app.jump("hypothesis", undecided)
            await settle(pilot)
            assert app.store_status.mode == "read-only"
            banner = app.screen.query_one(StoreBanner)
            assert banner.display and "read-only" in str(banner.content)
            current = app.screen.current
            assert current is not None and current.decision is None
            await pilot.press("a")  # refused: nothing is written
            await settle(pilot)
            assert app.screen.current.decision is None
            release(reader)
            for _ in range(50):
                await pilot.pause(0.1)
                if app.store_status.writable:
                    break
            await settle(pilot)
            assert app.store_status.writable and not app.screen.query_one(StoreBanner).display
            await pilot.press("a")
            await settle(pilot)
    assert rows(store_path, "SELECT decision FROM hypotheses WHERE hypothesis_id = ?", [current.hypothesis_id]) == [
        ("accepted",)
    ]


async def test_locked_by_a_writer_shows_a_banner_and_recovers(store_path: Path) -> None:
    app = RldiffApp(store_path, retry_seconds=0.2)
    messages: list[Message] = []
    with another_process_holding(store_path, read_only=False) as writer:
        async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
            await settle(pilot)
            assert app.store_status.mode == "locked"
            banner = app.screen.query_one(StoreBanner)
            assert banner.display and f"being written: locked by PID {writer.pid}" in str(banner.content)
            assert not _received(messages, OverviewLoaded)  # nothing could be read
            release(writer)
            for _ in range(50):
                await pilot.pause(0.1)
                if app.store_status.writable:
                    break
            await settle(pilot)
            assert app.store_status.writable and _received(messages, OverviewLoaded)


async def test_a_newer_schema_is_explained(store_path: Path) -> None:
    with duckdb.connect(str(store_path)) as con:
        con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.store_status.mode == "failed"
        assert "newer than this rldiff supports" in str(app.screen.query_one(StoreBanner).content)


async def test_hostile_rollout_text_shows_literally(store_path: Path) -> None:
    planted = plant_hostile(store_path)
    app = RldiffApp(store_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("5")
        await settle(pilot)
        assert isinstance(app.screen, RolloutsScreen)
        app.jump("rollout", planted.rollout_key)  # the rollout that carries the hostile text
        await settle(pilot)
        assert isinstance(app.screen, RolloutViewerScreen)
        transcript = app.screen.query_one("#main-transcript", Transcript)
        texts = [block.text().plain for block in transcript.blocks]
        shown = "\n".join(texts)
        drawn = "\n".join(transcript.render_line(y).text for y in range(transcript.size.height))
        for text in (shown, drawn):
            assert not any(ch in text for ch in "\x1b\x07\x9b\x9c")  # no control character reaches the screen
        assert "ALERT[/]" in drawn
        content = "[bold red]ALERT[/] click [link=https://evil.example]here[/link] [/]red bell  csi8  end"
        assert f"\n{content}\n" in shown  # the assistant's text, literally
        result = next(t for t in texts if t.startswith("tool #") and "ALERT" in t)
        assert "pwned" not in result and "[/]red" in result
        # tool-call arguments are shown as JSON, whose escapes (\u001b) are plain text, not control codes
        assert "\\u001b]0;pwned" in shown
        assert "ALERT[/]" in app.export_screenshot()
        app.open_feature(planted.feature_id)  # its label is hostile too
        await settle(pilot)
        head = app.screen.query_one("#feature-head", Static).content
        assert isinstance(head, Text) and head.plain.startswith("[bold red]sorry[/] · policy")


async def test_keymap_remaps_by_id_and_help_lists_it(
    store_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('[keymap]\n"hypotheses.accept" = "y"\n"no.such.binding" = "x"\n')
    app = RldiffApp(store_path, keymap_path=keymap)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await settle(pilot)
        hypothesis_id = app.screen.current.hypothesis_id
        await pilot.press("y")
        await settle(pilot)
        assert "unknown binding id 'no.such.binding'" in caplog.text
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        help_text = app.screen.query_one(Static).content
        table = help_text.renderables[-1]
        keys = dict(zip(table.columns[3].cells, table.columns[1].cells, strict=True))
        assert keys["hypotheses.accept"] == "y" and keys["hypotheses.reject"] == "r"
        await pilot.press("escape")
    assert rows(store_path, "SELECT decision FROM hypotheses WHERE hypothesis_id = ?", [hypothesis_id]) == [
        ("accepted",)
    ]


async def test_themes_switch_and_a_bad_theme_file_is_reported(
    store_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    themes = tmp_path / "themes"
    themes.mkdir()
    shutil.copy(Path(__file__).parents[1] / "themes" / "light.toml", themes)
    (themes / "broken.toml").write_text('name = "broken"\nprimary = "not a colour"\n')
    app = RldiffApp(store_path, theme="rldiff-light", theme_dirs=[themes])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.theme == "rldiff-light"
        assert "broken.toml: `primary`: 'not a colour' is not a colour" in caplog.text
        assert app.theme_variables["more-in-after"] == "#1E7B3A"
        app.theme = "textual-dark"  # a built-in theme gets rldiff's variables from defaults
        await settle(pilot)
        assert app.theme_variables["less-in-after"] == app.current_theme.error
        await pilot.press("ctrl+t")
        assert app.theme == "rldiff-light"


async def test_command_palette_jumps_to_a_feature(store_path: Path) -> None:
    [(feature_id,)] = rows(store_path, "SELECT feature_id FROM features WHERE name = 'tool:transfer_to_human_agents'")
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p", *"calls tool transfer_to_human")
        for _ in range(20):
            await pilot.pause(0.1)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, FeatureScreen) and app.screen.feature_id == feature_id


async def test_hypothesis_detail_shows_calibration_and_heldout_examples_on_request(store_path: Path) -> None:
    """The detail shows the stored labeler calibration; held-out examples stay hidden until `e`, which logs the
    view (hypotheses written afterwards are exploratory) and marks each example held-out."""
    from engine.hypotheses import lifecycle
    from engine.hypotheses.calibration import calibrate
    from engine.store import Store, queries

    with Store(store_path) as store:
        hid = queries.hypotheses(store.cursor())[0].hypothesis_id
        verdicts = dict(
            store.frame("SELECT segment_id, label FROM hypothesis_labels WHERE hypothesis_id = ?", [hid]).rows()
        )
        for c in queries.label_candidates(store.cursor(), hid, limit=40):
            lifecycle.add_user_label(store, hid, c.segment_id, verdicts[c.segment_id])  # a person who agrees
        calibrate(store, hid)
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, HypothesesScreen) and screen.current.hypothesis_id == hid
        detail = screen.query_one("#hyp-text", Static)
        shown = str(detail.render())
        assert "labeler calibration" in shown and "TP" in shown and "hidden: e shows them" in shown
        assert rows(store_path, "SELECT count(*) FROM heldout_views WHERE via = 'tui'") == [(0,)]
        await pilot.press("e")
        await settle(pilot)
        shown = str(detail.render())
        assert "held-out " in shown.split("positive examples (held-out)")[1]
    assert rows(store_path, "SELECT via, hypothesis_id FROM heldout_views WHERE via = 'tui'") == [("tui", hid)]


async def test_a_heldout_transcript_is_logged_as_a_heldout_view(store_path: Path) -> None:
    """Opening a discovery rollout logs nothing; the first held-out one logs a view and tells the user."""
    from tui.messages import HeldoutViewLogged

    keys = dict(rows(store_path, "SELECT split, min(rollout_key) FROM rollouts GROUP BY split"))
    posted: list[object] = []
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE, message_hook=posted.append) as pilot:
        await settle(pilot)
        app.open_rollout(keys[DISCOVERY])
        await settle(pilot)
        assert isinstance(app.screen, RolloutViewerScreen)
        assert rows(store_path, "SELECT count(*) FROM heldout_views WHERE via = 'tui'") == [(0,)]
        app.open_rollout(keys[HELDOUT])
        await settle(pilot)
        await settle(pilot)
    assert [m for m in posted if isinstance(m, HeldoutViewLogged)]
    assert rows(store_path, "SELECT via, hypothesis_id FROM heldout_views WHERE via = 'tui'") == [("tui", None)]


async def test_a_finding_that_may_be_longer_turns_is_marked_in_the_list_and_detail(store_path: Path) -> None:
    caution = {"delta": 0.01, "ci_low": -0.02, "ci_high": 0.04, "p_value": 0.4, "words_before": 80.0,
               "words_after": 120.0, "caution": True}  # fmt: skip
    with duckdb.connect(str(store_path)) as con:
        [(hid,)] = con.execute("SELECT min(hypothesis_id) FROM hypotheses WHERE status = 'validated'").fetchall()
        con.execute(
            "UPDATE hypotheses SET provenance = json_merge_patch(coalesce(provenance, '{}'), ?) "
            "WHERE hypothesis_id = ?",
            [json.dumps({"equal_length": caution}), hid],
        )
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_hypotheses(app, pilot)
        marks = {h.hypothesis_id: (screen._cells(h)[1].plain, has_caution(h.provenance)) for h in screen.rows}
        assert marks[hid] == ("✓*", True) and all(m.endswith("*") == flagged for m, flagged in marks.values())
        app.jump("hypothesis", hid)
        await settle(pilot)
        shown = str(screen.query_one("#hyp-text", Static).render())
        assert "at equal turn length +1.0 pts (CI -2.0 to +4.0), p=0.4; turns without it 80 -> 120 words" in shown


async def test_a_finding_that_restates_another_is_marked_beneath_it(store_path: Path) -> None:
    """A validated finding whose positives are half of another's, with the same evidence, is listed right after
    it with the restating mark, in the overview's findings too, and its detail says which finding it restates."""
    broad, narrow, _ = restate_a_finding(store_path)
    app = RldiffApp(store_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        findings = app.screen.query_one("#findings", RowTable)
        keys = list(findings.row_keys)
        assert keys.index(str(narrow)) == keys.index(str(broad)) + 1
        screen = await open_hypotheses(app, pilot)
        order = [h.hypothesis_id for h in screen.rows]
        assert order.index(narrow) == order.index(broad) + 1
        marked = [h.hypothesis_id for h in screen.rows if screen._cells(h)[3].plain.startswith("↳ ")]
        assert marked == [narrow]
        app.jump("hypothesis", narrow)
        await settle(pilot)
        shown = str(screen.query_one("#hyp-text", Static).render())
        assert f"likely the same behaviour as finding {broad}: the same evidence in " in shown
