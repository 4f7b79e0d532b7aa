"""The cautions a validated finding carries, read from its provenance: it may be longer (shorter) turns
(`engine.hypotheses.equal_length`), fewer (more) turns a rollout (`engine.hypotheses.turn_count`), or one task's
change (`engine.hypotheses.task_spread`). Free of numpy and polars: the TUI imports it."""

from __future__ import annotations

from typing import Any

from engine.hypotheses.equal_length import EqualLength
from engine.hypotheses.task_spread import TaskSpread
from engine.hypotheses.turn_count import TurnCount

# provenance key -> (what it holds, the flag `rldiff hypothesis list` shows)
_KINDS: dict[str, tuple[type[EqualLength] | type[TurnCount] | type[TaskSpread], str]] = {
    "equal_length": (EqualLength, "turn length"),
    "turn_count": (TurnCount, "turn count"),
    "task_spread": (TaskSpread, "one task's"),
}


def _cautioned(provenance: dict[str, Any] | None) -> list[str]:
    """The provenance keys whose test cautions the finding."""
    return [key for key in _KINDS if ((provenance or {}).get(key) or {}).get("caution")]


def has_caution(provenance: dict[str, Any] | None) -> bool:
    """Whether a hypothesis's held-out result carries a caution."""
    return bool(_cautioned(provenance))


def caution_flag(provenance: dict[str, Any] | None) -> str:
    """E.g. '(may be turn length) ' before a statement in a list; '' without a caution."""
    keys = _cautioned(provenance)
    return f"(may be {' or '.join(_KINDS[k][1] for k in keys)}) " if keys else ""


def caution_line(provenance: dict[str, Any] | None, direction: str) -> str | None:
    """The cautions a validated finding carries, in words (None without one): the report's line."""
    sign = 1.0 if direction == "increase" else -1.0
    texts = [_KINDS[k][0](**(provenance or {})[k]).caution_text(sign) for k in _cautioned(provenance)]
    return "; ".join(texts) or None
