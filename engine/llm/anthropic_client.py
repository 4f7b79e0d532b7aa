"""The Anthropic client: the only module that imports `anthropic`.

Structured output by a forced tool call whose input schema is the answer's schema; the shared system prefix is
marked for prompt caching; 429, 529 and 5xx answers are retried with exponential backoff (honouring
`retry-after`); bulk work goes through Message Batches at half price.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import anthropic
import numpy as np
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

from engine.errors import InputError
from engine.llm.client import (
    LLMError,
    LLMFailure,
    LLMRequest,
    LLMResponseError,
    LLMResult,
    Usage,
    check_schema,
)

log = logging.getLogger(__name__)

ANSWER_TOOL = "record_answer"
RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}


class AnthropicClient:
    """`LLMClient` over the Anthropic Messages API. The key is read from ANTHROPIC_API_KEY only."""

    def __init__(
        self,
        model: str,
        *,
        http_client: Any | None = None,
        max_attempts: int = 5,
        base_delay: float = 1.0,
        max_delay: float = 60.0,
        poll_interval: float = 15.0,
        max_batch_wait: float = 24 * 3600.0,
        malformed_retries: int = 1,
        sleep: Callable[[float], None] = time.sleep,
        rng: np.random.Generator | None = None,
    ) -> None:
        api_key = os.environ.get("ANTHROPIC_API_KEY")
        if not api_key:
            raise InputError("--llm needs ANTHROPIC_API_KEY in the environment; use --llm none to run offline")
        self.model = model
        self._client = anthropic.Anthropic(api_key=api_key, http_client=http_client, max_retries=0)
        self.max_attempts = max_attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.poll_interval = poll_interval
        self.max_batch_wait = max_batch_wait
        self.malformed_retries = malformed_retries
        self._sleep = sleep
        self._rng = rng or np.random.default_rng()

    # -- requests ----------------------------------------------------------------------------------------

    def _params(self, request: LLMRequest) -> MessageCreateParamsNonStreaming:
        return {
            "model": self.model,
            "max_tokens": request.max_tokens,
            # The system prompt is the prefix many requests share (instructions, a hypothesis's question):
            # marking it lets the API serve it from the prompt cache.
            "system": [{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": request.user}],
            "tools": [
                {
                    "name": ANSWER_TOOL,
                    "description": "Record your answer. Always answer by calling this tool exactly once.",
                    "input_schema": request.schema,
                }
            ],
            "tool_choice": {"type": "tool", "name": ANSWER_TOOL},
        }

    def complete(self, request: LLMRequest) -> LLMResult:
        params = self._params(request)
        spent = Usage()
        for attempt in range(self.malformed_retries + 1):
            message = self._with_retries(lambda: self._client.messages.create(**params))
            usage = _usage(message, batch=False)
            spent = _add(spent, usage)
            try:
                data = parse_answer(message, request.schema)
            except LLMResponseError as exc:
                log.warning("malformed LLM answer (attempt %d): %s", attempt + 1, exc)
                error = exc
                continue
            return LLMResult(data=data, model=message.model or self.model, usage=spent)
        raise LLMResponseError(f"no usable answer after {self.malformed_retries + 1} attempts: {error}")

    def _with_retries(self, call: Callable[[], Any]) -> Any:
        for attempt in range(self.max_attempts):
            try:
                return call()
            except anthropic.APIStatusError as exc:
                if exc.status_code not in RETRYABLE_STATUS or attempt == self.max_attempts - 1:
                    raise LLMError(f"Anthropic API error {exc.status_code}: {_brief(exc)}") from exc
                delay = self._delay(attempt, exc.response.headers.get("retry-after"))
                log.info("Anthropic API %d, retrying in %.1fs", exc.status_code, delay)
            except anthropic.APIConnectionError as exc:
                if attempt == self.max_attempts - 1:
                    raise LLMError(f"cannot reach the Anthropic API: {exc}") from exc
                delay = self._delay(attempt, None)
                log.info("Anthropic API unreachable, retrying in %.1fs", delay)
            self._sleep(delay)
        raise AssertionError("unreachable")

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after is not None:
            try:
                return min(self.max_delay, max(0.0, float(retry_after)))
            except ValueError:
                pass
        backoff = self.base_delay * 2**attempt
        return min(self.max_delay, backoff * (0.5 + self._rng.random()))

    # -- batches -----------------------------------------------------------------------------------------

    def complete_batch(self, requests: Sequence[LLMRequest]) -> list[LLMResult | LLMFailure]:
        """Send all requests as one Message Batch, wait for it to end, and match results by custom_id."""
        if not requests:
            return []
        batch = self._with_retries(
            lambda: self._client.messages.batches.create(
                requests=[{"custom_id": f"r{i}", "params": self._params(r)} for i, r in enumerate(requests)]
            )
        )
        batch_id = batch.id
        log.info("Message Batch %s: %d requests", batch_id, len(requests))
        waited = 0.0
        while batch.processing_status != "ended":
            if waited >= self.max_batch_wait:
                self._with_retries(lambda: self._client.messages.batches.cancel(batch_id))
                raise LLMError(f"Message Batch {batch_id} did not end within {self.max_batch_wait:.0f}s")
            self._sleep(self.poll_interval)
            waited += self.poll_interval
            batch = self._with_retries(lambda: self._client.messages.batches.retrieve(batch_id))
        results: dict[str, LLMResult | LLMFailure] = {}
        for item in self._with_retries(lambda: list(self._client.messages.batches.results(batch_id))):
            index = int(item.custom_id[1:])
            result = item.result
            if result.type != "succeeded":
                detail = getattr(getattr(getattr(result, "error", None), "error", None), "message", "")
                results[item.custom_id] = LLMFailure(f"batch request {result.type}: {detail}".rstrip(": "))
                continue
            usage = _usage(result.message, batch=True)
            try:
                data = parse_answer(result.message, requests[index].schema)
            except LLMResponseError as exc:
                results[item.custom_id] = LLMFailure(f"malformed answer: {exc}", usage)
                continue
            results[item.custom_id] = LLMResult(data=data, model=result.message.model or self.model, usage=usage)
        return [results.get(f"r{i}", LLMFailure("missing from batch results")) for i in range(len(requests))]


def parse_answer(message: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """The structured answer in a Message: the forced tool call's input, else JSON in a text block."""
    data: Any = None
    for block in message.content:
        if block.type == "tool_use" and block.name == ANSWER_TOOL:
            data = block.input
            break
    else:
        text = "".join(block.text for block in message.content if block.type == "text").strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            reason = f" (stop_reason {message.stop_reason})" if message.stop_reason != "end_turn" else ""
            raise LLMResponseError(f"answer is not JSON{reason}: {exc}") from exc
    if not isinstance(data, dict):
        raise LLMResponseError(f"answer is {type(data).__name__}, not a JSON object")
    check_schema(data, schema)
    return data


def _usage(message: Any, *, batch: bool) -> Usage:
    u = message.usage
    return Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_read_tokens=u.cache_read_input_tokens or 0,
        cache_write_tokens=u.cache_creation_input_tokens or 0,
        batch=batch,
    )


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(
        a.input_tokens + b.input_tokens,
        a.output_tokens + b.output_tokens,
        a.cache_read_tokens + b.cache_read_tokens,
        a.cache_write_tokens + b.cache_write_tokens,
        b.batch,
    )


def _brief(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", body["error"]))
    return str(exc)[:200]
