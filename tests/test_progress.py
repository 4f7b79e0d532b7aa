"""Progress for a program running the CLI: JSON lines, throttled, readable by the TUI's runner."""

from __future__ import annotations

import io
import json
import sys

import pytest

from engine.progress import JsonLines, RichBar, emit_result, for_terminal
from tui.hypothesis_runner import parse_progress, run_command, run_job


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


def test_a_result_line_only_for_a_program(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    emit_result(hypothesis_id=3)
    assert capsys.readouterr().out == ""
    monkeypatch.setenv("RLDIFF_PROGRESS", "jsonl")
    emit_result(hypothesis_id=3)
    assert json.loads(capsys.readouterr().out) == {"event": "result", "hypothesis_id": 3}


def _command(*lines: str) -> list[str]:
    return [sys.executable, "-c", f"print({chr(10).join(lines)!r})"]


def test_the_runner_takes_the_added_id_from_the_result_line_not_from_the_words() -> None:
    said = ('{"completed": 1, "total": 2, "description": "adding"}', "added hypothesis 99; test it with ...")
    outcome = run_command(_command(*said, '{"event": "result", "hypothesis_id": 7}'), lambda _: None)
    assert outcome.ok and outcome.result == {"event": "result", "hypothesis_id": 7}
    assert outcome.tail == ["added hypothesis 99; test it with ..."]  # the result line is not a status

    def job(add: list[str]) -> tuple[int | None, bool]:
        result = run_job(add=add, test=None, hypothesis_id=None, on_progress=lambda *_: None, on_start=lambda _: None)
        return result.hypothesis_id, result.ok

    assert job(_command(*said, '{"event": "result", "hypothesis_id": 7}')) == (7, True)
    assert job(_command(*said)) == (None, False)  # words alone are not a result
