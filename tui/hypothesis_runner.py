"""Testing a hypothesis in a subprocess, so the TUI never imports the LLM client, and reading its progress.

The test runs `python -m engine.cli hypothesis test STORE ID` (the same as `rldiff hypothesis test`) with
`RLDIFF_PROGRESS=jsonl` in its environment; progress lines on stderr of the form
`{"event": "progress", "description": ..., "completed": n, "total": m, "status": ...}` drive a progress bar,
and any other line is shown as the current status. DuckDB allows one writing process, so the caller must
release its own connection before starting the test and reopen it afterwards (see `tui.session`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tui.safe_text import clean


def test_command(store_path: Path, hypothesis_id: int) -> list[str]:
    return [sys.executable, "-m", "engine.cli", "hypothesis", "test", str(store_path), str(hypothesis_id)]


@dataclass(frozen=True)
class ProgressLine:
    completed: float | None
    total: float | None
    status: str


def parse_progress(line: str) -> ProgressLine | None:
    """A progress report from one line of the test's output, or None for a blank line."""
    text = clean(line).strip()
    if not text:
        return None
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and ("completed" in data or "total" in data):

            def number(key: str) -> float | None:
                value = data.get(key)
                return float(value) if isinstance(value, int | float) else None

            status = " ".join(str(data.get(k) or "") for k in ("description", "status")).strip()
            return ProgressLine(number("completed"), number("total"), status)
    return ProgressLine(None, None, text)


@dataclass(frozen=True)
class TestOutcome:
    returncode: int
    tail: list[str]

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run_test(
    command: list[str],
    on_progress: Callable[[ProgressLine], None],
    on_start: Callable[[subprocess.Popen[str]], None] = lambda _: None,
    cwd: Path | None = None,
) -> TestOutcome:
    """Run `command` to completion, reporting each line of its output; returns the exit code and last lines."""
    env = {**os.environ, "RLDIFF_PROGRESS": "jsonl", "NO_COLOR": "1", "TERM": "dumb"}
    tail: deque[str] = deque(maxlen=8)
    try:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=env,
            cwd=cwd,
        )
    except OSError as exc:
        return TestOutcome(127, [f"could not start the test: {exc}"])
    on_start(process)
    assert process.stdout is not None
    for line in process.stdout:
        progress = parse_progress(line)
        if progress is not None:
            if progress.completed is None:
                tail.append(progress.status)
            on_progress(progress)
    return TestOutcome(process.wait(), list(tail))
