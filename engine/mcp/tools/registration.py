"""Tools as the MCP SDK serves them: strict argument schemas, clear errors, cancellation, capped results."""

from __future__ import annotations

import contextvars
import inspect
import threading
from collections.abc import Callable
from typing import Any, cast

import anyio
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp_types import ToolAnnotations
from pydantic import ConfigDict, ValidationError

from engine.errors import RldiffError
from engine.mcp.results import clip
from engine.mcp.sql import MAX_RESULT_CHARS
from engine.mcp.tools.base import CANCEL


def write_annotations(*, idempotent: bool, open_world: bool) -> ToolAnnotations:
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
            CANCEL.set(cancel)
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
    strict = cast(
        type[ArgModelBase],
        type(
            loose.__name__,
            (loose,),
            {"model_config": ConfigDict(extra="forbid", arbitrary_types_allowed=True), "__module__": __name__},
        ),
    )
    tool.fn_metadata.arg_model = strict
    tool.parameters = strict.model_json_schema(by_alias=True)
    return tool
