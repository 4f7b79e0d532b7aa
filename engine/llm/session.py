"""An `LLMSession` puts the response cache and the cost cap in front of an `LLMClient`."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from engine.llm.cache import ResponseCache
from engine.llm.client import LLMClient, LLMError, LLMFailure, LLMRequest, LLMResult
from engine.llm.cost import CostMeter, estimate_usd
from engine.store import Store

log = logging.getLogger(__name__)

# Fewer uncached requests than this go one by one; more go through the backend's batch path.
BATCH_THRESHOLD = 20


class LLMSession:
    """What stages talk to: cached, metered, capped LLM calls."""

    def __init__(self, client: LLMClient, store: Store, max_cost: float) -> None:
        self.client = client
        self.cache = ResponseCache(store)
        self.meter = CostMeter(max_cost=max_cost)

    @property
    def model(self) -> str:
        return self.client.model

    def ask(self, request: LLMRequest) -> LLMResult:
        """One answer, from the cache when this exact prompt was answered before."""
        key = request.prompt_hash(self.model)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        self.meter.check(estimate_usd(self.model, request))
        result = self.client.complete(request)
        self.cache.put(key, result, self.meter.charge(result.model, result.usage))
        return result

    def ask_many(self, requests: Sequence[LLMRequest]) -> list[LLMResult | LLMFailure]:
        """Answers in request order; cached ones are reused, the rest are batched when there are many.

        Requests the cost cap leaves no room for come back as `LLMFailure("cost cap reached ...")`.
        """
        keys = [r.prompt_hash(self.model) for r in requests]
        hits = self.cache.get_many(list(set(keys)))
        results: list[LLMResult | LLMFailure | None] = [hits.get(k) for k in keys]
        todo = [i for i, r in enumerate(results) if r is None]
        # Identical prompts in one call are asked once.
        first: dict[str, int] = {}
        for i in todo:
            first.setdefault(keys[i], i)
        unique = list(first.values())
        batch = len(unique) >= BATCH_THRESHOLD
        affordable: list[int] = []
        budget = self.meter.remaining()
        for i in unique:
            cost = estimate_usd(self.model, requests[i], batch=batch)
            if cost > budget:
                break
            budget -= cost
            affordable.append(i)
        if len(affordable) < len(unique):
            log.warning(
                "LLM cost cap: %d of %d requests not sent (spent $%.2f of $%.2f)",
                len(unique) - len(affordable),
                len(unique),
                self.meter.spent,
                self.meter.max_cost,
            )
        answers = self._send([requests[i] for i in affordable], batch)
        for i, answer in zip(affordable, answers, strict=True):
            if isinstance(answer, LLMResult):
                self.cache.put(keys[i], answer, self.meter.charge(answer.model, answer.usage))
            else:
                self.meter.charge(self.model, answer.usage)
            results[i] = answer
        capped = LLMFailure(f"cost cap reached (--max-cost ${self.meter.max_cost:.2f})")
        return [r if r is not None else (results[first[keys[i]]] or capped) for i, r in enumerate(results)]

    def _send(self, requests: list[LLMRequest], batch: bool) -> list[LLMResult | LLMFailure]:
        if batch:
            try:
                return self.client.complete_batch(requests)
            except LLMError as exc:  # the batch as a whole failed: every request failed
                log.warning("LLM batch of %d requests failed: %s", len(requests), exc)
                return [LLMFailure(str(exc)) for _ in requests]
        out: list[LLMResult | LLMFailure] = []
        for request in requests:
            try:
                out.append(self.client.complete(request))
            except LLMError as exc:  # one failed request must not lose the others' answers
                log.warning("LLM request failed: %s", exc)
                out.append(LLMFailure(str(exc)))
        return out
