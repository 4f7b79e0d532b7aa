"""Adding and testing hypotheses in subprocesses, so the TUI never imports the ledger or the LLM client.

The TUI runs the CLI itself, `python -m engine.cli hypothesis add|test ...` (what `rldiff hypothesis ...`
runs), with `RLDIFF_PROGRESS=jsonl` in its environment: progress lines on its output of the form
`{"event": "progress", "description": ..., "completed": n, "total": m, "status": ...}` drive a progress bar,
a last `{"event": "result", ...}` line carries the command's result (the id of a hypothesis it added), and any
other line is shown as the current status. DuckDB allows one writing process, so the caller releases
its own connection before `run_job` and reopens it afterwards (see `tui.session` and `tui.app`).
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

from engine.safe_text import clean

CLI = [sys.executable, "-m", "engine.cli", "hypothesis"]


@dataclass(frozen=True)
class NewHypothesis:
    """What `rldiff hypothesis add` takes: a statement, a direction, and a regex or exemplar sentences (with a
    kind), or a judge question."""

    statement: str
    direction: str
    pattern: str | None
    kind: str | None
    judge: str | None
    test: bool
    like: tuple[str, ...] = ()
    min_similarity: float | None = None


def null_check_command(store_path: Path, work: Path) -> list[str]:
    """`rldiff check-null` on the study's first checkpoint, offline, into the pseudo-study at `work`."""
    return [sys.executable, "-m", "engine.cli", "check-null", str(store_path), "--store", str(work), "--llm", "none"]


def test_command(store_path: Path, hypothesis_id: int) -> list[str]:
    return [*CLI, "test", str(store_path), str(hypothesis_id)]


def add_command(store_path: Path, new: NewHypothesis) -> list[str]:
    command = [*CLI, "add", str(store_path), new.statement, "--direction", new.direction]
    if new.pattern is not None:
        command += ["--pattern", new.pattern]
    if new.judge is not None:
        command += ["--judge", new.judge]
    for sentence in new.like:
        command += ["--like", sentence]
    if new.min_similarity is not None:
        command += ["--min-similarity", str(new.min_similarity)]
    if new.kind is not None:
        command += ["--kind", new.kind]
    return command


@dataclass(frozen=True)
class ProgressLine:
    completed: float | None
    total: float | None
    status: str


def _event(text: str) -> dict[str, object] | None:
    """The JSON object on a line the command wrote for a program, or None."""
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def parse_result(line: str) -> dict[str, object] | None:
    """The command's result from its `{"event": "result", ...}` line, or None for any other line."""
    data = _event(line.strip())
    return data if data is not None and data.get("event") == "result" else None


def parse_progress(line: str) -> ProgressLine | None:
    """A progress report from one line of a command's output, or None for a blank line."""
    text = clean(line).strip()
    if not text:
        return None
    data = _event(text)
    if data is not None and ("completed" in data or "total" in data):

        def number(key: str) -> float | None:
            value = data.get(key)
            return float(value) if isinstance(value, int | float) else None

        status = " ".join(str(data.get(k) or "") for k in ("description", "status")).strip()
        return ProgressLine(number("completed"), number("total"), status)
    return ProgressLine(None, None, text)


@dataclass(frozen=True)
class Outcome:
    returncode: int
    tail: list[str]  # the last lines of text it printed
    result: dict[str, object] | None = None  # from its result line, if it wrote one

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def failure(self) -> str:
        return self.tail[-1] if self.tail else f"exit code {self.returncode}"


Progress = Callable[[ProgressLine], None]
Started = Callable[[subprocess.Popen[str]], None]


def run_command(command: list[str], on_progress: Progress, on_start: Started = lambda _: None) -> Outcome:
    """Run `command` to completion, reporting each line of its output; returns the exit code and last lines."""
    env = {**os.environ, "RLDIFF_PROGRESS": "jsonl", "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"}
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
        )
    except OSError as exc:
        return Outcome(127, [f"could not start {command[0]}: {exc}"])
    on_start(process)
    assert process.stdout is not None
    result = None
    for line in process.stdout:
        if (found := parse_result(line)) is not None:
            result = found
            continue
        progress = parse_progress(line)
        if progress is not None:
            if progress.completed is None:
                tail.append(progress.status)
            on_progress(progress)
    return Outcome(process.wait(), list(tail), result)


@dataclass(frozen=True)
class JobResult:
    hypothesis_id: int | None
    ok: bool
    message: str


def run_job(
    *,
    add: list[str] | None,
    test: Callable[[int], list[str]] | None,
    hypothesis_id: int | None,
    on_progress: Callable[[int | None, ProgressLine], None],
    on_start: Started,
) -> JobResult:
    """Add a hypothesis (when `add`), then test it or `hypothesis_id` (when `test`); stop at the first failure."""
    if add is not None:
        outcome = run_command(add, lambda line: on_progress(None, line), on_start)
        added = (outcome.result or {}).get("hypothesis_id")
        if not outcome.ok or not isinstance(added, int):
            return JobResult(None, False, outcome.failure)
        hypothesis_id = added
    assert hypothesis_id is not None
    if test is None:
        return JobResult(hypothesis_id, True, "added")
    outcome = run_command(test(hypothesis_id), lambda line: on_progress(hypothesis_id, line), on_start)
    return JobResult(hypothesis_id, outcome.ok, "tested" if outcome.ok else outcome.failure)
