"""The sentence splitter on awkward agent text: lists, code, decimals, abbreviations, JSON, markdown."""

from __future__ import annotations

import pytest

from engine.features.sentences import split_sentences


def sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in split_sentences(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "I checked e.g. the order no. 5 vs. the refund. The fee is $3.50, i.e. 2.5%. Done!",
            ["I checked e.g. the order no. 5 vs. the refund.", "The fee is $3.50, i.e. 2.5%.", "Done!"],
        ),
        (
            "Steps:\n1. Look up the user.\n2. Check the status.\n\n- **Refund**: $5244\n- **Cabin**: economy",
            ["Steps:", "1. Look up the user.", "2. Check the status.", "- **Refund**: $5244", "- **Cabin**: economy"],
        ),
        (
            "Retrying:\n```python\nx = 1. \nprint(x). Done.\n```\nThat works.",
            ["Retrying:", "```python\nx = 1. \nprint(x). Done.\n```", "That works."],
        ),
        (
            '{\n  "user_id": "mia_li_3668",\n  "note": "Changed plans. Sorry."\n}',
            ['{\n  "user_id": "mia_li_3668",\n  "note": "Changed plans. Sorry."\n}'],
        ),
        (
            'Sent {"note": "Call back. Urgent."} and it failed. Retry.',
            ['Sent {"note": "Call back. Urgent."} and it failed.', "Retry."],
        ),
        (
            "# Plan\nVersion 2.1.3 fixed it. Mr. Lee paid 1,250.75 USD at 3 p.m. on Jan. 4.\n---\nOK?",
            ["# Plan", "Version 2.1.3 fixed it.", "Mr. Lee paid 1,250.75 USD at 3 p.m. on Jan. 4.", "OK?"],
        ),
    ],
)
def test_awkward_agent_text_splits_where_a_reader_would(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


def test_spans_are_trimmed_ordered_and_cover_every_word() -> None:
    text = "  First one.   Second (see item 2) here!\n\n  * third\n\n\n"
    spans = split_sentences(text)
    assert spans == sorted(spans)
    assert all(text[a:b] == text[a:b].strip() and a < b for a, b in spans)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:], strict=False))
    covered = "".join(text[a:b] for a, b in spans)
    assert "".join(text.split()) == "".join(covered.split())


def test_text_without_words_has_no_sentences() -> None:
    assert split_sentences("") == []
    assert split_sentences("   \n---\n***\n") == []


def test_an_unclosed_parenthesis_does_not_join_the_lines_after_it() -> None:
    assert sentences("Options (pick one:\n- refund\n- exchange") == ["Options (pick one:", "- refund", "- exchange"]
