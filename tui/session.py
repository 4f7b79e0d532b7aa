"""The TUI's one connection to the study store, shared by worker threads, and what to do when it is locked.

DuckDB lets one process write a database file, or several processes read it, never both. So:
- the TUI opens the store read-write when it can;
- if another process holds it read-only (a second TUI, the MCP server), it opens read-only, disables writes
  and keeps trying to get write access;
- if another process is writing (an analysis), it cannot even read: it shows that and keeps trying;
- to run a hypothesis test in a subprocess it *releases* the store (waits for running queries, closes) and
  reopens it when the subprocess ends.
Queries take a cursor of their own (`cursor()`), so any worker thread may run one; a cursor is never handed
out while the connection is being swapped. All methods that open or close block: call them from a worker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from engine.errors import RldiffError

if TYPE_CHECKING:
    import duckdb

    from engine.store import Store

log = logging.getLogger(__name__)

Mode = Literal["opening", "read-write", "read-only", "locked", "busy", "failed"]


class StoreUnavailable(RldiffError):
    """The store cannot be read right now (locked by another process, released, or failed to open)."""


class StoreReadOnly(RldiffError):
    """A write was asked for while the store is open read-only."""


@dataclass(frozen=True)
class StoreStatus:
    """What the TUI can do with the store now, and a message for the user when it cannot do everything."""

    mode: Mode
    message: str = ""

    @property
    def readable(self) -> bool:
        return self.mode in ("read-write", "read-only")

    @property
    def writable(self) -> bool:
        return self.mode == "read-write"

    @property
    def retry(self) -> bool:
        """Whether trying to open again may improve things."""
        return self.mode in ("read-only", "locked")


class StoreSession:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._store: Store | None = None
        self._status = StoreStatus("opening", f"opening {self.path.name}…")
        self._cond = threading.Condition()
        self._active = 0
        self._swapping = False

    @property
    def status(self) -> StoreStatus:
        return self._status

    # -- opening and closing (blocking) ------------------------------------------------------------------

    def open(self) -> StoreStatus:
        """Open (or upgrade to) read-write if possible, else read-only; report what happened. Never raises."""
        from engine.errors import StoreLockedError
        from engine.store import Store, StoreSchemaError

        with self._swap():
            if self._store is not None and self._status.writable:
                return self._status
            if not self.path.exists():
                return self._set(StoreStatus("failed", f"{self.path}: no such store"))
            previous = self._store
            if previous is not None:  # read-only now: try to upgrade, fall back to read-only again
                previous.close()
                self._store = None
            try:
                self._store = Store(self.path)
                return self._set(StoreStatus("read-write"))
            except StoreSchemaError as exc:
                return self._set(StoreStatus("failed", str(exc)))
            except StoreLockedError:
                why = "another process holds the store (an analysis, the MCP server or another TUI)"
            except RldiffError as exc:  # e.g. no write permission
                why = str(exc)
            try:
                self._store = Store(self.path, read_only=True)
            except StoreSchemaError as exc:
                return self._set(StoreStatus("failed", str(exc)))
            except StoreLockedError:
                return self._set(
                    StoreStatus("locked", f"{self.path.name} is being written by another process; retrying…")
                )
            except RldiffError as exc:
                return self._set(StoreStatus("failed", str(exc)))
            return self._set(StoreStatus("read-only", f"read-only: {why}; writes are disabled, retrying…"))

    def release(self, reason: str) -> None:
        """Close the store so another process can write it; reads fail with `reason` until `open()`."""
        with self._swap():
            if self._store is not None:
                self._store.close()
                self._store = None
            self._set(StoreStatus("busy", reason))

    def close(self) -> None:
        self.release("closed")

    # -- use ---------------------------------------------------------------------------------------------

    @contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of this thread's own for reading; StoreUnavailable when the store cannot be read."""
        with self._cond:
            while self._swapping:
                self._cond.wait()
            if self._store is None or not self._status.readable:
                raise StoreUnavailable(self._status.message or "the store is not open")
            cur = self._store.cursor()
            self._active += 1
        try:
            yield cur
        finally:
            cur.close()
            with self._cond:
                self._active -= 1
                self._cond.notify_all()

    @contextmanager
    def writer(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor for a small write; StoreReadOnly when writes are disabled."""
        if not self._status.writable:
            raise StoreReadOnly(self._status.message or "the store is read-only")
        with self.cursor() as cur:
            yield cur

    # -- internals ---------------------------------------------------------------------------------------

    @contextmanager
    def _swap(self) -> Iterator[None]:
        """Exclusive access to the connection: wait for running queries, hold off new ones."""
        with self._cond:
            while self._swapping:
                self._cond.wait()
            self._swapping = True
            while self._active:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._swapping = False
                self._cond.notify_all()

    def _set(self, status: StoreStatus) -> StoreStatus:
        if status != self._status:
            log.info("store %s: %s %s", self.path, status.mode, status.message)
        self._status = status
        return status
