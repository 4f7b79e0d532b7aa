"""Token and cost accounting with a spending cap."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from engine.llm.client import CostCapReached, LLMRequest, Usage

log = logging.getLogger(__name__)

# USD per million tokens (input, output), by model id prefix; the longest matching prefix wins. Published list
# prices as of 2026-11; cache writes cost 1.25x input, cache reads 0.1x input, Message Batches half.
PRICES: dict[str, tuple[float, float]] = {
    "claude-fable": (10.0, 50.0),
    "claude-opus-5-5": (4.0, 20.0),
    "claude-opus-5": (5.0, 25.0),
    "claude-opus-4": (5.0, 25.0),
    "claude-sonnet-5": (2.0, 10.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-haiku-5": (0.10, 0.50),
    "claude-haiku-4": (1.0, 5.0),
}
# Unknown models are priced at the most expensive known rate, so the cap errs on the side of stopping early.
FALLBACK_PRICE = max(PRICES.values())
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.1
BATCH_FACTOR = 0.5
CHARS_PER_TOKEN = 3.5  # a conservative estimate for English and JSON, used only before a call


def price(model: str) -> tuple[float, float]:
    """(input, output) USD per million tokens for `model`."""
    matches = [p for p in PRICES if model.startswith(p)]
    return PRICES[max(matches, key=len)] if matches else FALLBACK_PRICE


def cost_usd(model: str, usage: Usage) -> float:
    """What `usage` cost on `model`, in USD."""
    rate_in, rate_out = price(model)
    dollars = (
        usage.input_tokens * rate_in
        + usage.cache_write_tokens * rate_in * CACHE_WRITE_FACTOR
        + usage.cache_read_tokens * rate_in * CACHE_READ_FACTOR
        + usage.output_tokens * rate_out
    ) / 1e6
    return dollars * (BATCH_FACTOR if usage.batch else 1.0)


def estimate_usd(model: str, request: LLMRequest, *, batch: bool = False) -> float:
    """An upper-end estimate of one request's cost: its characters as tokens, plus all of `max_tokens`."""
    tokens_in = int((len(request.system) + len(request.user) + len(str(request.schema))) / CHARS_PER_TOKEN)
    return cost_usd(model, Usage(input_tokens=tokens_in, output_tokens=request.max_tokens, batch=batch))


@dataclass
class CostMeter:
    """Adds up what LLM calls cost and refuses calls once the cap would be passed."""

    max_cost: float
    spent: float = 0.0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def remaining(self) -> float:
        return max(0.0, self.max_cost - self.spent)

    def check(self, estimate: float) -> None:
        """Raise `CostCapReached` when a call estimated at `estimate` USD would pass the cap."""
        if self.spent + estimate > self.max_cost:
            raise CostCapReached(
                f"LLM cost cap reached: spent ${self.spent:.2f} of --max-cost ${self.max_cost:.2f}; the next "
                f"call (about ${estimate:.3f}) is not made. Raise --max-cost to continue."
            )

    def charge(self, model: str, usage: Usage) -> float:
        """Record a finished call; returns its cost."""
        dollars = cost_usd(model, usage)
        self.spent += dollars
        self.calls += 1
        self.input_tokens += usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        self.output_tokens += usage.output_tokens
        return dollars

    def summary(self) -> dict[str, float | int]:
        return {
            "llm_calls": self.calls,
            "llm_cost_usd": round(self.spent, 4),
            "llm_input_tokens": self.input_tokens,
            "llm_output_tokens": self.output_tokens,
        }
