"""Progress reporting for long work: a Rich bar in the terminal, nothing in tests and libraries."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

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
                bar.update(task, advance=n, **({"status": status} if status is not None else {}))

            yield advance
