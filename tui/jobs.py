"""The app's background jobs, each a CLI subprocess so that the TUI never imports the ledger, the LLM client or
the models: adding and testing hypotheses (`rldiff hypothesis add|test`) and the A/A check (`rldiff check-null`).

DuckDB allows one writing process: a job releases the app's store connection while it runs and reopens it after
(`tui.session`). Progress comes back as JSON lines (`tui.hypothesis_runner`).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from textual.app import App
from textual.reactive import reactive

from tui.hypothesis_runner import (
    NewHypothesis,
    ProgressLine,
    add_command,
    null_check_command,
    run_command,
    run_job,
    test_command,
)
from tui.messages import HypothesisTestFinished, HypothesisTestProgress, StoreStatusChanged
from tui.session import StoreSession, StoreStatus


@dataclass(frozen=True)
class HypothesisTestState:
    """A hypothesis being added or tested (or just done) in a subprocess; no id yet while being added."""

    hypothesis_id: int | None
    completed: float | None = None
    total: float | None = None
    status: str = "starting…"
    finished: bool = False
    ok: bool = False


class JobRunner(App[None]):
    """The part of the app that runs jobs; `tui.app.RldiffApp` is one."""

    store_status: reactive[StoreStatus] = reactive(StoreStatus("opening"), always_update=True)
    hypothesis_test: reactive[HypothesisTestState | None] = reactive(None)

    def __init__(self, session: StoreSession) -> None:
        super().__init__()
        self.session = session
        self._job_process: subprocess.Popen[str] | None = None
        self._null_check_running = False
        self._closing = False

    # -- adding and testing hypotheses in subprocesses ------------------------------------------------------

    def start_hypothesis_test(self, hypothesis_id: int, command: list[str] | None = None) -> bool:
        """Test a hypothesis in the background (`rldiff hypothesis test`, or `command`). False if refused."""
        test = (lambda _: command) if command else partial(test_command, self.session.path)
        return self._start_job(hypothesis_id, None, test)

    def add_hypothesis(self, new: NewHypothesis) -> bool:
        """Add the user's hypothesis with `rldiff hypothesis add` (the same checks and spec), then test it
        when asked to, in the background. False if refused."""
        return self._start_job(
            None, add_command(self.session.path, new), partial(test_command, self.session.path) if new.test else None
        )

    def _start_job(
        self, hypothesis_id: int | None, add: list[str] | None, test: Callable[[int], list[str]] | None
    ) -> bool:
        running = self.hypothesis_test
        if running is not None and not running.finished:
            self.notify("a hypothesis is still being added or tested; wait for it", severity="warning")
            return False
        if not self.store_status.writable:
            self.notify(f"not now: {self.store_status.message or 'the store is not writable'}", severity="warning")
            return False
        self.hypothesis_test = HypothesisTestState(hypothesis_id, status="adding…" if add else "starting…")
        self.run_worker(
            partial(self._job_thread, hypothesis_id, add, test),
            thread=True,
            group="hypothesis-job",
            exit_on_error=False,
        )
        return True

    def _job_thread(
        self, hypothesis_id: int | None, add: list[str] | None, test: Callable[[int], list[str]] | None
    ) -> None:
        """Release the store, run the commands (they need the write lock), reopen the store."""
        self.session.release(
            "a hypothesis is being added or tested in the background; it holds the store until it finishes"
        )
        self.post_message(StoreStatusChanged(self.session.status))

        def progress(hid: int | None, line: ProgressLine) -> None:
            self.post_message(HypothesisTestProgress(hid, line.completed, line.total, line.status))

        try:
            result = run_job(
                add=add,
                test=test,
                hypothesis_id=hypothesis_id,
                on_progress=progress,
                on_start=partial(setattr, self, "_job_process"),
            )
        finally:
            self._job_process = None
            if not self._closing:
                self.post_message(StoreStatusChanged(self.session.open()))
        self.post_message(HypothesisTestFinished(result.hypothesis_id, result.ok, result.message))

    def on_hypothesis_test_progress(self, message: HypothesisTestProgress) -> None:
        if self.hypothesis_test is not None:
            self.hypothesis_test = replace(
                self.hypothesis_test,
                hypothesis_id=message.hypothesis_id,
                completed=message.completed if message.completed is not None else self.hypothesis_test.completed,
                total=message.total if message.total is not None else self.hypothesis_test.total,
                status=message.status,
            )

    def on_hypothesis_test_finished(self, message: HypothesisTestFinished) -> None:
        self.hypothesis_test = HypothesisTestState(
            message.hypothesis_id, status=message.message, finished=True, ok=message.ok
        )
        what = "hypothesis" if message.hypothesis_id is None else f"hypothesis {message.hypothesis_id}"
        self.notify(
            f"{what}: {message.message}" if message.ok else f"{what}: failed: {message.message}",
            severity="information" if message.ok else "error",
            timeout=8,
        )

    # -- the A/A check ---------------------------------------------------------------------------------------

    def action_check_null(self) -> None:
        """Run `rldiff check-null` on this study in a subprocess; the verdict comes back as a notification."""
        if self._null_check_running:
            self.notify("the A/A check is already running", severity="warning")
            return
        self._null_check_running = True
        self.notify("A/A check started: the first checkpoint, split within each task, analysed offline", timeout=6)
        self.run_worker(self._null_check_thread, thread=True, group="null-check", exit_on_error=False)

    def _null_check_thread(self) -> None:
        """Release the store while the subprocess copies the checkpoint; reopen it once its analysis starts."""
        work = Path(tempfile.mkdtemp(prefix="rldiff-null-")) / "null.duckdb"
        self.session.release("the A/A check is copying this study's rollouts; the store is back in a moment")
        self.post_message(StoreStatusChanged(self.session.status))
        reopened = False

        def progress(line: ProgressLine) -> None:
            nonlocal reopened
            if not reopened and line.completed is not None:  # progress comes from the analysis: copy done
                reopened = True
                self.post_message(StoreStatusChanged(self.session.open()))

        try:
            outcome = run_command(null_check_command(self.session.path, work), progress)
        finally:
            self._null_check_running = False
            if not reopened and not self._closing:
                self.post_message(StoreStatusChanged(self.session.open()))
        verdict = " ".join(outcome.tail[-2:]) if outcome.ok else f"failed: {outcome.failure}"
        self.call_from_thread(
            self.notify, f"A/A check: {verdict}", severity="information" if outcome.ok else "error", timeout=20
        )

    def stop_jobs(self) -> None:
        """On quitting: no job reopens the store, a running subprocess is terminated."""
        self._closing = True
        if self._job_process is not None and self._job_process.poll() is None:
            self._job_process.terminate()
