"""Rollout text is untrusted: fence it off from the instructions in a prompt."""

from __future__ import annotations

import hashlib

from engine import safe_text

MAX_CHARS = 2000


def clean(text: str, max_chars: int = MAX_CHARS) -> str:
    """Strip control sequences and bidi/zero-width characters, and cut to `max_chars` (marking the cut)."""
    text = safe_text.clean(text)
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


def fence_line(text: str, label: str, max_chars: int = 300) -> str:
    """A short piece of rollout-derived text (a feature label, a tool name, n-grams) cleaned to one line, cut
    to `max_chars`, and fenced like any other data."""
    return fence(safe_text.line(text, max_chars), label)
