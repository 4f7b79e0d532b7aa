"""Tool results as compact JSON: short floats, clipped text, and no raw control or bidi characters.

Rollout text is untrusted. JSON already escapes C0 controls; C1 controls (which some terminals act on) and
bidirectional overrides (which make text read differently than it is) are escaped too, so a client that
prints a result shows them as `\\u` escapes and the text round-trips exactly.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import re
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

_UNSAFE = re.compile("[\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def jsonable(value: Any) -> Any:
    """`value` as plain JSON data: floats to 4 significant digits, NaN and infinities to null."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real | Decimal):
        x = float(value)
        return float(f"{x:.4g}") if math.isfinite(x) else None
    if isinstance(value, datetime | date):
        return value.isoformat(timespec="seconds") if isinstance(value, datetime) else value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, UUID):
        return str(value)
    return str(value)


def to_json(value: Any) -> str:
    """Compact JSON text for a tool result."""
    text = json.dumps(jsonable(value), ensure_ascii=False, separators=(",", ":"))
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def clip(text: str | None, max_chars: int) -> str | None:
    """`text` cut to `max_chars`, saying how much was left out."""
    if text is None or len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}…[{len(text) - max_chars} more chars]"
