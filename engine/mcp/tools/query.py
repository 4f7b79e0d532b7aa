"""The `query_sql` tool: one checked read-only query over the store (engine.mcp.sql checks and runs it)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from pydantic import Field

from engine.mcp.results import clip, to_json
from engine.mcp.sql import MAX_RESULT_CHARS, MAX_ROWS, MAX_TIMEOUT_S, run_query
from engine.mcp.tools.base import CANCEL, MaxChars, ToolGroup
from engine.store import queries


class QueryTools(ToolGroup):
    """One read-only SQL query, for what the other tools do not answer."""

    def query_sql(
        self,
        sql: Annotated[str, Field(min_length=1, max_length=20000, description="one read-only DuckDB query")],
        max_rows: Annotated[int, Field(ge=1, le=MAX_ROWS, description="rows to return at most")] = 100,
        timeout_s: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S, description="stop the query after this")] = 10.0,
        max_chars: MaxChars = 1000,
        include_heldout: Annotated[
            bool, Field(description="also see held-out rollouts' rows; WRITES a held-out view log entry")
        ] = False,
    ) -> str:
        """Run one read-only SQL query (DuckDB dialect: SELECT, WITH … SELECT, FROM …, DESCRIBE, SHOW TABLES,
        SUMMARIZE) on a read-only connection without file access. Tables: checkpoints, rollouts, messages,
        segments, sentences, features, segment_features, feature_examples, feature_kind_labels, feature_deltas,
        feature_task_deltas, clusters, cluster_members, hypotheses, hypothesis_labels, user_labels, runs. Rows
        of held-out rollouts (in rollouts, messages, segments, sentences, segment_features, feature_examples,
        hypothesis_labels, user_labels; and the whole llm_cache, whose responses may quote them) are hidden
        unless include_heldout is true; a query that reads them then logs a held-out view, as read_rollout does,
        and hypotheses written afterwards are exploratory. Returns columns, types and whole rows (truncated:
        more rows than max_rows, more than 200 kB of JSON, or past timeout_s while serialising; truncated_by
        says which). Queries get 1 GB of memory and no disk."""
        with self.access.querying() as con:
            result = run_query(con, sql, max_rows, timeout_s, CANCEL.get(None), include_heldout=include_heldout)
            shown_heldout = bool(result.heldout_tables) and queries.has_heldout(con)
        if shown_heldout:  # a query over held-out rows is a held-out view
            self.record_heldout_view()
        rows: list[list[Any]] = []
        # room for the rows: the cap less the columns, types and counts around them
        size = len(to_json([result.columns, result.types])) + 200
        truncated_by = "max_rows" if result.truncated else None
        for row in result.rows:
            if time.monotonic() > result.deadline:
                truncated_by = "timeout_s"
                break
            cells = [clip(v, max_chars) if isinstance(v, str) else v for v in row]
            size += len(to_json(cells)) + 1
            if size > MAX_RESULT_CHARS:
                truncated_by = "size"
                break
            rows.append(cells)
        return to_json(
            {
                "columns": result.columns,
                "types": result.types,
                "rows": rows,
                "row_count": len(rows),
                "truncated": truncated_by is not None,
                "truncated_by": truncated_by,
                "elapsed_ms": round(result.elapsed_s * 1000, 1),
            }
        )
