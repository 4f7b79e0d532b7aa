"""Rollout text is untrusted: fence it off from the instructions in a prompt."""

from __future__ import annotations

import hashlib
import re

# C0/C1 control characters except tab and newline, and ANSI escape sequences.
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_CHARS = 2000


def clean(text: str, max_chars: int = MAX_CHARS) -> str:
    """Strip terminal control sequences and cut to `max_chars` (marking the cut)."""
    text = _CONTROL.sub("", text)
    return text if len(text) <= max_chars else text[:max_chars] + " [...cut]"


def fence(text: str, label: str) -> str:
    """Wrap `text` in a tag the text cannot close: the tag carries a nonce derived from the text itself.

    The prompts tell the model that whatever lies inside `<data-NONCE>` tags is data to describe, never
    instructions to follow.
    """
    body = clean(text)
    nonce = hashlib.sha256(body.encode()).hexdigest()[:8]
    body = body.replace(f"data-{nonce}", f"data_{nonce}")
    return f'<data-{nonce} label="{label}">\n{body}\n</data-{nonce}>'
