"""Responses kept in the store's `llm_cache` table, keyed by prompt hash: a re-run asks nothing twice."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from engine.llm.client import LLMResult, Usage
from engine.store import Store
from engine.store.queries import llm


class ResponseCache:
    """Read and write cached structured answers."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, prompt_hash: str) -> LLMResult | None:
        row = llm.cached_response(self.store, prompt_hash)
        if row is None:
            return None
        return LLMResult(data=json.loads(row[1]), model=row[0], cached=True)

    def get_many(self, hashes: list[str]) -> dict[str, LLMResult]:
        if not hashes:
            return {}
        rows = llm.cached_responses(self.store, hashes)
        return {h: LLMResult(data=json.loads(r), model=m, cached=True) for h, m, r in rows}

    def put(self, prompt_hash: str, result: LLMResult, cost: float) -> None:
        """Keep one answer (the first one kept for a hash wins)."""
        usage: Usage = result.usage
        llm.keep_response(
            self.store,
            prompt_hash,
            result.model,
            json.dumps(result.data),
            usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
            usage.output_tokens,
            cost,
            datetime.now(UTC),
        )

    def total_cost(self) -> float:
        """What every cached answer cost, in US dollars."""
        return llm.total_cost(self.store)
