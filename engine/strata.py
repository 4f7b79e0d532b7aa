"""`--where`: a DuckDB expression over rollout columns that restricts a study, checked before it runs.

The expression is parsed by DuckDB itself (`json_serialize_sql`) and its syntax tree walked: only column
references to the rollouts table, constants, operators, CASE/CAST/BETWEEN and the scalar functions in
FUNCTIONS are allowed, so no subquery, table function, file or network access gets in. It is then bound
against the store's rollouts, which checks names and types. Rollouts it leaves out get split 'excluded'.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb

from engine.errors import InputError
from engine.kinds import DISCOVERY
from engine.store import Store
from engine.store.queries.rollouts import count_where, rollout_columns

EXCLUDED = "excluded"  # rollouts.split of rollouts a --where left out

# Scalar functions and operators that read only their arguments (no files, network, settings or tables).
FUNCTIONS = frozenset(
    {
        *("+", "-", "*", "/", "//", "%", "||", "~~", "!~~", "~~*", "!~~*", "^", "**"),
        *("abs", "round", "floor", "ceil", "sqrt", "ln", "log", "log10", "greatest", "least", "isnan", "isfinite"),
        *("lower", "upper", "length", "strlen", "trim", "contains", "starts_with", "ends_with", "prefix", "suffix"),
        *("regexp_matches", "like", "ilike", "coalesce", "ifnull", "nullif"),
        *("json_extract", "json_extract_string", "json_exists", "json_value"),
    }
)
# Syntax-tree node classes an expression may contain.
_CLASSES = frozenset(
    {"CONJUNCTION", "OPERATOR", "COMPARISON", "CONSTANT", "COLUMN_REF", "FUNCTION", "CAST", "CASE", "BETWEEN"}
)


def check_where(store: Store, expression: str) -> str:
    """`expression` stripped, when it is a safe boolean expression over rollout columns; else InputError."""
    expression = expression.strip()
    if not expression:
        raise InputError("--where: empty expression")
    if ";" in expression:
        raise InputError("--where: one expression, no ';'")
    columns = rollout_columns(store)
    sql = f"SELECT * FROM rollouts WHERE ({expression})"
    tree = json.loads(duckdb.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0])
    if tree.get("error"):
        raise InputError(f"--where: {tree.get('error_message', 'not an expression')}")
    node = tree["statements"][0]["node"] if len(tree["statements"]) == 1 else {}
    clauses = ("modifiers", "group_expressions", "having", "qualify", "sample")
    if node.get("type") != "SELECT_NODE" or any(node.get(c) for c in clauses):
        raise InputError("--where: an expression over rollout columns only, not a query")
    _walk(node["where_clause"], set(columns))
    try:
        count_where(store, expression)
    except duckdb.Error as exc:
        raise InputError(f"--where: {str(exc).splitlines()[0]} (columns: {', '.join(columns)})") from exc
    return expression


def _walk(node: Any, columns: set[str]) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, columns)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("class")
    if kind is not None and kind not in _CLASSES:
        raise InputError(f"--where: {kind.lower()} not allowed (an expression over rollout columns only)")
    if kind == "FUNCTION" and node.get("function_name") not in FUNCTIONS:
        raise InputError(
            f"--where: function {node.get('function_name')!r} not allowed (allowed: {', '.join(sorted(FUNCTIONS))})"
        )
    if kind == "COLUMN_REF":
        names = node.get("column_names") or []
        if names[-1:] and names[-1] not in columns or names[:-1] not in ([], ["rollouts"]):
            raise InputError(
                f"--where: {'.'.join(names)!r} is not a rollout column (columns: {', '.join(sorted(columns))})"
            )
    for value in node.values():
        if isinstance(value, dict | list):
            _walk(value, columns)


# A rollout is a success when its reward reaches this (tau-bench, tau2 and Inspect's C/I give 0 or 1; partial
# credit of 0.5 and up counts as success). Rollouts without a reward are in neither stratum.
SUCCESS_REWARD = 0.5


def deltas_by_reward(con: duckdb.DuckDBPyConnection, rows: Any, before: str, after: str) -> Any:
    """Prevalence before and after of the (feature, kind) pairs in `rows`, within successes and failures of
    the discovery split: descriptive (no test), to see whether a change holds on both sides of the reward.
    `con` is a cursor of its own (the pairs are registered on it)."""
    con.register("wanted", rows.select("feature_id", "kind").to_arrow())
    return con.sql(
        "WITH r AS (SELECT rollout_key, checkpoint, CASE WHEN reward >= ? THEN 'success' ELSE 'failure' END "
        "AS stratum FROM rollouts WHERE split = ? AND checkpoint IN (?, ?) AND reward IS NOT NULL), "
        "seg AS (SELECT s.segment_id, s.rollout_key, s.kind, r.checkpoint, r.stratum FROM segments s JOIN r "
        "USING (rollout_key)), "
        "fires AS (SELECT sf.segment_id, sf.feature_id FROM segment_features sf JOIN features f USING (feature_id) "
        "WHERE sf.activation >= f.threshold AND sf.feature_id IN (SELECT feature_id FROM wanted)), "
        "cells AS (SELECT w.feature_id, w.kind, seg.stratum, seg.checkpoint, count(*) AS n, "
        "count(fires.segment_id) AS hits FROM wanted w JOIN seg ON w.kind = seg.kind LEFT JOIN fires "
        "ON fires.segment_id = seg.segment_id AND fires.feature_id = w.feature_id GROUP BY ALL "
        "UNION ALL SELECT w.feature_id, w.kind, r.stratum, r.checkpoint, count(*), count(h.rollout_key) "
        "FROM wanted w JOIN r ON w.kind = 'any' LEFT JOIN (SELECT DISTINCT seg.rollout_key, fires.feature_id "
        "FROM fires JOIN seg USING (segment_id)) h ON h.rollout_key = r.rollout_key AND h.feature_id = w.feature_id "
        "GROUP BY ALL) "
        "SELECT feature_id, kind, stratum, "
        "max(hits / n) FILTER (WHERE checkpoint = ?) AS prevalence_before, "
        "max(hits / n) FILTER (WHERE checkpoint = ?) AS prevalence_after, "
        "max(n) FILTER (WHERE checkpoint = ?) AS n_before, max(n) FILTER (WHERE checkpoint = ?) AS n_after "
        "FROM cells GROUP BY ALL ORDER BY ALL",
        params=[SUCCESS_REWARD, DISCOVERY, before, after, before, after, before, after],
    ).pl()
