"""Where each format keeps a model's reasoning, so none is dropped silently or read as text.

- a `reasoning` / `reasoning_content` string on the message (OpenAI-compatible chat, DeepSeek, vLLM, xAI);
- `thinking_blocks` on the message (LiteLLM's Anthropic and Gemini thinking);
- the provider's raw response kept beside the message (tau2's `raw_data`): an OpenAI-compatible choice
  `{message: {...}}`, a completion `{choices: [{message: {...}}]}`, or a bare message;
- `<think>...</think>` (or `<thinking>`) at the start of the content, as open reasoning models write it.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[redacted thinking]"  # what a redacted_thinking block records: its content is encrypted, not text

_FIELDS = ("reasoning_content", "reasoning")
# An opening think tag, then everything up to its closing tag; only at the start of the content (leading
# whitespace allowed), since a tag later in a reply is text the model wrote about tags, not its reasoning.
_THINK = re.compile(r"\A\s*<(think|thinking)>(.*?)</\1>\s*", re.DOTALL)


def join(*parts: str | None) -> str | None:
    """Reasoning parts in order, blank ones left out; None when nothing is left."""
    kept = [p.strip() for p in parts if isinstance(p, str) and p.strip()]
    return "\n\n".join(kept) or None


def split_think(content: str) -> tuple[str | None, str]:
    """(`<think>` block at the start of `content`, the rest); (None, content) when there is none."""
    match = _THINK.match(content)
    if match is None:
        return None, content
    return match.group(2).strip() or None, content[match.end() :]


def block_text(block: dict[str, Any]) -> str | None:
    """The reasoning of one thinking block (Anthropic or LiteLLM shape)."""
    if block.get("type") == "redacted_thinking":
        return REDACTED
    value = block.get("thinking", block.get("text"))
    return value if isinstance(value, str) else None


def of_message(message: dict[str, Any]) -> str | None:
    """Reasoning a message object carries in its own fields and thinking blocks."""
    fields = [message.get(key) for key in _FIELDS if isinstance(message.get(key), str)]
    blocks = message.get("thinking_blocks")
    thoughts = [block_text(b) for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []
    return join(*fields[:1], *thoughts)


def of_raw_response(raw: Any) -> str | None:
    """Reasoning inside a provider's raw response (a choice, a completion or a bare message)."""
    if not isinstance(raw, dict):
        return None
    choices = raw.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        raw = choices[0]
    message = raw.get("message")
    return of_message(message if isinstance(message, dict) else raw)
