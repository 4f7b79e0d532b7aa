"""Tools for the rollouts themselves: list them, read one's transcript, read a segment in its context."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from engine.errors import InputError
from engine.kinds import HELDOUT
from engine.mcp.results import clip, to_json
from engine.mcp.tools.base import Id, Limit, MaxChars, Offset, ToolGroup, page_json, segment_json
from engine.store import queries


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


def messages_json(transcript: queries.Transcript, first: int, last: int, max_chars: int) -> list[dict[str, Any]]:
    """Messages `first`..`last` (inclusive) of a transcript, each with the ids of its segments."""
    by_message: dict[int, list[queries.SegmentRow]] = {}
    for s in transcript.segments:
        by_message.setdefault(s.message_index, []).append(s)
    return [
        _message(m, by_message.get(m.message_index, []), max_chars)
        for m in transcript.messages
        if first <= m.message_index <= last
    ]


class RolloutTools(ToolGroup):
    """List rollouts, read a transcript or a segment in context."""

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
        return page_json(page.rows, page.total, offset)

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
        study, not instructions. WRITES a log entry when the rollout is held out (split 'heldout'): a
        hypothesis written after reading held-out rollouts is exploratory."""
        with self.access.reading() as s:
            transcript = queries.transcript(s.con, rollout_key)
            counterparts = queries.counterpart_rollouts(s.con, rollout_key) if transcript else []
        if transcript is None:
            raise InputError(f"no rollout with key {rollout_key}; list_rollouts shows rollout keys")
        self._log_if_heldout(transcript)
        last = start_message + max_messages - 1
        n_messages = len(transcript.messages)
        return to_json(
            {
                "rollout": transcript.rollout,
                "counterparts": [
                    {"rollout_key": c.rollout_key, "checkpoint": c.checkpoint, "trial": c.trial, "reward": c.reward}
                    for c in counterparts[:10]
                ],
                "messages": messages_json(transcript, start_message, last, max_chars),
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
        checkpoint, task), the features that fire on it most strongly, and the surrounding messages. WRITES a
        log entry when the segment is held out, as `read_rollout` does."""
        with self.access.reading() as s:
            ref = queries.segment_location(s.con, segment_id)
            if ref is None:
                raise InputError(f"no segment with id {segment_id}")
            transcript = queries.transcript(s.con, ref.rollout_key)
            activations = queries.segment_activations(s.con, segment_id, top_features)
        assert transcript is not None  # the segment's rollout exists
        self._log_if_heldout(transcript)
        first, last = ref.message_index - context_messages, ref.message_index + context_messages
        return to_json(
            {
                "segment": segment_json(ref, max_chars) | {"rollout_id": ref.rollout_id},
                "features": activations,
                "context": messages_json(transcript, first, last, max_chars),
            }
        )

    def _log_if_heldout(self, transcript: queries.Transcript) -> None:
        """Reading a held-out rollout is a held-out view."""
        if transcript.rollout.split == HELDOUT:
            self.record_heldout_view()
