"""The TUI's one connection to the study store, shared by worker threads, and what to do when it is locked.

DuckDB lets one process write a database file, or several processes read it, never both. So:
- the TUI keeps the store open *read-only*, so a second TUI or the MCP server can read it too, and opens it
  read-write only for the moment of a write (`writer()`);
- it checks on opening whether it could write: if another process holds the store (a second TUI, the MCP
  server), it says so, naming the process, disables writes and keeps checking;
- if another process is writing (an analysis), it cannot even read: it shows that, naming the process, and
  keeps trying;
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


class _Locked(RldiffError):
    """Another process is writing the store: it cannot even be read (the message says who)."""


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
        """Open read-only, after checking that a write would be possible now; report what happened. Never
        raises. Called again while read-only or locked, it checks again."""
        from engine.store import StoreSchemaError

        with self._swap():
            if self._store is not None and self._status.writable:
                return self._status
            if not self.path.exists():
                return self._set(StoreStatus("failed", f"{self.path}: no such store"))
            if self._store is not None:  # read-only now: close, to see whether we could write
                self._store.close()
                self._store = None
            why = self._could_write()
            try:
                self._store = self._read_only()
            except StoreSchemaError as exc:
                return self._set(StoreStatus("failed", str(exc)))
            except _Locked as exc:
                return self._set(self._locked(exc))
            except RldiffError as exc:
                return self._set(StoreStatus("failed", str(exc)))
            if why is None:
                return self._set(StoreStatus("read-write"))
            return self._set(StoreStatus("read-only", f"read-only: {why}; writes are disabled, retrying…"))

    def _could_write(self) -> str | None:
        """None when the store opens read-write now (which also migrates an older schema and sweeps what a
        killed writer left), else why not."""
        from engine.errors import StoreLockedError
        from engine.store import Store, StoreSchemaError

        try:
            Store(self.path).close()
        except StoreSchemaError as exc:
            return str(exc)
        except StoreLockedError as exc:
            return str(exc).removeprefix(f"{self.path}: ")
        except RldiffError as exc:  # e.g. no write permission
            return str(exc)
        return None

    def _read_only(self) -> Store:
        from engine.errors import StoreLockedError
        from engine.store import Store

        try:
            return Store(self.path, read_only=True)
        except StoreLockedError as exc:
            raise _Locked(str(exc).removeprefix(f"{self.path}: ")) from exc

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
        """A cursor on the store opened read-write for one small write (reads wait meanwhile); StoreReadOnly
        when writes are disabled or another process holds the store now (the message names it)."""
        from engine.store import Store

        if not self._status.writable:
            raise StoreReadOnly(self._status.message or "the store is read-only")
        with self._swap():
            if self._store is not None:
                self._store.close()
                self._store = None
            try:
                store = Store(self.path)
            except RldiffError as exc:  # held by another process now, or no longer writable
                self._reopen()
                raise StoreReadOnly(f"not saved: {str(exc).removeprefix(f'{self.path}: ')}") from exc
            try:
                cur = store.cursor()
                try:
                    yield cur
                finally:
                    cur.close()
            finally:
                store.close()
                self._reopen()

    def _reopen(self) -> None:
        """Back to read-only after a write (inside `_swap`); a failure is the new status."""
        try:
            self._store = self._read_only()
        except _Locked as exc:
            self._set(self._locked(exc))
        except RldiffError as exc:
            self._set(StoreStatus("failed", str(exc)))

    def _locked(self, exc: _Locked) -> StoreStatus:
        return StoreStatus("locked", f"{self.path.name} is being written: {exc}; retrying…")

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
