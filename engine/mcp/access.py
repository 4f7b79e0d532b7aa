"""How the MCP server reaches its store: a connection per tool call, never held between calls.

DuckDB lets one process write a database file, or several processes read it, never both. An MCP server lives
as long as the agent's session, so holding the store open would block `rldiff analyze` (and the TUI's writes)
for hours. Instead every tool call opens the store for just that call: read-only for reads and SQL,
read-write for the tools that write. While another process is writing (an analysis), or holds the store
while this call would write (the TUI, which keeps it open read-only), a call waits up to `lock_wait_s` and then
fails with a message naming the process. Calls in one server run one at a time: DuckDB refuses a second
connection to the same file with different settings within a process.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import duckdb

from engine.errors import RldiffError, StoreLockedError
from engine.mcp.sql import LOCKED_DOWN
from engine.store import Store
from engine.store.store import lock_holder

log = logging.getLogger(__name__)

T = TypeVar("T")
_RETRY_S = 0.1


class StoreBusy(RldiffError):
    """Another process holds the store's lock for longer than a tool call waits."""


@dataclass(frozen=True)
class Opened:
    """A store opened for one call, and a cursor on it for the typed queries."""

    store: Store
    con: duckdb.DuckDBPyConnection


def _holder(exc: BaseException) -> str:
    """' (locked by process n (its command))' from DuckDB's lock error."""
    return f" ({lock_holder(exc)})"


def _is_lock_error(exc: BaseException) -> bool:
    return isinstance(exc, StoreLockedError) or (isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower())


class StoreAccess:
    """Opens `path` for one tool call at a time."""

    def __init__(self, path: str | Path, *, lock_wait_s: float) -> None:
        self.path = Path(path)
        self.lock_wait_s = lock_wait_s
        self._one_call = threading.Lock()

    def _open(self, opener: Callable[[], T], writing: bool) -> T:
        deadline = time.monotonic() + self.lock_wait_s
        while True:
            try:
                return opener()
            except (StoreLockedError, duckdb.IOException) as exc:
                if not _is_lock_error(exc):
                    raise RldiffError(f"{self.path}: cannot open store: {exc}") from exc
                if time.monotonic() < deadline:
                    log.debug("%s is locked%s; waiting", self.path, _holder(exc))
                    time.sleep(_RETRY_S)
                    continue
                if writing:
                    raise StoreBusy(
                        f"{self.path} is open in another process{_holder(exc)}, and writing needs sole access: "
                        "close the process named (or wait for `rldiff analyze` to finish) and call again"
                    ) from exc
                raise StoreBusy(
                    f"{self.path} is being written by another process{_holder(exc)}: call again when it is done"
                ) from exc

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        """This call's turn at the store: waits up to `lock_wait_s` for the call before it (a long hypothesis
        test, a slow query), then says so rather than queue behind it."""
        if not self._one_call.acquire(timeout=self.lock_wait_s):
            raise StoreBusy(
                f"{self.path}: another tool call of this server (a hypothesis test or a slow query) is still "
                "using the store; call again in a few seconds"
            )
        try:
            yield
        finally:
            self._one_call.release()

    @contextlib.contextmanager
    def _opened(self, read_only: bool) -> Iterator[Opened]:
        if not self.path.exists():
            raise RldiffError(f"{self.path}: no such store")
        with self._turn():
            store = self._open(lambda: Store(self.path, read_only=read_only), writing=not read_only)
            try:
                con = store.cursor()
                try:
                    yield Opened(store, con)
                finally:
                    con.close()
            finally:
                store.close()

    def reading(self) -> contextlib.AbstractContextManager[Opened]:
        """The store opened read-only for one call."""
        return self._opened(read_only=True)

    def writing(self) -> contextlib.AbstractContextManager[Opened]:
        """The store opened read-write for one call (tools whose names say they write)."""
        return self._opened(read_only=False)

    @contextlib.contextmanager
    def querying(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection without file system access or changeable settings, for agents' SQL."""
        if not self.path.exists():
            raise RldiffError(f"{self.path}: no such store")
        with self._turn():
            con = self._open(
                lambda: duckdb.connect(str(self.path), read_only=True, config=dict(LOCKED_DOWN)), writing=False
            )
            try:
                yield con
            finally:
                con.close()
