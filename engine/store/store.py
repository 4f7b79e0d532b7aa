"""One DuckDB file holds a study. `Store` opens it, applies the schema and wraps bulk writes and reads."""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from engine import safe_text
from engine.errors import InputError, RldiffError, StoreLockedError
from engine.store.queries.study import checkpoint_names, meta_value

if TYPE_CHECKING:  # polars and pyarrow load on first use: the TUI opens a store long before it needs them
    import polars as pl
    import pyarrow as pa

log = logging.getLogger(__name__)

SCHEMA_VERSION = 6
# Bytes 8-11 of every DuckDB database file (after an 8-byte checksum).
_DUCKDB_MAGIC = (8, b"DUCK")
_STAGING = ".{}.staging-"  # prefix of the scratch databases `Store.staging` makes beside the store


def _add_columns(table: str, columns: str) -> str:
    """`ALTER TABLE ... ADD COLUMN IF NOT EXISTS` for each "name TYPE" in a comma-separated list."""
    return "".join(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {c.strip()}; " for c in columns.split(","))


# version -> SQL that upgrades a store from version-1 to version (idempotent: a store made new has it all).
MIGRATIONS: dict[int, str] = {
    2: _add_columns(
        "rollouts",
        "termination_reason VARCHAR, error VARCHAR, timed_out BOOLEAN, tokens BIGINT, cost_usd DOUBLE, model VARCHAR",
    ),
    3: _add_columns("feature_deltas", "family VARCHAR, pooled_before DOUBLE, pooled_after DOUBLE, min_p DOUBLE")
    + "CREATE TABLE IF NOT EXISTS heldout_tests (statement VARCHAR NOT NULL, spec VARCHAR NOT NULL, "
    "p_value DOUBLE, tested_at TIMESTAMP NOT NULL, PRIMARY KEY (statement, spec));",
    4: "CREATE TABLE IF NOT EXISTS sentences (sentence_id BIGINT PRIMARY KEY, segment_id BIGINT NOT NULL, "
    "sentence_index INTEGER NOT NULL, char_start INTEGER NOT NULL, char_end INTEGER NOT NULL, text VARCHAR NOT NULL);",
    5: _add_columns("hypotheses", "exploratory BOOLEAN")
    + "CREATE TABLE IF NOT EXISTS heldout_views (viewed_at TIMESTAMP NOT NULL, via VARCHAR NOT NULL, "
    "hypothesis_id INTEGER);"
    "CREATE TABLE IF NOT EXISTS hypothesis_calibrations (hypothesis_id INTEGER PRIMARY KEY, result JSON NOT NULL, "
    "computed_at TIMESTAMP NOT NULL);",
    6: "CREATE TABLE IF NOT EXISTS feature_kind_labels (feature_id BIGINT NOT NULL, kind VARCHAR NOT NULL, "
    "label VARCHAR NOT NULL, PRIMARY KEY (feature_id, kind));",
}


class StoreSchemaError(RldiffError):
    """The store was written by an incompatible version of rldiff."""


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _check_is_database(path: Path) -> None:
    """Refuse an existing file that is not a DuckDB database (DuckDB would open e.g. a `.jsonl` path as an
    in-memory database and save nothing)."""
    if not path.is_file():
        return
    offset, magic = _DUCKDB_MAGIC
    try:
        with path.open("rb") as handle:
            head = handle.read(offset + len(magic))
    except OSError as exc:
        raise InputError(f"{path}: cannot read store: {exc.strerror or exc}") from exc
    if head[offset:] != magic:
        raise InputError(f"{path}: not an rldiff store (not a DuckDB database file)")


def lock_holder(exc: BaseException) -> str:
    """Who holds the store's lock, from DuckDB's lock error: the process id and, where the system says, its
    command line (e.g. `rldiff tui` left open)."""
    match = re.search(r"PID (\d+)", str(exc.__cause__ or exc))
    if not match:
        return "locked by another process"
    pid = match.group(1)
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        command = " ".join(a.decode(errors="replace") for a in argv if a)
    except OSError:
        command = ""
    shown = re.sub(r"^\S*python[\d.]*\s+(?:-m\s+)?", "", command)  # `python -m engine.cli tui` -> the command
    return f"locked by PID {pid}" + (f" ({safe_text.line(shown, 120)})" if shown else "")


def _schema_sql() -> str:
    return resources.files("engine.store").joinpath("schema.sql").read_text(encoding="utf-8")


class Store:
    """A study store. Use as a context manager; one instance per process, a cursor per thread."""

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if read_only and not self.path.exists():
            raise RldiffError(f"{self.path}: no such store")
        _check_is_database(self.path)
        try:
            self._con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise StoreLockedError(f"{self.path}: {lock_holder(exc)}") from exc
            raise InputError(f"{self.path}: cannot open store: {_first_line(exc)}") from exc
        except duckdb.ConnectionException as exc:  # this process still has it open with the other mode
            raise RldiffError(f"{self.path}: already open in this process: {_first_line(exc)}") from exc
        self._check_schema()
        if not read_only:
            self._sweep_staging()

    # -- lifecycle -----------------------------------------------------------------------------------------

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._con.close()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of its own for a worker thread (DuckDB connections are not shared across threads)."""
        return self._con.cursor()

    def _sweep_staging(self) -> None:
        """Remove scratch databases a killed writer left (holding the write lock proves none is in use)."""
        for leftover in self.path.parent.glob(_STAGING.format(self.path.name) + "*"):
            log.info("removing %s, left by an interrupted write", leftover)
            leftover.unlink(missing_ok=True)

    def _check_schema(self) -> None:
        has_meta = self.scalar("SELECT count(*) FROM information_schema.tables WHERE table_name = 'meta'")
        version = None
        if has_meta:
            value = self.scalar("SELECT value FROM meta WHERE key = 'schema_version'")
            version = int(value) if value is not None else None
        if version is None:
            if self.read_only:
                raise StoreSchemaError(f"{self.path}: not an rldiff store (no schema version)")
            with self.transaction():
                self._con.execute(_schema_sql())
                self._con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            return
        if version > SCHEMA_VERSION:
            raise StoreSchemaError(
                f"{self.path}: store schema version {version} is newer than this rldiff supports "
                f"({SCHEMA_VERSION}); upgrade rldiff"
            )
        if version < SCHEMA_VERSION:
            if self.read_only:
                raise StoreSchemaError(
                    f"{self.path}: store schema version {version} is older than {SCHEMA_VERSION}; "
                    "open it once read-write (any rldiff command) to migrate it"
                )
            with self.transaction():
                for target in range(version + 1, SCHEMA_VERSION + 1):
                    log.info("migrating %s to schema version %d", self.path, target)
                    self._con.execute(MIGRATIONS[target])
                self._con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])

    # -- writes ----------------------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """All or nothing: on any exception the store is left exactly as before."""
        self._con.execute("BEGIN TRANSACTION")
        try:
            yield self._con
        except BaseException:
            self._con.execute("ROLLBACK")
            raise
        self._con.execute("COMMIT")

    @contextmanager
    def staging(self, tables: tuple[str, ...]) -> Iterator[str]:
        """A scratch database beside the store with empty copies of `tables`; yields its schema name.

        Large writes go there in small auto-committed batches (flat memory), then move into the store in one
        short transaction: a big DuckDB transaction would otherwise hold every uncommitted row in memory.
        The scratch file is removed whatever happens.
        """
        fd, name = tempfile.mkstemp(prefix=_STAGING.format(self.path.name), suffix=".duckdb", dir=self.path.parent)
        os.close(fd)
        scratch = Path(name)
        scratch.unlink()
        quoted = str(scratch).replace("'", "''")
        self._con.execute(f"ATTACH '{quoted}' AS staging")
        try:
            for table in tables:
                self._con.execute(f"CREATE TABLE staging.{table} AS SELECT * FROM main.{table} LIMIT 0")
            yield "staging"
        finally:
            self._con.execute("DETACH staging")
            for leftover in (scratch, scratch.with_name(scratch.name + ".wal")):
                leftover.unlink(missing_ok=True)

    def append(self, table: str, rows: pl.DataFrame | pa.Table) -> int:
        """Bulk-insert rows by column name (missing columns get their defaults). Returns the row count."""
        arrow = rows if hasattr(rows, "num_rows") else rows.to_arrow()  # an Arrow table, or a polars frame
        if arrow.num_rows == 0:
            return 0
        view = f"_append_{table.replace('.', '_')}"
        self._con.register(view, arrow)
        try:
            self._con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {view}")
        finally:
            self._con.unregister(view)
        return arrow.num_rows

    def publish_staged(self, staging: str, tables: tuple[str, ...]) -> int:
        """Move the rows of `tables` staged in `staging` (`Store.staging`) into the store; call it inside a
        transaction. Returns the rows moved."""
        moved = 0
        for table in tables:
            moved += int(self.scalar(f"INSERT INTO main.{table} BY NAME SELECT * FROM {staging}.{table}"))
        return moved

    def replace(self, tables: dict[str, pl.DataFrame | pa.Table]) -> None:
        """Replace the whole contents of each table by its rows, in one transaction (tables that refer to
        others come after them: they are cleared first and filled last)."""
        with self.transaction():
            for table in reversed(tables):
                self._con.execute(f"DELETE FROM {table}")
            for table, rows in tables.items():
                self.append(table, rows)

    @contextmanager
    def temp_table(self, name: str, rows: pl.DataFrame) -> Iterator[str]:
        """`rows` as a temporary table on the store's connection (for a stage's own query to join); dropped on
        exit. Yields its name."""
        view = f"_temp_{name}"
        self._con.register(view, rows.to_arrow())
        try:
            self._con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM {view}")
        finally:
            self._con.unregister(view)
        try:
            yield name
        finally:
            self._con.execute(f"DROP TABLE IF EXISTS temp.{name}")

    @contextmanager
    def shadowed(self, tables: tuple[str, ...]) -> Iterator[None]:
        """Empty temporary copies of `tables` that shadow the stored ones on this connection (DuckDB resolves
        unqualified names to temporary tables first), for a reader to run on other rows; dropped on exit."""
        database = '"' + str(self.scalar("SELECT current_database()")).replace('"', '""') + '"'
        try:
            for table in tables:
                self._con.execute(
                    f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT * FROM {database}.main.{table} LIMIT 0"
                )
            yield
        finally:
            for table in tables:
                self._con.execute(f"DROP TABLE IF EXISTS temp.{table}")

    def set_rollout_column(self, column: str, rows: pl.DataFrame) -> None:
        """Set `rollouts.column` from `rows` (rollout_key and `column`) in one statement; other rollouts keep theirs."""
        view = f"_set_rollouts_{column}"
        self._con.register(view, rows.select("rollout_key", column).to_arrow())
        try:
            self._con.execute(
                f"UPDATE rollouts SET {column} = v.{column} FROM {view} v WHERE rollouts.rollout_key = v.rollout_key"
            )
        finally:
            self._con.unregister(view)

    def set_meta(self, key: str, value: str) -> None:
        """Set one `meta` entry."""
        self._con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])

    def execute(self, sql: str, params: list[Any] | None = None) -> duckdb.DuckDBPyConnection:
        """Run one statement on the store's connection (used by engine modules; the TUI uses cursors)."""
        return self._con.execute(sql, params or [])

    def next_id(self, table: str, column: str) -> int:
        """The next free integer id of `table.column` (ids are assigned in bulk by the single writer)."""
        return int(self.scalar(f"SELECT coalesce(max({column}) + 1, 0) FROM {table}"))

    # -- reads -----------------------------------------------------------------------------------------

    def frame(self, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
        """A query's result as a polars DataFrame."""
        return self._con.sql(sql, params=params or None).pl()

    def scalar(self, sql: str, params: list[Any] | None = None) -> Any:
        """The first column of the first row, or None. (DuckDB 2 keeps a connection busy until a result is
        fetched to the end, so never leave a `fetchone()` half-read on the shared connection.)"""
        rows = self._con.execute(sql, params or []).fetchall()
        return rows[0][0] if rows else None

    def meta(self, key: str) -> str | None:
        """One `meta` entry, or None."""
        return meta_value(self, key)

    def checkpoints(self) -> list[str]:
        """Checkpoint names in the order they were first ingested."""
        return checkpoint_names(self)
