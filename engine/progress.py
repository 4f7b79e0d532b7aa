"""Progress reporting for long work: a Rich bar in the terminal, JSON lines for a program that runs the CLI
(`RLDIFF_PROGRESS=jsonl`, as the TUI does), nothing in tests and libraries."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import (
    Progress as RichProgress,
)


class Advance(Protocol):
    def __call__(self, n: int = 1, *, status: str | None = None) -> None: ...


class Progress(Protocol):
    """Stages report long work through this; `status` carries rates such as 'segments/s'."""

    def track(self, description: str, total: int | None) -> AbstractContextManager[Advance]: ...


class NullProgress:
    """Reports nothing."""

    @contextmanager
    def track(self, description: str, total: int | None) -> Iterator[Advance]:
        yield lambda n=1, *, status=None: None


class RichBar:
    """A Rich progress bar on stderr, one line per tracked piece of work."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)

    @contextmanager
    def track(self, description: str, total: int | None) -> Iterator[Advance]:
        columns = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
        )
        with RichProgress(*columns, console=self.console, transient=False) as bar:
            task = bar.add_task(description, total=total, status="")

            def advance(n: int = 1, *, status: str | None = None) -> None:
                if status is None:
                    bar.update(task, advance=n)
                else:
                    bar.update(task, advance=n, status=status)

            yield advance


class JsonLines:
    """One JSON object a line on `stream` (stdout by default) for a program to read:
    `{"event": "progress", "description": ..., "completed": n, "total": m, "status": ...}`, at most every
    `every_s` seconds while the work runs, and always when it starts and ends."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 0.2) -> None:
        self.stream = stream or sys.stdout
        self.every_s = every_s

    @contextmanager
    def track(self, description: str, total: int | None) -> Iterator[Advance]:
        completed, current, last = 0, "", 0.0

        def emit() -> None:
            nonlocal last
            last = time.monotonic()
            line = {"event": "progress", "description": description, "completed": completed, "total": total}
            self.stream.write(json.dumps({**line, "status": current}) + "\n")
            self.stream.flush()

        def advance(n: int = 1, *, status: str | None = None) -> None:
            nonlocal completed, current
            completed += n
            current = current if status is None else status
            if (total is not None and completed >= total) or time.monotonic() - last >= self.every_s:
                emit()

        emit()
        yield advance


def emit_result(**result: object) -> None:
    """End a command run by a program (`RLDIFF_PROGRESS=jsonl`) with its result as one JSON line
    `{"event": "result", ...}` on stdout, e.g. the id of a hypothesis just added; nothing for a person."""
    if os.environ.get("RLDIFF_PROGRESS") == "jsonl":
        sys.stdout.write(json.dumps({"event": "result", **result}) + "\n")
        sys.stdout.flush()


def for_terminal(console: Console | None = None) -> Progress:
    """JSON lines when `RLDIFF_PROGRESS=jsonl` is set (a program runs the CLI), else a Rich bar on stderr."""
    return JsonLines() if os.environ.get("RLDIFF_PROGRESS") == "jsonl" else RichBar(console)
