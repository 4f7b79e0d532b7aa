"""A time budget for labelling one hypothesis, and a way to cancel it from another thread.

A verifier's regexes each have a time limit per segment, but a test labels every held-out segment: slow
patterns over thousands of segments would hold the store (and, in the MCP server, every other call) for
minutes. Past its budget a test stops and is recorded inconclusive, "labeler too slow".
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from engine.errors import RldiffError
from engine.hypotheses.reasons import TOO_SLOW

# Seconds one hypothesis test may spend labelling: a verifier over a large held-out split (100k segments,
# a few regexes) takes a few seconds; a minute means patterns that backtrack on most segments.
TEST_BUDGET_S = 60.0


class LabelerTooSlow(RldiffError):
    """Labelling ran past its budget."""


class Cancelled(RldiffError):
    """The caller cancelled the test (e.g. an MCP client cancelled its request)."""


@dataclass
class Budget:
    """Checked between segments: raises `LabelerTooSlow` past `seconds`, `Cancelled` once `cancel` is set."""

    seconds: float = TEST_BUDGET_S
    cancel: threading.Event | None = None
    _deadline: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.seconds

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("cancelled by the caller")
        if time.monotonic() > self._deadline:
            raise LabelerTooSlow(f"{TOO_SLOW}: labelling took longer than its {self.seconds:g} s budget")
