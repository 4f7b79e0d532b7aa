"""Words, stopwords and n-grams: one tokenizer for feature labels, drafting and the lexical n-gram family.

Feature labels name n-grams (`features.top_ngrams`) that drafting then looks for in segments, so both read
words the same way: lower case, straight or curly apostrophes inside a word (`don’t`, `customer's`), digit
runs as '#' (so "$85" and "$120" are both "$ #"), and any word mixing letters and digits (codes, ids, flight
numbers) as '<id>'. Labels may show numbers and symbols ("$ # per"); drafted n-grams hold words only
(`ngrams`), since a drafted n-gram becomes a regex over the raw text and '#' or '<id>' name no text.
"""

from __future__ import annotations

import re
from functools import lru_cache

_WORD = re.compile(r"[A-Za-z0-9_]+(?:['’][A-Za-z]+)?|[?!$€£{}]")
_DIGITS = re.compile(r"\d+")
_LETTERS = re.compile(r"[a-z]")
ID = "<id>"  # a word mixing letters and digits: it names one task's object, not a behaviour
MAX_N = 3  # longest n-gram, in words
STOPWORDS = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being it its this that "
    "these those i you he she we they me him her us them my your our their do does did have has had will would "
    "can could should may might shall not no so than then there here what which who whom how when where why "
    "all any some such into about over also just up out very".split()
)

Gram = tuple[str, ...]


@lru_cache(maxsize=16384)
def words(text: str) -> tuple[tuple[str, int, int], ...]:
    """Normalised words with their character spans (see the module docstring)."""
    found = []
    for m in _WORD.finditer(text):
        word = m.group().lower()
        if _DIGITS.search(word):
            word = ID if _LETTERS.search(word) else _DIGITS.sub("#", word)
        found.append((word, m.start(), m.end()))
    return tuple(found)


def informative(word: str) -> bool:
    """A word a reader learns something from: not a stopword, a number ('#'), an id or a symbol. An n-gram
    needs one ("$ # per" tells of prices per something; "# # at" or "$ #" alone tell little)."""
    return word not in STOPWORDS and word != ID and _LETTERS.search(word) is not None


@lru_cache(maxsize=1 << 16)
def informative_words(text: str) -> frozenset[str]:
    """The informative words of a text (`informative`: no stopword, number, id or symbol), each once. Cached:
    drafting asks it of the same discovery sentences for every source."""
    return frozenset(w for w, _, _ in words(text) if informative(w))


def _plain(word: str) -> bool:
    """A word that is letters (not a number, an id or a symbol), so a regex can find it in the raw text."""
    return word != ID and _LETTERS.search(word) is not None


def all_ngrams(text: str, max_n: int = MAX_N) -> set[Gram]:
    """Every n-gram of 1..max_n words of a text (for corpus frequencies)."""
    ws = [w for w, _, _ in words(text)]
    return {tuple(ws[i : i + n]) for n in range(1, max_n + 1) for i in range(len(ws) - n + 1)}


def ngrams(text: str, max_n: int = MAX_N) -> set[str]:
    """The n-grams drafting and the lexical family count, each one a regex can find (`ngram_regex`): words
    only, at least one of them informative, joined by spaces as labels write theirs."""
    return {
        " ".join(g) for g in all_ngrams(text, max_n) if all(_plain(w) for w in g) and any(informative(w) for w in g)
    }


def ngram_regex(grams: list[str]) -> str:
    """A case-insensitive pattern (use with ignore_case) matching any of `grams` as whole words."""
    # Words of an n-gram may be separated by any punctuation as well as space, as the tokenizer skips it.
    parts = [r"\W+".join(re.escape(w) for w in g.split()) for g in sorted(grams, key=lambda g: (-len(g), g))]
    return r"\b(?:" + "|".join(parts) + r")\b"
