"""Read-only SQL for agents: one query, checked before it runs, on a locked-down read-only connection, with a
row cap and a time limit.

Three layers, each enough on its own for the common cases: (1) the text must parse to exactly one SELECT
statement (`SELECT`, `WITH … SELECT`, `FROM …`, `VALUES`, `DESCRIBE`, `SHOW`, `SUMMARIZE`) whose parse tree
holds no INSERT/UPDATE/DELETE (DuckDB parses `WITH t AS (INSERT … RETURNING *) SELECT …` as a SELECT); (2) the
connection is read-only; (3) it has no file system or network access (no COPY TO, ATTACH, read_csv, INSTALL or
LOAD) and its configuration is locked (no SET).

Held-out rows are hidden unless asked for (docs/statistics.md, "No leaks"): `hide_heldout` shadows each table
that holds rows of held-out rollouts with a temporary view of the same name without them (DuckDB resolves an
unqualified name, and `main.NAME`, to the temporary view first), and the check then refuses the two ways
around the views: a table named through the store's catalog (`study.main.segments`) and the table functions
that run SQL text the check cannot see into (`query`, `query_table`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb

from engine.errors import InputError

MAX_ROWS = 1000
MAX_TIMEOUT_S = 60.0
# Settings of the connection agent queries run on (besides read_only).
LOCKED_DOWN: dict[str, Any] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    # DuckDB's default is 80% of RAM, and a sort spills to disk beyond it: one agent query took the server
    # to 5 GB. 1 GB sorts tens of millions of rows; past it the query fails with an out-of-memory error.
    "memory_limit": "1GB",
    "temp_directory": "",
    "max_temp_directory_size": "0B",
    "lock_configuration": True,
}
# The whole result an agent gets, as JSON: whole rows up to this size, then `truncated`. A result much
# larger than this fills the agent's context without telling it more than a narrower query would.
MAX_RESULT_CHARS = 200_000
_POLL_S = 0.05  # how often a running query checks for cancellation
# Query-node types a read may contain; anything else (INSERT_QUERY_NODE, ...) modifies data.
_READ_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"})
_ACCEPTED = "SELECT, WITH … SELECT, FROM …, VALUES, DESCRIBE, SHOW or SUMMARIZE"
# Tables holding rows of held-out rollouts, by what ties a row to its rollout.
_BY_ROLLOUT = ("rollouts", "messages", "segments")
_BY_SEGMENT = ("sentences", "segment_features", "feature_examples", "hypothesis_labels", "user_labels")
_UNTIED = ("llm_cache",)  # LLM responses may quote any split's text and name no rollout: hidden whole
HELDOUT_TABLES = frozenset(_BY_ROLLOUT + _BY_SEGMENT + _UNTIED)
# Table functions that run SQL given as text: the check cannot see which tables they read.
_OPAQUE_FUNCTIONS = frozenset({"query", "query_table"})
_ASK = "held-out rows are hidden from agents' SQL; pass include_heldout=true to read them (logged as a held-out view)"


class QueryRefused(InputError):
    """The text is not a single read-only query."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"refused: {reason}")


class QueryTimeout(InputError):
    """The query ran past its time limit and was interrupted."""


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool  # more rows than the cap
    elapsed_s: float
    deadline: float = 0.0  # time.monotonic() past which serialising the result must stop too
    heldout_tables: frozenset[str] = frozenset()  # tables of HELDOUT_TABLES the query names, held-out rows shown


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _dict_nodes(tree: Any) -> Iterator[dict[str, Any]]:
    """Every object of a parse tree (as `json_serialize_sql` writes it), depth first."""
    if isinstance(tree, dict):
        yield tree
        for value in tree.values():
            yield from _dict_nodes(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _dict_nodes(value)


def _node_types(tree: Any) -> set[str]:
    return {k for node in _dict_nodes(tree) if isinstance(k := node.get("type"), str) and k.endswith("_NODE")}


def _table_refs(tree: Any) -> list[dict[str, Any]]:
    """Every BASE_TABLE and TABLE_FUNCTION node of a parse tree."""
    return [node for node in _dict_nodes(tree) if node.get("type") in ("BASE_TABLE", "TABLE_FUNCTION")]


def _named_heldout_tables(refs: list[dict[str, Any]]) -> frozenset[str]:
    names = (str(ref["table_name"]).lower() for ref in refs if ref["type"] == "BASE_TABLE")
    return frozenset(name for name in names if name in HELDOUT_TABLES)


def _check_hidden(refs: list[dict[str, Any]]) -> None:
    """Refuse the ways around `hide_heldout`'s views: the store's own tables by their catalog, opaque SQL."""
    for ref in refs:
        if ref["type"] == "TABLE_FUNCTION":
            name = str((ref.get("function") or {}).get("function_name", "")).lower()
            if name in _OPAQUE_FUNCTIONS:
                raise QueryRefused(f"{name}() runs SQL text this check cannot read; {_ASK}")
        elif str(ref["table_name"]).lower() in HELDOUT_TABLES and (
            str(ref.get("catalog_name", "")).lower() not in ("", "temp")
            or str(ref.get("schema_name", "")).lower() not in ("", "main", "temp")
        ):
            raise QueryRefused(f"{'.'.join(ref['qualified_name']['path'])} names the store's table itself; {_ASK}")


def hide_heldout(con: duckdb.DuckDBPyConnection) -> None:
    """Shadow each table of HELDOUT_TABLES the store has with a temporary view of its rows outside held-out
    rollouts (a store before its split has no held-out rows: the views then show everything; the LLM cache,
    tied to no rollout, shows nothing)."""
    (db,) = con.execute("SELECT current_database()").fetchall()[0]
    store = '"' + str(db).replace('"', '""') + '".main'
    present = {
        name
        for (name,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main'", [db]
        ).fetchall()
    }
    kept_rollouts = f"SELECT rollout_key FROM {store}.rollouts WHERE split IS DISTINCT FROM 'heldout'"
    kept_segments = f"SELECT segment_id FROM {store}.segments WHERE rollout_key IN ({kept_rollouts})"
    for table in sorted(HELDOUT_TABLES & present):
        if table == "rollouts":
            where = "split IS DISTINCT FROM 'heldout'"
        elif table in _BY_ROLLOUT:
            where = f"rollout_key IN ({kept_rollouts})"
        elif table in _UNTIED:
            where = "false"
        else:
            where = f"segment_id IN ({kept_segments})"
        con.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT * FROM {store}.{table} WHERE {where}")


def check_query(con: duckdb.DuckDBPyConnection, sql: str, heldout_hidden: bool = False) -> frozenset[str]:
    """Raise `QueryRefused` unless `sql` is exactly one statement that only reads (and, when `heldout_hidden`,
    cannot reach around `hide_heldout`'s views). Returns the tables of HELDOUT_TABLES it names."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRefused(f"not valid SQL: {_first_line(exc)}") from exc
    if len(statements) != 1:
        raise QueryRefused(f"send exactly one statement ({_ACCEPTED}); got {len(statements)}")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise QueryRefused(f"only read-only queries are accepted ({_ACCEPTED}); this is a {kind.name} statement")
    raw = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [sql]).fetchall()[0][0]
    tree = json.loads(raw)
    if tree.get("error"):
        raise QueryRefused(f"cannot check this query: {tree.get('error_message', 'unknown error')}")
    writes = sorted(t.removesuffix("_QUERY_NODE") for t in _node_types(tree) - _READ_NODES)
    if writes:
        raise QueryRefused(f"the query contains a data-modifying part ({', '.join(writes)}); only reads are accepted")
    refs = _table_refs(tree)
    if heldout_hidden:
        _check_hidden(refs)
    return _named_heldout_tables(refs)


def run_query(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    max_rows: int,
    timeout_s: float,
    cancel: threading.Event | None = None,
    include_heldout: bool = True,
) -> QueryResult:
    """Check and run `sql` on `con`, keeping at most `max_rows` rows, interrupting it after `timeout_s` or
    once `cancel` is set. The result's `deadline` is when `timeout_s` runs out (serialising counts too).
    Without `include_heldout` the query sees no rows of held-out rollouts (`hide_heldout`).

    `con` should be a read-only connection opened with `LOCKED_DOWN`, for this one query: it is left busy (close
    it after), and hiding held-out rows leaves its views on it.
    """
    if not 1 <= max_rows <= MAX_ROWS:
        raise InputError(f"max_rows must be between 1 and {MAX_ROWS}")
    if not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise InputError(f"timeout_s must be above 0 and at most {MAX_TIMEOUT_S:g}")
    if not include_heldout:
        hide_heldout(con)
    named = check_query(con, sql, heldout_hidden=not include_heldout)
    start = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    finished = threading.Event()
    cancel = cancel or threading.Event()

    def watch() -> None:
        while not finished.wait(_POLL_S):
            if cancel.is_set() or time.monotonic() >= deadline:
                con.interrupt()
                return

    watcher = threading.Thread(target=watch, name="query-watch", daemon=True)
    watcher.start()
    try:
        cur = con.execute(sql)
        rows = cur.fetchmany(max_rows + 1)
        description = cur.description or []
    except duckdb.InterruptException as exc:
        if cancel.is_set():
            raise QueryTimeout("the query was cancelled") from exc
        raise QueryTimeout(
            f"the query ran longer than {timeout_s:g}s and was stopped; narrow it (filters, LIMIT) or raise timeout_s"
        ) from exc
    except duckdb.OutOfMemoryException as exc:
        raise InputError(
            f"the query needs more than the {LOCKED_DOWN['memory_limit']} agent queries get; "
            "narrow it (filters, LIMIT, fewer columns)"
        ) from exc
    except duckdb.Error as exc:
        raise InputError(f"query failed: {_first_line(exc)}") from exc
    finally:
        finished.set()
        watcher.join()
    return QueryResult(
        columns=[d[0] for d in description],
        types=[str(d[1]) for d in description],
        rows=rows[:max_rows],
        truncated=len(rows) > max_rows,
        elapsed_s=time.perf_counter() - start,
        deadline=deadline,
        heldout_tables=named if include_heldout else frozenset(),
    )
