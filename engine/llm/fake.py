"""A fake `LLMClient` for tests and dry runs: answers come from a Python function, usage from text length."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.llm.client import LLMError, LLMFailure, LLMRequest, LLMResult, Usage, check_schema


class FakeLLMClient:
    """Answers each request with `responder(request)`; records every request it was sent."""

    def __init__(self, responder: Callable[[LLMRequest], dict[str, Any]], model: str = "fake-model") -> None:
        self.model = model
        self.responder = responder
        self.requests: list[LLMRequest] = []
        self.batches: list[int] = []

    def _answer(self, request: LLMRequest, batch: bool) -> LLMResult:
        self.requests.append(request)
        data = self.responder(request)
        check_schema(data, request.schema)
        usage = Usage(input_tokens=(len(request.system) + len(request.user)) // 4, output_tokens=50, batch=batch)
        return LLMResult(data=data, model=self.model, usage=usage)

    def complete(self, request: LLMRequest) -> LLMResult:
        return self._answer(request, batch=False)

    def complete_batch(self, requests: Sequence[LLMRequest]) -> list[LLMResult | LLMFailure]:
        self.batches.append(len(requests))
        out: list[LLMResult | LLMFailure] = []
        for request in requests:
            try:
                out.append(self._answer(request, batch=True))
            except LLMError as exc:
                out.append(LLMFailure(str(exc)))
        return out
