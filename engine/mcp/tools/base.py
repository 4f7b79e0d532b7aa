"""What the tool groups share: argument types, the cancel event of a call, and the JSON shapes of a segment and
a page of rows."""

from __future__ import annotations

import contextvars
import threading
from typing import Annotated, Any

from mcp_types import ToolAnnotations
from pydantic import Field

from engine.mcp.access import StoreAccess
from engine.mcp.results import clip, to_json
from engine.store.queries.base import SegmentRef

# Optional text arguments are plain `str` defaulting to "" rather than `str | None`: the SDK JSON-decodes a
# string given for a non-`str` field, which would turn a regex such as `[12]` into a list.
Id = Annotated[int, Field(ge=0)]
Limit = Annotated[int, Field(ge=1, le=200, description="rows to return")]
Offset = Annotated[int, Field(ge=0, description="rows to skip (for paging)")]
MaxChars = Annotated[int, Field(ge=20, le=20000, description="clip each text to this many characters")]
READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# Set by `StudyTool.run` in the worker thread of each call: set when the client cancels the request.
CANCEL: contextvars.ContextVar[threading.Event] = contextvars.ContextVar("cancel")


class ToolGroup:
    """Tools of one subject, as methods: each method's signature is its input schema and its docstring its
    description."""

    def __init__(self, access: StoreAccess) -> None:
        self.access = access

    def record_heldout_view(self) -> None:
        """Log that a tool showed held-out data (a write): hypotheses written afterwards are exploratory."""
        from engine.hypotheses.exposure import record_heldout_view

        with self.access.writing() as s:
            record_heldout_view(s.con, "mcp")


def segment_json(ref: SegmentRef, max_chars: int) -> dict[str, Any]:
    return {
        "segment_id": ref.segment_id,
        "rollout_key": ref.rollout_key,
        "checkpoint": ref.checkpoint,
        "task_id": ref.task_id,
        "message_index": ref.message_index,
        "kind": ref.kind,
        "text": clip(ref.text, max_chars),
    }


def page_json(rows: list[Any], total: int, offset: int) -> str:
    """One page of a listing, with the offset of the next page (null on the last)."""
    end = offset + len(rows)
    return to_json({"total": total, "offset": offset, "next_offset": end if end < total else None, "rows": rows})
