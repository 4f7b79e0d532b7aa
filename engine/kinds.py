"""The kinds of segment rldiff analyses (the store's `segments.kind`). Imports nothing, so anything may use it."""

SEGMENT_KINDS: tuple[str, ...] = ("reasoning", "text", "tool_call")
