"""One tokenizer for feature labels and drafting: what a label names, drafting can find and match."""

from __future__ import annotations

import re

from engine.features.labels import Example, context_ngrams
from engine.text import ngram_regex, ngrams, words

# Reasoning as models write it: quoted words, curly apostrophes, ordinals, ids, prices.
TEXT = "The user typed 'cancel' twice. I don’t see the 2nd flight HAT045 at $85 per bag; I'll ask again."


def all_hot(text: str) -> Example:
    return Example(text, "reasoning", [(s, e, 1.0) for _, s, e in words(text)])


def test_label_ngrams_of_words_are_ngrams_drafting_counts() -> None:
    """A label n-gram made of words is one drafting can find. Before the shared tokenizer, drafting read
    `'cancel'` as "cancel'" and `don’t` as "don" + "t", so the labels' "cancel" and "don’t see" never matched,
    and "2nd" became the word "nd"."""
    label_grams = {" ".join(g) for g in context_ngrams(all_hot(TEXT))}
    drafted = ngrams(TEXT)
    words_only = {g for g in label_grams if "<id>" not in g and not re.search(r"[#$?!]", g)}
    assert {"cancel", "typed cancel", "don’t see", "i'll ask"} <= words_only
    assert words_only == drafted
    assert not any("nd" in g.split() or "cancel'" in g for g in drafted)


def test_labels_keep_numbers_and_symbols_that_drafting_leaves_out() -> None:
    label_grams = {" ".join(g) for g in context_ngrams(all_hot(TEXT))}
    assert "$ # per" in label_grams and "<id> at" not in label_grams  # an id alone informs no one
    assert not any(re.search(r"<id>|#|\$", g) for g in ngrams(TEXT))  # no regex finds '#' or '<id>' in the text


def test_every_drafted_ngram_matches_the_text_it_came_from() -> None:
    grams = ngrams(TEXT)
    assert grams
    for gram in grams:
        assert re.search(ngram_regex([gram]), TEXT, re.IGNORECASE), gram


def test_stopwords_alone_are_no_ngram() -> None:
    assert ngrams("and then it was just there") == set()
    assert ngrams("Just the refund") == {"refund", "the refund", "just the refund"}
