"""How segments become reader input: the kind prefix and the chunking of long segments."""

from __future__ import annotations

import pytest

from engine.features.inputs import KIND_PREFIX, plan_chunks, reader_text


@pytest.mark.parametrize("n_tokens", [0, 1, 5, 16, 17, 40, 333])
@pytest.mark.parametrize(("body", "context"), [(16, 0), (16, 4), (16, 8), (16, 30), (3, 1)])
def test_chunks_report_every_token_exactly_once(n_tokens: int, body: int, context: int) -> None:
    chunks = plan_chunks(n_tokens, body, context)
    reported = [t for c in chunks for t in range(c.own_start, c.end)]
    assert reported == list(range(n_tokens))
    for chunk in chunks:
        assert chunk.end - chunk.start <= body
        assert chunk.start <= chunk.own_start
        assert chunk.own_start - chunk.start <= max(context, 0)


def test_later_chunks_carry_left_context() -> None:
    chunks = plan_chunks(40, 16, 4)
    assert chunks[0].start == 0 and chunks[0].end == 16
    assert [(c.start, c.own_start, c.end) for c in chunks[1:]] == [(12, 16, 28), (24, 28, 40)]


def test_a_window_without_room_for_text_is_an_error() -> None:
    with pytest.raises(ValueError, match="no room"):
        plan_chunks(10, 0, 0)


def test_reader_text_keeps_the_segment_verbatim_after_a_kind_prefix() -> None:
    text, prefix_len = reader_text("tool_call", 'get_order {"id":1}')
    assert text[prefix_len:] == 'get_order {"id":1}'
    assert text[:prefix_len] == KIND_PREFIX["tool_call"] != ""
    assert reader_text("text", "hello") == ("hello", 0)
