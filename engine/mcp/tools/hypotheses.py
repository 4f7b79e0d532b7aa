"""Tools for hypotheses: list and read them (held-out examples on request, logged), add one, test it, decide."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Annotated, Any, Literal

from pydantic import Field

from engine.errors import InputError
from engine.hypotheses.reasons import why
from engine.kinds import Decision, DecisionFilter, Direction, Kind, Status
from engine.mcp.results import to_json
from engine.mcp.tools.base import CANCEL, Id, Limit, MaxChars, Offset, ToolGroup, page_json, segment_json
from engine.store import queries, writes

# engine.hypotheses (the stats and LLM layers) is imported in the tools that use it: an agent harness starts
# this server with every session, and those imports double its start-up time.

# A hypothesis test holds the store (calls run one at a time), so an agent's test gets less time than the CLI's.
MCP_TEST_BUDGET_S = 30.0


def hypothesis_json(row: queries.HypothesisRow) -> dict[str, Any]:
    """A hypothesis row without its provenance (get_hypothesis adds it), with `why_not`: why it was not
    validated, in a few words (`engine.hypotheses.reasons.why`; null when validated or untested)."""
    fields_json = {f.name: getattr(row, f.name) for f in fields(row) if f.name != "provenance"}
    return {**fields_json, "why_not": why(row.status, row.reason)}


class HypothesisTools(ToolGroup):
    """List, read, add, test and decide hypotheses."""

    def list_hypotheses(
        self,
        status: Annotated[
            Status | None,
            Field(description="only hypotheses with this validation status"),
        ] = None,
        decision: Annotated[DecisionFilter | None, Field(description="only with this user decision")] = None,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> str:
        """Hypotheses with their held-out validation: statement, direction, labeler (verifier spec or judge
        question), status and why (the reason, and `why_not` in a few words), prevalence before/after where it
        was tested (held-out; in a small study the fold it was not drafted on: `provenance.split`) with CI, p
        and q values, the minimum detectable effect when inconclusive, association with reward, the user's
        decision and note, and for a validated finding that likely restates a broader one, `same_evidence`
        (that finding's id, and how many of this one's positives the same evidence decided). Validated first,
        then by q, each broader finding followed by those that restate it."""
        with self.access.reading() as s:
            rows = queries.hypotheses(s.con, status, decision)
        return page_json([hypothesis_json(r) for r in rows[offset : offset + limit]], len(rows), offset)

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
        delta and CI), and on request segments its labeler marked positive in each checkpoint on the split it
        was tested on, with the evidence span, each marked with its split ('heldout'; 'discovery' for a small
        study's finding drafted on the held-out fold). WRITES a log entry when examples are asked for: a
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
            hypothesis_json(row)
            | {
                "provenance": row.provenance,
                "calibration": calibration,
                "examples": [
                    segment_json(e.segment, max_chars) | {"evidence": e.evidence, "split": e.split} for e in examples
                ],
            }
        )

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

        budget = Budget(MCP_TEST_BUDGET_S, CANCEL.get(None))
        with self.access.writing() as s:
            validation = lifecycle.test_hypothesis(s.store, hypothesis_id, budget=budget)
            row = queries.hypothesis(s.con, hypothesis_id)
        assert row is not None  # just tested
        return to_json(asdict(validation) | {"statement": row.statement, "direction": row.direction})

    def record_decision(
        self,
        hypothesis_id: Id,
        decision: Annotated[Literal[Decision, "none"], Field(description="the triage; 'none' clears it")],
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
