"""The `LLMClient` protocol and the request/result types every LLM backend shares."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.errors import RldiffError


class LLMError(RldiffError):
    """An LLM call failed for good (after retries), or its answer could not be used."""


class LLMResponseError(LLMError):
    """The model answered, but not with JSON matching the requested schema."""


class CostCapReached(LLMError):
    """Spending would pass the `--max-cost` cap: no further LLM calls are made."""


@dataclass(frozen=True)
class LLMRequest:
    """One structured question. `system` is the shared prefix (prompt-cached); `user` the specific part."""

    system: str
    user: str
    schema: dict[str, Any]
    max_tokens: int = 1024

    def prompt_hash(self, model: str) -> str:
        """The response-cache key: everything that shapes the answer, model included."""
        payload = json.dumps(
            {
                "model": model,
                "system": self.system,
                "user": self.user,
                "schema": self.schema,
                "max_tokens": self.max_tokens,
            },
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class Usage:
    """Tokens one answer cost. `batch` answers are billed at the Message Batches discount."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    batch: bool = False


@dataclass(frozen=True)
class LLMResult:
    """A parsed structured answer."""

    data: dict[str, Any]
    model: str
    usage: Usage = field(default_factory=Usage)
    cached: bool = False


@dataclass(frozen=True)
class LLMFailure:
    """One request of a batch that produced no usable answer."""

    reason: str
    usage: Usage = field(default_factory=Usage)


class LLMClient(Protocol):
    """A backend that answers structured requests: one at a time or as a batch."""

    model: str

    def complete(self, request: LLMRequest) -> LLMResult:
        """Answer one request; raise `LLMError` when no usable answer comes back."""
        ...

    def complete_batch(self, requests: Sequence[LLMRequest]) -> list[LLMResult | LLMFailure]:
        """Answer many requests (Message Batches where the backend has them), in request order."""
        ...


def check_schema(data: Any, schema: dict[str, Any], path: str = "$") -> None:
    """Check `data` against the small JSON-schema subset rldiff's prompts use; raise LLMResponseError."""
    kind = schema.get("type")
    types: dict[str, type | tuple[type, ...]] = {
        "object": dict,
        "array": list,
        "string": str,
        "boolean": bool,
        "integer": int,
        "number": (int, float),
        "null": type(None),
    }
    allowed = kind if isinstance(kind, list) else [kind] if kind else []
    if allowed and not any(
        isinstance(data, types[t]) and not (t in ("integer", "number") and isinstance(data, bool)) for t in allowed
    ):
        raise LLMResponseError(f"{path}: expected {'/'.join(allowed)}, got {type(data).__name__}")
    if "enum" in schema and data not in schema["enum"]:
        raise LLMResponseError(f"{path}: {data!r} is not one of {schema['enum']}")
    if isinstance(data, dict):
        for key in schema.get("required", []):
            if key not in data:
                raise LLMResponseError(f"{path}: missing required field {key!r}")
        for key, sub in schema.get("properties", {}).items():
            if key in data:
                check_schema(data[key], sub, f"{path}.{key}")
    if isinstance(data, list) and "items" in schema:
        for i, item in enumerate(data):
            check_schema(item, schema["items"], f"{path}[{i}]")
