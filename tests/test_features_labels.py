"""Offline labels: distinctive n-grams where a feature fires, contrasted with the corpus, plus snippets."""

from __future__ import annotations

from engine.features.labels import (
    Example,
    context_ngrams,
    corpus_frequencies,
    label_feature,
    snippet,
)
from engine.text import words


def example(text: str, hot: str, kind: str = "text", weak: float = 0.1) -> Example:
    """Tokens at every word; the words in `hot` get activation 1.0, the others `weak`."""
    tokens = [(s, e, 1.0 if w in hot.split() else weak) for w, s, e in words(text)]
    return Example(text, kind, tokens)


CORPUS = [
    "Your flight is confirmed for tomorrow.",
    "I can help you with your booking today.",
    "Please provide your user id.",
    "The flight departs at noon.",
] * 25


def label_of(examples: list[Example]) -> tuple[str, list[str]]:
    contexts = [context_ngrams(e) for e in examples]
    candidates = {g for c in contexts for g in c}
    counts, n = corpus_frequencies(CORPUS + [e.text for e in examples], candidates)
    result = label_feature(examples, contexts, counts, n)
    return result.label, [g["ngram"] for g in result.ngrams]


def test_distinctive_words_beat_words_common_everywhere() -> None:
    examples = [
        example("I can refund your flight today.", "refund"),
        example("A full refund will be issued to your card.", "refund"),
        example("Your flight is not eligible for a refund.", "refund"),
        example("We will refund the difference.", "refund"),
    ]
    label, grams = label_of(examples)
    assert label.startswith("reply: ")
    assert grams[0] == "refund"
    assert "flight" not in grams and "your" not in grams


def test_numbers_and_ids_are_normalised() -> None:
    assert [w for w, _, _ in words("Flight HAT069 costs $85 on May 20")] == [
        "flight",
        "<id>",
        "costs",
        "$",
        "#",
        "on",
        "may",
        "#",
    ]
    examples = [example(f"The total is ${n} per passenger.", "$ " + str(n)) for n in (85, 120, 43, 99)]
    _, grams = label_of(examples)
    assert any("$ #" in g for g in grams)  # all amounts are one n-gram (with its context: "$ # per")


def test_tool_call_features_name_their_tool() -> None:
    examples = [
        example(f'transfer_to_human_agents {{"summary": "user {n} wants a refund"}}', "summary", kind="tool_call")
        for n in range(4)
    ]
    label, _ = label_of(examples)
    assert label.startswith("tool call transfer_to_human_agents: ")


def test_without_distinctive_words_the_label_shows_the_strongest_context() -> None:
    examples = [Example("Details: - **Price**: 85", "text", [(20, 21, 2.0), (0, 7, 0.1)])]
    label, grams = label_of(examples)
    assert grams == [] and label.startswith("reply: “:” as in ") and "⟦:⟧" in label


def test_snippets_are_single_line_and_free_of_control_characters() -> None:
    text = "line one\nline \x1b[31mtwo\x07 has the refund word\tin it"
    start = text.index("refund")
    shown = snippet(Example(text, "text", [(start, start + 6, 1.0)]))
    assert "⟦refund⟧" in shown and "\n" not in shown and "\x1b" not in shown and "\x07" not in shown


def test_ngrams_of_only_numbers_ids_and_stopwords_are_not_labels() -> None:
    examples = [example(f"Departs at {h}:00 on May {d}, flight HAT0{d}.", "at") for h, d in ((9, 12), (15, 14))]
    examples += [example(f"Arrives at {h}:30 on May {d}.", "at") for h, d in ((11, 3), (8, 21))]
    _, grams = label_of(examples)
    assert grams and all(
        any(c.isalpha() and w not in ("at", "on", "<id>") for w in g.split() for c in w) for g in grams
    )
    assert "# # at" not in grams and "at #" not in grams
