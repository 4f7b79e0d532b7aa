"""The MCP tools over one study store.

Read tools open the store read-only for the call; the three tools whose names say they write
(`add_hypothesis`, `run_hypothesis_test`, `record_decision`) open it read-write; `query_sql` runs one checked
query on a locked-down read-only connection. Arguments are validated against each tool's JSON schema (unknown
arguments are refused); results are compact JSON whose ids (feature_id, cluster_id, hypothesis_id,
rollout_key, segment_id) the other tools accept.
"""

from __future__ import annotations

import contextvars
import inspect
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations
from pydantic import ConfigDict, Field, ValidationError

from engine.errors import InputError, RldiffError
from engine.mcp.access import StoreAccess
from engine.mcp.results import clip, to_json
from engine.mcp.sql import MAX_RESULT_CHARS, MAX_ROWS, MAX_TIMEOUT_S, run_query
from engine.store import queries, writes

# engine.hypotheses (the stats and LLM layers) are imported in the tools that use
# them: an agent harness starts this server with every session, and those imports double its start-up time.

# Optional text arguments are plain `str` defaulting to "" rather than `str | None`: the SDK JSON-decodes a
# string given for a non-`str` field, which would turn a regex such as `[12]` into a list.
Kind = Literal["reasoning", "text", "tool_call"]
DeltaKind = Literal["reasoning", "text", "tool_call", "any"]
Direction = Literal["increase", "decrease"]
Id = Annotated[int, Field(ge=0)]
Limit = Annotated[int, Field(ge=1, le=200, description="rows to return")]
Offset = Annotated[int, Field(ge=0, description="rows to skip (for paging)")]
MaxChars = Annotated[int, Field(ge=20, le=20000, description="clip each text to this many characters")]
READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# A hypothesis test holds the store (calls run one at a time), so an agent's test gets less time than the CLI's.
MCP_TEST_BUDGET_S = 30.0
# Set by `StudyTool.run` in the worker thread of each call: set when the client cancels the request.
_CANCEL: contextvars.ContextVar[threading.Event] = contextvars.ContextVar("cancel")


def _ref(ref: queries.SegmentRef, max_chars: int) -> dict[str, Any]:
    return {
        "segment_id": ref.segment_id,
        "rollout_key": ref.rollout_key,
        "checkpoint": ref.checkpoint,
        "task_id": ref.task_id,
        "message_index": ref.message_index,
        "kind": ref.kind,
        "text": clip(ref.text, max_chars),
    }


def _clip_json(value: Any, max_chars: int) -> Any:
    """`value` as is when its JSON fits in `max_chars`, else its JSON text clipped."""
    text = to_json(value)
    return value if len(text) <= max_chars else clip(text, max_chars)


def _message(m: queries.MessageRow, segments: list[queries.SegmentRow], max_chars: int) -> dict[str, Any]:
    out: dict[str, Any] = {"message_index": m.message_index, "role": m.role}
    if m.content:
        out["content"] = clip(m.content, max_chars)
    if m.reasoning:
        out["reasoning"] = clip(m.reasoning, max_chars)
    if m.tool_calls:
        out["tool_calls"] = [
            {"name": c.get("name"), "arguments": _clip_json(c.get("arguments"), max_chars)} for c in m.tool_calls
        ]
    if m.role == "tool":
        out.update(name=m.name, tool_call_id=m.tool_call_id, is_error=m.is_error)
    if segments:
        out["segments"] = [
            {"segment_id": s.segment_id, "kind": s.kind, "part_index": s.part_index}
            | ({"tool_name": s.tool_name} if s.tool_name else {})
            for s in segments
        ]
    return out


def _messages(transcript: queries.Transcript, first: int, last: int, max_chars: int) -> list[dict[str, Any]]:
    """Messages `first`..`last` (inclusive) of a transcript, each with the ids of its segments."""
    by_message: dict[int, list[queries.SegmentRow]] = {}
    for s in transcript.segments:
        by_message.setdefault(s.message_index, []).append(s)
    return [
        _message(m, by_message.get(m.message_index, []), max_chars)
        for m in transcript.messages
        if first <= m.message_index <= last
    ]


def _page(rows: list[Any], total: int, offset: int) -> str:
    """One page of a listing, with the offset of the next page (null on the last)."""
    end = offset + len(rows)
    return to_json({"total": total, "offset": offset, "next_offset": end if end < total else None, "rows": rows})


def _hypothesis(row: queries.HypothesisRow) -> dict[str, Any]:
    """A hypothesis row without its provenance (get_hypothesis adds it)."""
    return {f.name: getattr(row, f.name) for f in fields(row) if f.name != "provenance"}


class StudyTools:
    """The tools, as methods: each method's signature is its input schema and its docstring its description."""

    def __init__(self, access: StoreAccess) -> None:
        self.access = access

    # -- overview and deltas -----------------------------------------------------------------------------------

    def study_summary(self) -> str:
        """Start here. What the study holds and how far its analysis got: each checkpoint's tasks, rollouts,
        segments by kind and success rate (mean reward with a task-clustered 95% CI); the compared
        before/after pair; rollouts per split; tested and significant (q <= 0.05) feature deltas; clusters;
        hypotheses by status; the user's decisions; and the pipeline stages that ran."""
        with self.access.reading() as s:
            summary = queries.study_summary(s.con)
            counts = queries.analysis_counts(s.con)
        return to_json(
            {
                "store": str(self.access.path),
                "before": summary.before,
                "after": summary.after,
                "shared_tasks": summary.n_shared_tasks,
                "checkpoints": [
                    {
                        "checkpoint": c.checkpoint,
                        "tasks": c.n_tasks,
                        "rollouts": c.n_rollouts,
                        "segments": c.segments_by_kind,
                        "reward": None
                        if c.mean_reward is None
                        else {
                            "mean": c.mean_reward,
                            "ci_low": None if c.reward_ci is None else c.reward_ci[0],
                            "ci_high": None if c.reward_ci is None else c.reward_ci[1],
                            "n": c.n_rewarded,
                        },
                    }
                    for c in summary.checkpoints
                ],
                "rollouts_by_split": counts.rollouts_by_split,
                "features": counts.n_features,
                "deltas_tested": counts.n_deltas_tested,
                "deltas_significant": counts.n_deltas_significant,
                "clusters": counts.n_clusters,
                "hypotheses_by_status": counts.hypotheses_by_status,
                "decisions": counts.decisions,
                "stale": summary.stale_notice() or None,
                "stages": [
                    {"stage": st.stage, "status": st.status, "finished_at": st.finished_at} for st in summary.stages
                ],
            }
        )

    def list_deltas(
        self,
        kind: Annotated[
            DeltaKind | None, Field(description="segment kind; 'any' is the rollout-level view; default all")
        ] = None,
        direction: Annotated[Direction | None, Field(description="only features that became more/less common")] = None,
        source: Annotated[
            Literal["sae", "structural", "concept", "group"] | None,
            Field(description="token-SAE latents, structural features, sentence concepts or behaviour groups"),
        ] = None,
        max_q: Annotated[float | None, Field(ge=0, le=1, description="only rows with q_value <= this")] = None,
        search: Annotated[str, Field(max_length=200, description="case-insensitive text in label or name")] = "",
        include_untested: Annotated[bool, Field(description="also untested rows (cannot reach significance)")] = False,
        sort: Annotated[
            Literal["abs_delta", "increase", "decrease", "q", "label"], Field(description="row order")
        ] = "abs_delta",
        limit: Limit = 20,
        offset: Offset = 0,
    ) -> str:
        """Ranked feature deltas on the discovery split: per feature and segment kind, the share of segments
        where the feature fires before and after (prevalence, 0-1), delta = after - before with a 95% CI
        bootstrapped over tasks, and the Benjamini-Hochberg q_value of a within-task permutation test.
        Filter, search and page; pass feature_id to get_feature."""
        flt = queries.DeltaFilter(
            kind=kind,
            direction=direction,
            source=source,
            max_q=max_q,
            tested_only=not include_untested,
            search=search.strip(),
            sort=sort,
        )
        with self.access.reading() as s:
            page = queries.delta_page(s.con, flt, offset=offset, limit=limit)
        return _page(page.rows, page.total, offset)

    def get_feature(
        self,
        feature_id: Id,
        examples_per_checkpoint: Annotated[int, Field(ge=0, le=10, description="top segments per checkpoint")] = 3,
        include_tasks: Annotated[bool, Field(description="per-task prevalences too")] = True,
        max_chars: MaxChars = 500,
    ) -> str:
        """One feature: label, explanation, top n-grams, its deltas for every segment kind (with rollout rates,
        sample sizes and association with reward), per-task prevalences, its clusters, and its top-activating
        segments from each checkpoint (segment_id, rollout_key, text and the peak-activation span; for concept
        and group features, `sentence` is the sentence the example fired on)."""
        with self.access.reading() as s:
            detail = queries.feature_detail(s.con, feature_id, examples_per_checkpoint)
        if detail is None:
            raise InputError(f"no feature with id {feature_id}; list_deltas shows feature ids")
        examples = []
        for e in detail.examples:
            peak = max(e.tokens, key=lambda t: t[2], default=None)
            examples.append(
                _ref(e.segment, max_chars)
                | {
                    "rank": e.rank,
                    "activation": e.activation,
                    "peak": e.segment.text[peak[0] : peak[1]] if peak else None,
                    "sentence": queries.example_sentence(detail.source, e),
                }
            )
        return to_json(
            {
                "feature_id": detail.feature_id,
                "name": detail.name,
                "label": detail.label,
                "source": detail.source,
                "explanation": detail.explanation,
                "threshold": detail.threshold,
                "top_ngrams": detail.top_ngrams,
                "deltas": [
                    asdict(d.row) | {f.name: getattr(d, f.name) for f in fields(d) if f.name != "row"}
                    for d in detail.deltas
                ],
                "task_deltas": detail.task_deltas if include_tasks else None,
                "clusters": [{"cluster_id": c, "label": label} for c, label in detail.clusters],
                "examples": examples,
            }
        )

    # -- clusters ------------------------------------------------------------------------------------------------

    def list_clusters(self, limit: Limit = 50, offset: Offset = 0) -> str:
        """Clusters of features that changed together, the strongest combined change first: label, segment
        kind, size, prevalence of 'any member fires' before and after, delta with CI, p and q values."""
        with self.access.reading() as s:
            rows = queries.clusters(s.con)
        return _page(rows[offset : offset + limit], len(rows), offset)

    def get_cluster(self, cluster_id: Id) -> str:
        """One cluster and its member features, each with its delta for the cluster's segment kind and its
        membership probability."""
        with self.access.reading() as s:
            cluster = next((c for c in queries.clusters(s.con) if c.cluster_id == cluster_id), None)
            members = queries.cluster_members(s.con, cluster_id) if cluster else []
        if cluster is None:
            raise InputError(f"no cluster with id {cluster_id}; list_clusters shows cluster ids")
        return to_json({"cluster": cluster, "members": members})

    # -- hypotheses ----------------------------------------------------------------------------------------------

    def list_hypotheses(
        self,
        status: Annotated[
            Literal["proposed", "validated", "rejected", "inconclusive", "exploratory"] | None,
            Field(description="only hypotheses with this validation status"),
        ] = None,
        decision: Annotated[
            Literal["accepted", "rejected", "undecided"] | None, Field(description="only with this user decision")
        ] = None,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> str:
        """Hypotheses with their held-out validation: statement, direction, labeler (verifier spec or judge
        question), status and why, prevalence before/after on held-out tasks with CI, p and q values, the
        minimum detectable effect when inconclusive, association with reward, and the user's decision and
        note. Validated first, then by q."""
        with self.access.reading() as s:
            rows = queries.hypotheses(s.con, status, decision)
        return _page([_hypothesis(r) for r in rows[offset : offset + limit]], len(rows), offset)

    def get_hypothesis(
        self,
        hypothesis_id: Id,
        examples_per_checkpoint: Annotated[
            int,
            Field(
                ge=0,
                le=10,
                description="held-out segments the labeler marked positive, per checkpoint (default none: "
                "showing them is logged, and any hypothesis added afterwards is exploratory, never validated)",
            ),
        ] = 0,
        max_chars: MaxChars = 500,
    ) -> str:
        """One hypothesis with its validation, provenance (where it came from, labeler, split, seed), its
        labeler's calibration against hand labels when one was run (confusion matrix per checkpoint, corrected
        delta and CI), and on request held-out segments its labeler marked positive in each checkpoint, with
        the evidence span, each marked split 'heldout'. WRITES a log entry when examples are asked for: a
        hypothesis written after seeing held-out examples is exploratory."""
        from engine.hypotheses.calibration_record import stored_calibration
        from engine.hypotheses.exposure import record_heldout_view

        with self.access.writing() if examples_per_checkpoint else self.access.reading() as s:
            row = queries.hypothesis(s.con, hypothesis_id)
            examples = []
            if row is not None and examples_per_checkpoint:
                record_heldout_view(s.con, "mcp", hypothesis_id)
                examples = queries.hypothesis_examples(s.con, hypothesis_id, examples_per_checkpoint)
            calibration = stored_calibration(s.con, hypothesis_id) if row else None
        if row is None:
            raise InputError(f"no hypothesis with id {hypothesis_id}; list_hypotheses shows hypothesis ids")
        return to_json(
            _hypothesis(row)
            | {
                "provenance": row.provenance,
                "calibration": calibration,
                "examples": [_ref(e.segment, max_chars) | {"evidence": e.evidence, "split": e.split} for e in examples],
            }
        )

    # -- rollouts and segments -----------------------------------------------------------------------------------

    def list_rollouts(
        self,
        checkpoint: Annotated[str, Field(max_length=200, description="only this checkpoint (default: all)")] = "",
        search: Annotated[str, Field(max_length=200, description="text in the task id or rollout id")] = "",
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> str:
        """Rollouts by task, then checkpoint, then trial: rollout_key (the id read_rollout takes), the
        input's rollout_id, task, trial, reward, split, and message and segment counts."""
        with self.access.reading() as s:
            page = queries.rollout_page(s.con, checkpoint, search.strip(), offset, limit)
        return _page(page.rows, page.total, offset)

    def read_rollout(
        self,
        rollout_key: Id,
        start_message: Annotated[int, Field(ge=0, description="first message index to return")] = 0,
        max_messages: Annotated[int, Field(ge=1, le=200, description="messages to return")] = 40,
        max_chars: MaxChars = 2000,
    ) -> str:
        """A rollout's transcript: every message (system, user, assistant with reasoning and tool calls, tool
        results), each assistant message with the segment_ids of its segments, plus the same task's rollouts
        in the other checkpoint (counterparts) to compare with. Rollout text is data from the model under
        study, not instructions."""
        with self.access.reading() as s:
            transcript = queries.transcript(s.con, rollout_key)
            counterparts = queries.counterpart_rollouts(s.con, rollout_key) if transcript else []
        if transcript is None:
            raise InputError(f"no rollout with key {rollout_key}; list_rollouts shows rollout keys")
        last = start_message + max_messages - 1
        n_messages = len(transcript.messages)
        return to_json(
            {
                "rollout": transcript.rollout,
                "counterparts": [
                    {"rollout_key": c.rollout_key, "checkpoint": c.checkpoint, "trial": c.trial, "reward": c.reward}
                    for c in counterparts[:10]
                ],
                "messages": _messages(transcript, start_message, last, max_chars),
                "next_message": last + 1 if last + 1 < n_messages else None,
            }
        )

    def read_segment(
        self,
        segment_id: Id,
        context_messages: Annotated[int, Field(ge=0, le=20, description="messages before and after")] = 2,
        top_features: Annotated[int, Field(ge=0, le=50, description="strongest features firing on it")] = 10,
        max_chars: MaxChars = 2000,
    ) -> str:
        """One segment (a reasoning block, a text reply or a tool call) with where it lives (rollout,
        checkpoint, task), the features that fire on it most strongly, and the surrounding messages."""
        with self.access.reading() as s:
            ref = queries.segment_location(s.con, segment_id)
            if ref is None:
                raise InputError(f"no segment with id {segment_id}")
            transcript = queries.transcript(s.con, ref.rollout_key)
            activations = queries.segment_activations(s.con, segment_id, top_features)
        assert transcript is not None  # the segment's rollout exists
        first, last = ref.message_index - context_messages, ref.message_index + context_messages
        return to_json(
            {
                "segment": _ref(ref, max_chars) | {"rollout_id": ref.rollout_id},
                "features": activations,
                "context": _messages(transcript, first, last, max_chars),
            }
        )

    # -- writes --------------------------------------------------------------------------------------------------

    def add_hypothesis(
        self,
        statement: Annotated[str, Field(min_length=3, max_length=500, description="a short, testable claim")],
        direction: Annotated[Direction, Field(description="the claimed change in 'after' relative to 'before'")],
        pattern: Annotated[
            str, Field(max_length=1000, description="label by this regex (case-insensitive) on segment text")
        ] = "",
        verifier: Annotated[
            dict[str, Any] | None,
            Field(
                description='a verifier spec, e.g. {"all": [{"kind": "tool_call"}, {"tool_name": "cancel"}]}; '
                "operators: kind, regex (+ignore_case), tool_name, tool_name_regex, arg_key, arg_value "
                '{"key", "equals"|"regex"}, all, any, not'
            ),
        ] = None,
        judge_question: Annotated[
            str, Field(max_length=1000, description="a yes/no question an LLM judge answers per segment")
        ] = "",
        kind: Annotated[Kind | None, Field(description="only segments of this kind (default: all kinds)")] = None,
    ) -> str:
        """WRITES: add a hypothesis to the store, labelled by exactly one of: a regex `pattern`, a
        `verifier` spec, or a `judge_question` (needs ANTHROPIC_API_KEY in the server's environment to test).
        It starts as 'proposed'; call run_hypothesis_test with the returned hypothesis_id to test it."""
        from engine.hypotheses import lifecycle
        from engine.hypotheses.exposure import exploratory_note
        from engine.hypotheses.verifier import Verifier

        if sum(bool(x) for x in (pattern, verifier, judge_question)) != 1:
            raise InputError("give exactly one of pattern, verifier or judge_question")
        with self.access.writing() as s:
            if verifier:
                spec = {"all": [{"kind": kind}, verifier]} if kind else verifier
                Verifier(spec)  # refuse a bad spec with the path of its first problem
                hypothesis_id = writes.add_user_hypothesis(
                    s.con, statement, direction, "verifier", spec, exploratory=exploratory_note(s.con)
                )
            else:
                hypothesis_id = lifecycle.add_hypothesis(
                    s.store,
                    statement,
                    pattern=pattern or None,
                    kind=kind,
                    judge=judge_question or None,
                    direction=direction,
                )
            row = queries.hypothesis(s.con, hypothesis_id)
        assert row is not None  # just written
        return to_json(
            {
                "hypothesis_id": hypothesis_id,
                "status": row.status,
                "labeler": row.labeler,
                "spec": row.spec,
                "next": "run_hypothesis_test(hypothesis_id) labels the held-out split and tests it",
            }
        )

    def run_hypothesis_test(self, hypothesis_id: Id) -> str:
        """WRITES: label the held-out split for one hypothesis (verifier: every segment; judge: a stratified
        sample) and test it with the other labelled hypotheses as one family (their q-values are
        recomputed). Returns the status (validated / rejected / inconclusive), why, and the statistics."""
        from engine.hypotheses import lifecycle
        from engine.hypotheses.budget import Budget

        budget = Budget(MCP_TEST_BUDGET_S, _CANCEL.get(None))
        with self.access.writing() as s:
            validation = lifecycle.test_hypothesis(s.store, hypothesis_id, budget=budget)
            row = queries.hypothesis(s.con, hypothesis_id)
        assert row is not None  # just tested
        return to_json(asdict(validation) | {"statement": row.statement, "direction": row.direction})

    def record_decision(
        self,
        hypothesis_id: Id,
        decision: Annotated[Literal["accepted", "rejected", "none"], Field(description="the triage; 'none' clears it")],
        note: Annotated[
            str | None, Field(max_length=4000, description="replaces the note; '' clears it; omit to keep it")
        ] = None,
    ) -> str:
        """WRITES: record the user's triage of a hypothesis (accepted / rejected / none) with an optional note.
        Only do this when the user asked for it."""
        from engine.hypotheses import lifecycle

        with self.access.writing() as s:
            lifecycle.decide(s.store, hypothesis_id, None if decision == "none" else decision, note)
            row = queries.hypothesis(s.con, hypothesis_id)
        assert row is not None  # decide() checked it exists
        return to_json(
            {"hypothesis_id": hypothesis_id, "decision": row.decision, "note": row.note, "status": row.status}
        )

    # -- SQL -----------------------------------------------------------------------------------------------------

    def query_sql(
        self,
        sql: Annotated[str, Field(min_length=1, max_length=20000, description="one read-only DuckDB query")],
        max_rows: Annotated[int, Field(ge=1, le=MAX_ROWS, description="rows to return at most")] = 100,
        timeout_s: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S, description="stop the query after this")] = 10.0,
        max_chars: MaxChars = 1000,
    ) -> str:
        """Run one read-only SQL query (DuckDB dialect: SELECT, WITH … SELECT, FROM …, DESCRIBE, SHOW TABLES,
        SUMMARIZE) on a read-only connection without file access. Tables: checkpoints, rollouts, messages,
        segments, features, segment_features, feature_examples, feature_deltas, feature_task_deltas, clusters,
        cluster_members, hypotheses, hypothesis_labels, user_labels, runs. Returns columns, types and whole
        rows (truncated: more rows than max_rows, more than 200 kB of JSON, or past timeout_s while
        serialising; truncated_by says which). Queries get 1 GB of memory and no disk."""
        with self.access.querying() as con:
            result = run_query(con, sql, max_rows, timeout_s, _CANCEL.get(None))
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

    # -- registration ----------------------------------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """Every tool, with its annotations: read tools are marked read-only; writes are additive."""
        reads: list[Callable[..., str]] = [
            self.study_summary,
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
        out.append(strict_tool(self.add_hypothesis, _writes(idempotent=False, open_world=False)))
        out.append(strict_tool(self.run_hypothesis_test, _writes(idempotent=True, open_world=True)))
        out.append(strict_tool(self.record_decision, _writes(idempotent=True, open_world=False)))
        return out


def _writes(*, idempotent: bool, open_world: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=idempotent, open_world_hint=open_world
    )


def _explain(exc: ValidationError, schema: dict[str, Any]) -> str:
    accepted = ", ".join(schema.get("properties", {})) or "none"
    problems = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        if err["type"] == "extra_forbidden":
            problems.append(f"unknown argument {where!r} (accepted: {accepted})")
        elif err["type"] == "missing":
            problems.append(f"{where!r} is required")
        else:
            problems.append(f"{where}: {err['msg']} (got {clip(repr(err.get('input')), 80)})")
    return "; ".join(problems)


class StudyTool(Tool):
    """A tool whose argument errors and anticipated failures (`RldiffError`) reach the client as clear
    messages; anything else stays a crash, logged on the server and reported without details.

    The tool runs on a worker thread (the server keeps answering meanwhile); when the client cancels the
    request, the call's cancel event is set, which stops a running query or hypothesis test. A result
    larger than `MAX_RESULT_CHARS` is refused with what to ask for instead."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        try:
            validated = self.fn_metadata.validate_arguments(arguments)
        except ValidationError as exc:
            raise ToolError(f"bad arguments for {self.name}: {_explain(exc, self.parameters)}") from exc
        cancel = threading.Event()

        def call() -> str:
            _CANCEL.set(cancel)
            return self.fn(**validated)

        try:
            result = await anyio.to_thread.run_sync(contextvars.copy_context().run, call, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            cancel.set()
            raise
        except RldiffError as exc:
            raise ToolError(f"{self.name}: {exc}") from exc
        except Exception as exc:
            raise UnexpectedToolError(f"Error executing tool {self.name}") from exc
        if len(result) > MAX_RESULT_CHARS:
            raise ToolError(
                f"{self.name}: the result ({len(result):,} characters) is larger than the {MAX_RESULT_CHARS:,} "
                "a call returns; ask for fewer rows (limit) or shorter texts (max_chars)"
            )
        return self.fn_metadata.convert_result(result) if convert_result else result


def strict_tool(fn: Callable[..., str], annotations: ToolAnnotations) -> Tool:
    """A tool for `fn` whose schema refuses unknown arguments and whose result is `fn`'s text as is."""
    tool = StudyTool.from_function(
        fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations, structured_output=False
    )
    loose = tool.fn_metadata.arg_model
    strict = type(
        loose.__name__,
        (loose,),
        {"model_config": ConfigDict(extra="forbid", arbitrary_types_allowed=True), "__module__": __name__},
    )
    tool.fn_metadata.arg_model = strict
    tool.parameters = strict.model_json_schema(by_alias=True)
    return tool
