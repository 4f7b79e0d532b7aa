"""The MCP tools over one study store.

Read tools open the store read-only for the call; the three tools whose names say they write
(`add_hypothesis`, `run_hypothesis_test`, `record_decision`) open it read-write; `query_sql` runs one checked
query on a locked-down read-only connection. Arguments are validated against each tool's JSON schema (unknown
arguments are refused); results are compact JSON whose ids (feature_id, cluster_id, hypothesis_id,
rollout_key, segment_id) the other tools accept.

One module per subject (`findings`, `hypotheses`, `rollouts`, `query`), each a `ToolGroup` whose methods are
tools; `StudyTools` joins them and registers them (`registration`).
"""

from __future__ import annotations

from collections.abc import Callable

from mcp.server.mcpserver.tools import Tool

from engine.mcp.tools.base import READS
from engine.mcp.tools.findings import FindingTools
from engine.mcp.tools.hypotheses import HypothesisTools
from engine.mcp.tools.query import QueryTools
from engine.mcp.tools.registration import strict_tool, write_annotations
from engine.mcp.tools.rollouts import RolloutTools


class StudyTools(FindingTools, HypothesisTools, RolloutTools, QueryTools):
    """Every tool over one study store."""

    def tools(self) -> list[Tool]:
        """Every tool, with its annotations: read tools are marked read-only; writes are additive."""
        reads: list[Callable[..., str]] = [
            self.study_summary,
            self.exploratory_ranking,
            self.list_deltas,
            self.get_feature,
            self.list_clusters,
            self.get_cluster,
            self.list_hypotheses,
            self.get_hypothesis,
            self.list_rollouts,
            self.read_rollout,
            self.read_segment,
            self.query_sql,
        ]
        out = [strict_tool(fn, READS) for fn in reads]
        out.append(strict_tool(self.add_hypothesis, write_annotations(idempotent=False, open_world=False)))
        out.append(strict_tool(self.run_hypothesis_test, write_annotations(idempotent=True, open_world=True)))
        out.append(strict_tool(self.record_decision, write_annotations(idempotent=True, open_world=False)))
        return out
