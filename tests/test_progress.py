"""Progress for a program running the CLI: JSON lines, throttled, readable by the TUI's runner."""

from __future__ import annotations

import io
import json

import pytest

from engine.progress import JsonLines, RichBar, for_terminal
from tui.hypothesis_runner import parse_progress


def test_json_lines_report_the_start_the_end_and_little_between() -> None:
    stream = io.StringIO()
    with JsonLines(stream, every_s=3600).track("reading", 4) as advance:
        advance(1, status="a")
        advance(1)  # within the interval: not written
        advance(2, status="b")  # the end is always written
    lines = stream.getvalue().splitlines()
    assert [(json.loads(x)["completed"], json.loads(x)["status"]) for x in lines] == [(0, ""), (4, "b")]
    assert parse_progress(lines[-1]) == parse_progress('{"completed": 4, "total": 4, "description": "reading b"}')
    assert parse_progress(lines[-1]).completed == 4.0


def test_the_environment_picks_json_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLDIFF_PROGRESS", "jsonl")
    assert isinstance(for_terminal(), JsonLines)
    monkeypatch.delenv("RLDIFF_PROGRESS")
    assert isinstance(for_terminal(), RichBar)
