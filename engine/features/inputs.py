"""How a segment becomes reader input, and how a segment longer than the reader's window is chunked.

The reader sees `PREFIX + segment.text`: the prefix names the kind of segment so that the same words read
differently in a tool call, in reasoning and in a reply, while the segment text stays verbatim, so every
token maps back to character offsets of `segments.text` (the TUI highlights them). Activations of the
prefix tokens and of special tokens are never reported: they describe the kind, which is known already.

A segment longer than the window is split into consecutive chunks of its tokens; each later chunk starts
with `context` tokens of the text before it, read again as context but reported only once (by the chunk
that owns them). Nothing is dropped: every token of every segment is reported exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass

# Bump when the reader text, the chunking or the padding (`engine.features.reader.padded_width`) changes: it is
# part of the activation cache key.
INPUT_FORMAT = 2

KIND_PREFIX: dict[str, str] = {"reasoning": "thinking: ", "text": "", "tool_call": "tool call: "}


def reader_text(kind: str, text: str) -> tuple[str, int]:
    """The reader input for a segment, and the length of the prefix in front of `text`."""
    prefix = KIND_PREFIX.get(kind, "")
    return prefix + text, len(prefix)


@dataclass(frozen=True)
class Chunk:
    """Text tokens [start, end) are read; tokens [own_start, end) are reported by this chunk."""

    start: int
    own_start: int
    end: int


def plan_chunks(n_tokens: int, body: int, context: int) -> list[Chunk]:
    """Cover `n_tokens` text tokens with chunks of at most `body` tokens, each reporting new tokens only."""
    if body < 1:
        raise ValueError(f"reader window leaves no room for text (body={body})")
    context = min(context, body // 2)
    if n_tokens <= body:
        return [Chunk(0, 0, n_tokens)]
    chunks = [Chunk(0, 0, body)]
    while chunks[-1].end < n_tokens:
        own_start = chunks[-1].end
        start = own_start - context
        chunks.append(Chunk(start, own_start, min(start + body, n_tokens)))
    return chunks
