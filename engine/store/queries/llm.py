"""The LLM response cache (`llm_cache`): answers by prompt hash, and what they cost."""

from __future__ import annotations

from datetime import datetime

from engine.store.queries.base import Executor, fetch_rows, fetchone, first_row


def cached_response(con: Executor, prompt_hash: str) -> tuple[str, str] | None:
    """(model, response JSON) kept for a prompt hash, or None."""
    row = first_row(con, "SELECT model, response FROM llm_cache WHERE prompt_hash = ?", [prompt_hash])
    return None if row is None else (row[0], row[1])


def cached_responses(con: Executor, hashes: list[str]) -> list[tuple[str, str, str]]:
    """(prompt hash, model, response JSON) of those of `hashes` that are kept."""
    return [
        (h, m, r)
        for h, m, r in fetch_rows(
            con,
            "SELECT prompt_hash, model, response FROM llm_cache WHERE prompt_hash IN (SELECT unnest(?::VARCHAR[]))",
            [hashes],
        )
    ]


def keep_response(
    con: Executor,
    prompt_hash: str,
    model: str,
    response: str,
    input_tokens: int,
    output_tokens: int,
    cost_usd: float,
    created_at: datetime,
) -> None:
    """Keep one answer (JSON); the first one kept for a hash wins."""
    con.execute(
        "INSERT INTO llm_cache BY NAME SELECT * FROM (SELECT ? AS prompt_hash, ? AS model, ?::JSON AS "
        "response, ? AS input_tokens, ? AS output_tokens, ? AS cost_usd, ? AS created_at) "
        "ON CONFLICT DO NOTHING",
        [prompt_hash, model, response, input_tokens, output_tokens, cost_usd, created_at],
    )


def total_cost(con: Executor) -> float:
    """What every kept answer cost, in US dollars."""
    return float(fetchone(con, "SELECT coalesce(sum(cost_usd), 0) FROM llm_cache")[0])
