"""The TUI's own widgets on their own: the row table, the transcript, text tables and the idle collector."""

from __future__ import annotations

import gc
from types import SimpleNamespace

import pytest
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult

from engine.store.queries import MessageRow, RolloutRow, SegmentRow
from engine.store.queries import Transcript as TranscriptData
from tui import idle_gc
from tui.widgets.example_list import ExampleItem, ExampleList
from tui.widgets.row_table import RowTable
from tui.widgets.text_table import text_table
from tui.widgets.transcript import Transcript


class TableApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int, str]] = []

    def compose(self) -> ComposeResult:
        yield RowTable(id="t")

    def on_row_table_row_highlighted(self, event: RowTable.RowHighlighted) -> None:
        self.events.append(("highlighted", event.cursor_row, event.row_key))

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        self.events.append(("selected", event.cursor_row, event.row_key))


def fill(table: RowTable, n: int) -> None:
    table.set_columns((("name", None), ("n", 5)), 30)
    table.add_rows((f"k{i}", [Text(f"row {i} with a long name"), Text(str(i), justify="right")]) for i in range(n))


async def test_row_table_lays_out_cells_and_moves_its_cursor() -> None:
    app = TableApp()
    async with app.run_test(size=(30, 12)) as pilot:
        table = app.query_one(RowTable)
        fill(table, 50)
        await pilot.pause()
        assert table.columns[0].width == 30 - (5 + 2 * 2 + 2)  # what the fixed column and padding leave
        assert table.render_line(0).text.startswith(" name ")
        first = table.render_line(1).text
        assert first.startswith(" row 0 with a long …") and first.rstrip().endswith("     0")  # cut, right-justified
        assert app.events == [("highlighted", 0, "k0")]  # the first rows put the cursor on row 0

        table.focus()
        await pilot.press("down", "down", "enter")
        assert table.cursor_row == 2 and app.events[-1] == ("selected", 2, "k2")
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == 49 and table.scroll_y > 0  # scrolled to keep the cursor in view
        assert table.render_line(table.size.height - 1).text.startswith(" row 49 ")
        await pilot.press("home", "pagedown")
        assert table.cursor_row == table.size.height - 1  # a page is the rows under the header
        table.move_cursor(row=1000)
        assert table.cursor_row == 49

        table.update_row("k3", [Text("renamed"), Text("x")])
        assert table.get_row_index("k3") == 3 and table.has_row("k3") and not table.has_row("k50")
        with pytest.raises(ValueError, match="duplicate row key"):
            table.add_row(Text("again"), Text(""), key="k3")


async def test_row_table_keeps_its_rows_drawn_across_focus_and_style_changes() -> None:
    """What makes switching screens cheap: a style change (focus, a screen coming back) redraws from the
    lines made once per row, instead of building and rendering every cell again. Rows given as callables are
    built when first drawn, so the calls count the rows drawn from scratch."""
    app = TableApp()
    built: list[int] = []

    def cells(i: int) -> list[Text]:
        built.append(i)
        return [Text(f"row {i}"), Text(str(i))]

    async with app.run_test(size=(30, 12)) as pilot:
        table = app.query_one(RowTable)
        table.set_columns((("name", None), ("n", 5)), 30)
        table.add_rows((f"k{i}", (lambda i=i: cells(i))) for i in range(20))
        await pilot.pause()
        drawn = sorted(built)
        assert drawn == list(range(11))  # the rows in view
        table.focus()
        await pilot.pause()
        table.blur()
        await pilot.pause()
        assert sorted(built) == drawn and table.render_line(1).text.startswith(" row 0 ")  # redrawn, not rebuilt
        table.update_row("k0", lambda: cells(0))
        await pilot.pause()
        assert sorted(built) == sorted([0, *drawn])  # an updated row is built again, and only it
        table.set_columns((("other", None),), 30)  # new columns: everything goes
        assert table.row_count == 0 and table.render_line(1).text.strip() == ""


def transcript_data(n: int = 6) -> TranscriptData:
    rollout = RolloutRow(7, "after", "r-7", "task-1", 0, 1.0, "held_out", n, n)
    messages = [
        MessageRow(
            i,
            "user" if i % 2 else "assistant",
            f"message {i}: " + "lorem ipsum dolor sit amet " * 8 + f"END{i}",
            "thinking about it " * 4 if i % 2 == 0 else None,
            [],
            None,
            None,
            False,
        )
        for i in range(n)
    ]
    segments = [SegmentRow(100 + i, i, 0, "text", None) for i in range(n)]
    return TranscriptData(rollout, messages, segments)


class TranscriptApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Transcript(id="t")


def every_line(transcript: Transcript) -> list[str]:
    """The transcript's lines below its header, drawn by scrolling through it a view at a time."""
    lines: list[str] = []
    view = transcript.size.height - 1
    for top in range(0, transcript.virtual_size.height, view):
        transcript.scroll_to(y=top, animate=False, immediate=True, force=True)
        lines += [transcript.render_line(y).text for y in range(1, transcript.size.height)]
    return lines


async def test_transcript_wraps_to_its_width_and_folds_by_message(monkeypatch: pytest.MonkeyPatch) -> None:
    app = TranscriptApp()
    async with app.run_test(size=(50, 14)) as pilot:
        transcript = app.query_one(Transcript)
        wrapped: list[str] = []  # the first line of each text the console wraps into lines
        render_lines = app.console.render_lines

        def counting(renderable, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            wrapped.append(renderable.plain.split("\n")[0] if isinstance(renderable, Text) else "")
            return render_lines(renderable, *args, **kwargs)

        monkeypatch.setattr(app.console, "render_lines", counting)
        transcript.show(transcript_data(), focus_segment=104)
        # only the blocks in view are wrapped before the first frame; the rest right after it
        heads = [f"assistant #{i}" if i % 2 == 0 else f"user #{i}" for i in range(6)]
        assert any(heads[4] in w for w in wrapped) and not any(heads[0] in w for w in wrapped), wrapped
        transcript.focus()
        await pilot.pause()
        assert all(any(head in w for w in wrapped) for head in heads), wrapped
        assert transcript.current == 4 and transcript.blocks[4].focus_part is not None
        assert transcript.render_line(0).text.startswith(" after · task task-1")
        drawn = [transcript.render_line(y).text for y in range(1, transcript.size.height)]
        assert drawn[0].startswith("█ assistant #4")  # opened at the marked segment, its edge on the first line
        width = 50 - transcript.styles.scrollbar_size_vertical
        every = every_line(transcript)
        assert all(len(line.rstrip()) <= width for line in every)
        assert all(any(f"END{i}" in line for line in every) for i in range(6))  # wrapped, nothing cut
        transcript.move_to(4)
        await pilot.pause()

        assert transcript.blocks[4].expanded is False
        before = transcript.virtual_size.height
        await pilot.press("enter")  # unfold the current message's reasoning
        assert transcript.blocks[4].expanded and transcript.virtual_size.height > before
        await pilot.press("shift+tab", "shift+tab")
        assert transcript.current == 2
        transcript.set_reasoning(True)
        assert all(b.expanded for b in transcript.blocks if b.has_reasoning)
        transcript.show(None)
        await pilot.pause()
        assert transcript.blocks == [] and "no such rollout" in transcript.render_line(0).text


def test_text_table_aligns_columns() -> None:
    table = text_table(
        [("kind", "left"), ("before", "right"), ("q", "right")],
        [("text", "12.0%", Text("0.01", style="bold")), ("reasoning", "3.5%", "—")],
    )
    assert table.plain.split("\n") == [
        "kind      before    q",
        "text       12.0% 0.01",
        "reasoning   3.5%    —",
    ]
    assert any(span.style == "bold" for span in table.spans)


def test_idle_collector_collects_only_when_the_keyboard_is_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]  # the collector's clock, moved by hand instead of waiting
    monkeypatch.setattr(idle_gc, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    collector = idle_gc.IdleCollector()
    thresholds = gc.get_threshold()
    try:
        collector.start()
        assert gc.get_threshold()[2] == idle_gc.OFF and gc.get_freeze_count() > 0
        while gc.get_count()[2] == 0:  # push objects through the young generations
            [[] for _ in range(1000)]
        collector.input()
        collector.tick()  # typing: the full collection waits
        assert gc.get_count()[2] > 0
        clock[0] += idle_gc.IDLE_SECONDS
        collector.tick()
        assert gc.get_count()[2] == 0
    finally:
        collector.stop()
    assert gc.get_threshold() == thresholds and gc.get_freeze_count() == 0


class ExamplesApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.selected: list[str] = []

    def compose(self) -> ComposeResult:
        yield ExampleList(id="e")

    def on_example_list_selected(self, event: ExampleList.Selected) -> None:
        self.selected.append(event.key)


async def test_example_list_moves_between_examples_and_selects_one() -> None:
    app = ExamplesApp()
    async with app.run_test(size=(40, 10)) as pilot:
        examples = app.query_one(ExampleList)
        examples.show(
            [ExampleItem(f"s{i}", Text(f"example {i}\n" + "word " * 12), Style(color="red")) for i in range(5)]
        )
        examples.focus()
        await pilot.press("down", "down", "up", "down", "enter")
        assert examples.current == 2 and app.selected == ["s2"]
        assert examples.render_line(0).text.startswith("▌ example 0")  # each block on its own lines, edged
        examples.show([], empty="no stored examples")
        await pilot.press("enter")
        assert app.selected == ["s2"] and "no stored examples" in examples.render_line(0).text


async def test_row_table_builds_a_rows_cells_when_it_is_first_drawn() -> None:
    app = TableApp()
    built: list[int] = []

    def cells(i: int) -> list[Text]:
        built.append(i)
        return [Text(f"row {i}"), Text(str(i))]

    async with app.run_test(size=(30, 12)) as pilot:
        table = app.query_one(RowTable)
        table.set_columns((("name", None), ("n", 5)), 30)
        table.add_rows((f"k{i}", (lambda i=i: cells(i))) for i in range(500))
        await pilot.pause()
        assert sorted(built) == list(range(11))  # the rows in view (12 lines less the header), not all 500
        assert table.render_line(1).text.startswith(" row 0 ")
        table.move_cursor(row=499)
        await pilot.pause()
        assert 499 in built and len(built) < 30
