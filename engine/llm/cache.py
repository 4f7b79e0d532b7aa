"""Responses kept in the store's `llm_cache` table, keyed by prompt hash: a re-run asks nothing twice."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from engine.llm.client import LLMResult, Usage
from engine.store import Store


class ResponseCache:
    """Read and write cached structured answers."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, prompt_hash: str) -> LLMResult | None:
        row = self.store.execute(
            "SELECT model, response FROM llm_cache WHERE prompt_hash = ?", [prompt_hash]
        ).fetchone()
        if row is None:
            return None
        return LLMResult(data=json.loads(row[1]), model=row[0], cached=True)

    def get_many(self, hashes: list[str]) -> dict[str, LLMResult]:
        if not hashes:
            return {}
        frame = self.store.frame(
            "SELECT prompt_hash, model, response FROM llm_cache WHERE prompt_hash IN (SELECT unnest(?::VARCHAR[]))",
            [hashes],
        )
        return {h: LLMResult(data=json.loads(r), model=m, cached=True) for h, m, r in frame.iter_rows()}

    def put(self, prompt_hash: str, result: LLMResult, cost: float) -> None:
        """Keep one answer (the first one kept for a hash wins)."""
        usage: Usage = result.usage
        row = {
            "prompt_hash": prompt_hash,
            "model": result.model,
            "response": json.dumps(result.data),
            "input_tokens": usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
            "output_tokens": usage.output_tokens,
            "cost_usd": cost,
            "created_at": datetime.now(UTC),
        }
        self.store.execute(
            "INSERT INTO llm_cache BY NAME SELECT * FROM (SELECT ? AS prompt_hash, ? AS model, ?::JSON AS "
            "response, ? AS input_tokens, ? AS output_tokens, ? AS cost_usd, ? AS created_at) "
            "ON CONFLICT DO NOTHING",
            list(row.values()),
        )

    def total_cost(self) -> float:
        return float(self.store.scalar("SELECT coalesce(sum(cost_usd), 0) FROM llm_cache"))
