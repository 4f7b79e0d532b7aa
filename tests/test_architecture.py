"""Where SQL lives (docs/architecture.md): only `engine/store/` and the stage-internal exceptions listed there
run statements; every other module asks the store."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A statement run on a connection, a cursor, a `Store` or DuckDB's default connection.
STATEMENT = re.compile(r"\.(?:execute|executemany|sql)\(")

# Module (or package, ending in '/') -> why its SQL may stay outside the store. Keep in step with
# docs/architecture.md, "Where SQL lives".
EXCEPTIONS: dict[str, str] = {
    "engine/deltas/data.py": "the deltas stage's prevalence matrices and permutation inputs (analytical)",
    "engine/features/": "the features stage streams its segments in record batches and fills its staging tables",
    "engine/strata.py": "the reward strata's prevalence table (analytical) and DuckDB's parser for --where",
    "engine/mcp/sql.py": "the MCP `sql` tool runs a user's read-only SQL on the store's read-only connection",
}
SCANNED = ("engine", "tui")


def statements(source: str) -> list[int]:
    """Line numbers of the statements run in `source` (comments and docstrings included: a quoted call reads
    as one, which errs on the side of failing)."""
    return [n for n, line in enumerate(source.splitlines(), 1) if STATEMENT.search(line.split("#", 1)[0])]


def _excepted(module: str) -> bool:
    return any(module == e or (e.endswith("/") and module.startswith(e)) for e in EXCEPTIONS)


def sql_outside_the_store() -> dict[str, list[int]]:
    """Modules outside `engine/store/` and the exceptions that run statements, with the lines."""
    found: dict[str, list[int]] = {}
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            if module.startswith("engine/store/") or _excepted(module):
                continue
            lines = statements(path.read_text(encoding="utf-8"))
            if lines:
                found[module] = lines
    return found


def test_no_module_outside_the_store_runs_sql() -> None:
    found = sql_outside_the_store()
    assert not found, "SQL outside engine/store/ (move it into engine/store/queries, or list the module in "
    "docs/architecture.md and EXCEPTIONS with its reason): " + "; ".join(
        f"{module} line {', '.join(map(str, lines))}" for module, lines in found.items()
    )


def test_every_exception_still_runs_sql_and_is_documented() -> None:
    """A listed exception that no longer needs it goes from the list (and the docs), so the list stays true."""
    docs = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for exception in EXCEPTIONS:
        paths = [ROOT / exception] if not exception.endswith("/") else sorted((ROOT / exception).rglob("*.py"))
        assert any(statements(p.read_text(encoding="utf-8")) for p in paths), f"{exception} runs no SQL now"
        assert f"`{exception}`" in docs, f"{exception} is not in the docs"


def test_the_check_sees_each_way_of_running_a_statement() -> None:
    source = (
        "rows = store.execute('SELECT 1').fetchall()\n"
        "cursor.sql('SELECT 2')\n"
        "duckdb.execute('SELECT 3')\n"
        "con.executemany('INSERT', rows)\n"
        "store.frame('SELECT 4')  # the store's own reader, not a statement run here\n"
        "# store.execute( in a comment\n"
    )
    assert statements(source) == [1, 2, 3, 4]
