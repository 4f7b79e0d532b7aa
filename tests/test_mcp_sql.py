"""The read-only SQL tool: every layer of the guard on its own, through the MCP tool, row caps and time limits."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from mcp import Client

from engine.errors import InputError
from engine.mcp.sql import HELDOUT_TABLES, LOCKED_DOWN, QueryRefused, QueryTimeout, check_query, run_query
from engine.mcp_server import build_server

WRITES = [
    "SELECT 1; DROP TABLE rollouts",
    "SELECT count(*) FROM rollouts; DELETE FROM rollouts",
    "DROP TABLE rollouts",
    "DELETE FROM hypotheses",
    "UPDATE hypotheses SET decision = 'accepted'",
    "INSERT INTO checkpoints VALUES ('x', 9, now())",
    "CREATE TABLE x AS SELECT 1",
    "CREATE TEMP TABLE x AS SELECT 1",
    "CREATE VIEW v AS SELECT 1",
    "COPY rollouts TO '/tmp/rldiff-mcp-leak.csv'",
    "COPY (SELECT * FROM rollouts) TO '/tmp/rldiff-mcp-leak.parquet' (FORMAT parquet)",
    "EXPORT DATABASE '/tmp/rldiff-mcp-export'",
    "ATTACH '/tmp/rldiff-mcp-other.duckdb' AS other",
    "DETACH study",
    "INSTALL httpfs",
    "LOAD httpfs",
    "PRAGMA enable_profiling",
    "SET threads = 1",
    "RESET threads",
    "USE memory",
    "BEGIN TRANSACTION",
    "CHECKPOINT",
    "CALL pragma_version()",
    "EXPLAIN SELECT 1",
    "PIVOT features ON source",
    "WITH t AS (INSERT INTO checkpoints VALUES ('x', 9, now()) RETURNING *) SELECT * FROM t",
    "WITH t AS (DELETE FROM rollouts RETURNING *) SELECT count(*) FROM t",
    "WITH a AS (SELECT 1), b AS (UPDATE hypotheses SET note = 'x' RETURNING *) SELECT * FROM a",
    "",
    ";",
    "SELEC 1",
]
READS = [
    ("SELECT count(*) FROM rollouts", [[132]]),
    ("select count(*) from rollouts;  ", [[132]]),
    ("WITH t AS (SELECT checkpoint FROM checkpoints) SELECT count(*) FROM t", [[2]]),
    ("FROM checkpoints SELECT checkpoint ORDER BY ordinal", [["standard"], ["tighter"]]),
    ("VALUES (1, 'a')", [[1, "a"]]),
    ("(SELECT 1) UNION ALL (SELECT 2) ORDER BY 1", [[1], [2]]),
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT sum(n) FROM r", [[6]]),
    ("WITH t AS MATERIALIZED (SELECT 41 AS x) SELECT x + 1 FROM t", [[42]]),
    ("SELECT count(*) FROM (SELECT task_id, row_number() OVER (PARTITION BY task_id) FROM rollouts)", [[132]]),
    ("SELECT 1 -- ; DROP TABLE rollouts", [[1]]),
    ("SELECT 'DROP TABLE rollouts; DELETE FROM segments'", [["DROP TABLE rollouts; DELETE FROM segments"]]),
]


@pytest.fixture
def sample_store(sample_study: Path) -> Path:
    return sample_study


@pytest.fixture
def locked(sample_store: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """The connection the SQL tool uses: read-only, no file system, locked settings."""
    con = duckdb.connect(str(sample_store), read_only=True, config=dict(LOCKED_DOWN))
    yield con
    con.close()


@pytest.mark.parametrize("query", WRITES)
def test_the_guard_refuses_anything_but_one_query(locked: duckdb.DuckDBPyConnection, query: str) -> None:
    with pytest.raises(QueryRefused):
        check_query(locked, query)


def test_the_guard_names_what_it_refused(locked: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(QueryRefused, match="exactly one statement.*got 2"):
        check_query(locked, "SELECT 1; DROP TABLE rollouts")
    with pytest.raises(QueryRefused, match="this is a COPY statement"):
        check_query(locked, "COPY rollouts TO 'x.csv'")
    with pytest.raises(QueryRefused, match=r"data-modifying part \(INSERT\)"):
        check_query(locked, "WITH t AS (INSERT INTO checkpoints VALUES ('x', 9, now()) RETURNING *) SELECT * FROM t")
    with pytest.raises(QueryRefused, match="not valid SQL"):
        check_query(locked, "SELEC 1")


@pytest.mark.parametrize(("query", "rows"), READS)
def test_the_guard_accepts_queries_and_they_run(locked: duckdb.DuckDBPyConnection, query: str, rows: list) -> None:
    result = run_query(locked, query, max_rows=10, timeout_s=10)
    assert [list(r) for r in result.rows] == rows and not result.truncated


@pytest.mark.parametrize("query", ["DESCRIBE segments", "SHOW TABLES", "SUMMARIZE features"])
def test_schema_browsing_is_allowed(locked: duckdb.DuckDBPyConnection, query: str) -> None:
    result = run_query(locked, query, max_rows=100, timeout_s=10)
    assert result.rows and result.columns


@pytest.mark.parametrize(
    ("statement", "error"),
    [
        ("INSERT INTO checkpoints VALUES ('x', 9, now())", duckdb.InvalidInputException),
        ("WITH t AS (DELETE FROM rollouts RETURNING *) SELECT count(*) FROM t", duckdb.InvalidInputException),
        ("COPY rollouts TO '/tmp/rldiff-mcp-leak.csv'", duckdb.PermissionException),
        ("SELECT * FROM read_csv('/etc/passwd')", duckdb.PermissionException),
        ("SELECT * FROM glob('/*')", duckdb.PermissionException),
        ("ATTACH '/tmp/rldiff-mcp-other.duckdb' AS other", duckdb.PermissionException),
        ("LOAD httpfs", duckdb.PermissionException),
        ("SET enable_external_access = true", duckdb.InvalidInputException),
    ],
)
def test_the_connection_refuses_writes_and_file_access_even_without_the_guard(
    locked: duckdb.DuckDBPyConnection, statement: str, error: type[Exception]
) -> None:
    with pytest.raises(error):
        locked.execute(statement).fetchall()


def test_reading_files_is_refused_at_run_time(locked: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(InputError, match="query failed: Permission Error"):
        run_query(locked, "SELECT * FROM read_csv('/etc/passwd')", max_rows=10, timeout_s=10)
    assert not Path("/tmp/rldiff-mcp-leak.csv").exists()


def test_rows_are_capped(locked: duckdb.DuckDBPyConnection) -> None:
    capped = run_query(locked, "SELECT * FROM range(100000)", max_rows=100, timeout_s=10)
    exact = run_query(locked, "SELECT * FROM range(100)", max_rows=100, timeout_s=10)
    assert len(capped.rows) == 100 and capped.truncated
    assert len(exact.rows) == 100 and not exact.truncated
    with pytest.raises(InputError, match="max_rows"):
        run_query(locked, "SELECT 1", max_rows=100_000, timeout_s=10)


def test_a_slow_query_is_interrupted(locked: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(QueryTimeout, match="longer than 0.2s"):
        run_query(locked, "SELECT count(*) FROM range(1000000000000) a, range(10) b", max_rows=10, timeout_s=0.2)
    assert run_query(locked, "SELECT 42", max_rows=1, timeout_s=1).rows == [(42,)]  # the connection still works


async def test_the_sql_tool_answers_queries_and_refuses_writes(sample_store: Path, tmp_path: Path) -> None:
    study = Path(shutil.copy(sample_store, tmp_path / "study.duckdb"))
    digest = hashlib.sha256(study.read_bytes()).hexdigest()
    async with Client(build_server(study)) as client:
        ok = await client.call_tool(
            "query_sql", {"sql": "SELECT checkpoint, count(*) AS n FROM rollouts GROUP BY ALL ORDER BY 1"}
        )
        capped = await client.call_tool(
            "query_sql", {"sql": "SELECT text FROM segments", "max_rows": 5, "max_chars": 20}
        )
        refused = {q: await client.call_tool("query_sql", {"sql": q}) for q in WRITES if q}
        empty = await client.call_tool("query_sql", {"sql": ""})
        slow = await client.call_tool(
            "query_sql", {"sql": "SELECT count(*) FROM range(1000000000000)", "timeout_s": 0.2}
        )
        too_long = await client.call_tool("query_sql", {"sql": "SELECT 1", "timeout_s": 3600})
    answer = json.loads(ok.content[0].text)  # 66 rollouts a checkpoint, half of them held out and hidden
    assert answer["columns"] == ["checkpoint", "n"] and answer["rows"] == [["standard", 33], ["tighter", 33]]
    assert answer["types"] == ["VARCHAR", "BIGINT"] and answer["truncated"] is False
    rows = json.loads(capped.content[0].text)
    assert rows["row_count"] == 5 and rows["truncated"] is True
    assert all(len(r[0]) <= 20 + len("…[99999 more chars]") for r in rows["rows"])
    for query, result in refused.items():
        assert result.is_error, query
        assert result.content[0].text.startswith("query_sql: refused: "), query
    assert empty.is_error and "sql" in empty.content[0].text
    assert slow.is_error and "longer than 0.2s" in slow.content[0].text
    assert too_long.is_error and "timeout_s" in too_long.content[0].text
    assert hashlib.sha256(study.read_bytes()).hexdigest() == digest


HELDOUT_SEGMENTS = "SELECT count(*) FROM segments s JOIN rollouts r USING (rollout_key) WHERE r.split = 'heldout'"


def test_heldout_rows_are_hidden_unless_asked_for(locked: duckdb.DuckDBPyConnection, sample_store: Path) -> None:
    """Every table holding held-out rollouts' rows shows none of them by default, and all of them on request."""
    heldout_rollouts = "SELECT rollout_key FROM rollouts WHERE split = 'heldout'"
    heldout_segments = f"SELECT segment_id FROM segments WHERE rollout_key IN ({heldout_rollouts})"

    def rows_held_out(table: str) -> str:
        if table == "llm_cache":
            return "true"
        if table == "rollouts":
            return "split = 'heldout'"
        if table in ("messages", "segments"):
            return f"rollout_key IN ({heldout_rollouts})"
        return f"segment_id IN ({heldout_segments})"

    # counted on the plain connection before any query hides rows on it
    total = {t: locked.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in sorted(HELDOUT_TABLES)}
    heldout = {t: locked.execute(f"SELECT count(*) FROM {t} WHERE {rows_held_out(t)}").fetchall()[0][0] for t in total}
    assert heldout["segments"] > 0 and heldout["hypothesis_labels"] > 0  # the study does hold rows out
    hidden = {t: run_query(locked, f"SELECT count(*) FROM {t}", 1, 10, include_heldout=False) for t in total}
    assert {t: r.rows[0][0] for t, r in hidden.items()} == {t: total[t] - heldout[t] for t in total}
    assert all(not r.heldout_tables for r in hidden.values())
    assert run_query(locked, HELDOUT_SEGMENTS, 1, 10, include_heldout=False).rows == [(0,)]
    fresh = duckdb.connect(str(sample_store), read_only=True, config=dict(LOCKED_DOWN))  # one query a connection
    try:
        shown = run_query(fresh, HELDOUT_SEGMENTS, 1, 10, include_heldout=True)
        aggregate = run_query(fresh, "SELECT count(*) FROM feature_deltas", 1, 10, include_heldout=True)
    finally:
        fresh.close()
    assert shown.rows == [(heldout["segments"],)] and shown.heldout_tables == {"segments", "rollouts"}
    assert aggregate.heldout_tables == frozenset()


@pytest.mark.parametrize(
    "query",
    [
        "SELECT count(*) FROM study.main.segments",
        "SELECT count(*) FROM study.segments",
        'SELECT text FROM "STUDY".main.messages',
        "WITH s AS (SELECT * FROM study.main.sentences) SELECT count(*) FROM s",
        "SELECT count(*) FROM rollouts WHERE rollout_key IN (SELECT rollout_key FROM study.main.rollouts)",
        "SUMMARIZE study.main.segments",
        "SELECT count(*) FROM query_table('study.main.segments')",
        "SELECT * FROM query('SELECT text FROM study.main.segments')",
    ],
)
def test_the_ways_around_the_hidden_rows_are_refused(sample_store: Path, tmp_path: Path, query: str) -> None:
    """The store's own tables by their catalog name, and SQL text run by a table function, would bypass the
    views: refused by default, with what to ask for instead."""
    study = Path(shutil.copy(sample_store, tmp_path / "study.duckdb"))  # catalog name 'study'
    con = duckdb.connect(str(study), read_only=True, config=dict(LOCKED_DOWN))
    try:
        with pytest.raises(QueryRefused, match="include_heldout=true"):
            run_query(con, query, 10, 10, include_heldout=False)
    finally:
        con.close()


async def test_the_sql_tool_logs_a_heldout_view_only_when_it_shows_heldout_rows(
    sample_store: Path, tmp_path: Path
) -> None:
    study = Path(shutil.copy(sample_store, tmp_path / "study.duckdb"))

    def views() -> int:
        con = duckdb.connect(str(study), read_only=True)
        try:
            return int(con.execute("SELECT count(*) FROM heldout_views WHERE via = 'mcp'").fetchall()[0][0])
        finally:
            con.close()

    async with Client(build_server(study)) as client:
        hidden = await client.call_tool("query_sql", {"sql": HELDOUT_SEGMENTS})
        aggregate = await client.call_tool(
            "query_sql", {"sql": "SELECT count(*) FROM feature_deltas", "include_heldout": True}
        )
        assert views() == 0
        shown = await client.call_tool("query_sql", {"sql": HELDOUT_SEGMENTS, "include_heldout": True})
    assert json.loads(hidden.content[0].text)["rows"] == [[0]]
    assert json.loads(aggregate.content[0].text)["row_count"] == 1
    assert json.loads(shown.content[0].text)["rows"][0][0] > 0
    assert views() == 1
