"""Offline labels for SAE features: distinctive words and n-grams where the feature fires, plus snippets.

For each feature, the words under its strongly activating tokens (at least half the example's peak) in its
top-activating segments, with one word of context either side, give candidate n-grams (1 to 3 words).
Each candidate is scored by how much more often it appears in those contexts than in the corpus
(share x log of share over corpus share: a weighted lift), so words common everywhere ("the", "your")
lose to words specific to the feature. An n-gram must hold an informative word (not only stopwords,
numbers, ids or symbols). The label names the kind of segment the feature lives in and up to
three distinctive n-grams; the snippets show the strongest activation in context.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from engine import safe_text
from engine.text import MAX_N, Gram, all_ngrams, informative, words

KIND_NAMES = {"text": "reply", "reasoning": "reasoning", "tool_call": "tool call"}
HOT_FRACTION = 0.5  # tokens at this share of the example's peak count as where the feature fires
CONTEXT_WORDS = 2  # words of context an n-gram may reach beyond a hot word
MAX_NGRAMS = 3
SNIPPET_CHARS = 90


@dataclass(frozen=True)
class Example:
    """One top-activating segment: its text, kind and per-token [start, end, activation]."""

    text: str
    kind: str
    tokens: list[tuple[int, int, float]]


@dataclass(frozen=True)
class FeatureLabel:
    label: str
    ngrams: list[dict[str, float | str]]
    snippets: list[str]


def context_ngrams(example: Example) -> set[Gram]:
    """n-grams (1-3 words) that hold at least one of the example's hot words, within CONTEXT_WORDS of one."""
    if not example.tokens:
        return set()
    tokens = np.asarray(example.tokens, dtype=np.float64)
    hot_tokens = tokens[tokens[:, 2] >= HOT_FRACTION * tokens[:, 2].max()]
    ws = words(example.text)
    if not ws:
        return set()
    spans = np.asarray([(s, e) for _, s, e in ws], dtype=np.float64)
    overlap = (hot_tokens[None, :, 0] < spans[:, None, 1]) & (spans[:, None, 0] < hot_tokens[None, :, 1])
    hot = set(np.flatnonzero(overlap.any(axis=1)).tolist())
    found: set[tuple[str, ...]] = set()
    for first in {j for i in hot for j in range(i - CONTEXT_WORDS, i + 1)}:
        for n in range(1, MAX_N + 1):
            span = range(first, first + n)
            if first < 0 or span[-1] >= len(ws) or not hot & set(span):
                continue
            gram = tuple(ws[j][0] for j in span)
            if any(informative(w) for w in gram):
                found.add(gram)
    return found


def corpus_frequencies(texts: Iterable[str], candidates: set[Gram]) -> tuple[Counter, int]:
    """In how many texts each candidate n-gram occurs, and how many texts there were."""
    counts: Counter = Counter()
    n = 0
    for text in texts:
        n += 1
        counts.update(all_ngrams(text) & candidates)
    return counts, n


def label_feature(
    examples: list[Example], contexts: Sequence[set[Gram]], corpus: Counter, n_corpus: int
) -> FeatureLabel:
    """Label one feature from its top examples (strongest first) and their `context_ngrams`, against corpus
    document frequencies."""
    kind = _dominant_kind(examples)
    counts: Counter = Counter(g for grams in contexts for g in grams)
    n_top = max(1, len(examples))
    min_count = max(2, math.ceil(0.25 * n_top)) if n_top > 1 else 1
    scored: list[tuple[float, tuple[str, ...], float, float]] = []
    for gram, c in counts.items():
        if c < min_count:
            continue
        share = c / n_top
        corpus_share = (corpus.get(gram, 0) + 1) / (n_corpus + 2)
        if share <= corpus_share:
            continue
        scored.append((share * math.log(share / corpus_share), gram, share, corpus_share))
    scored.sort(key=lambda t: (-t[0], -len(t[1]), t[1]))
    chosen: list[tuple[float, tuple[str, ...], float, float]] = []
    for item in scored:
        if len(chosen) == MAX_NGRAMS:
            break
        if not any(_overlaps(item[1], other[1]) for other in chosen):
            chosen.append(item)
    ngrams: list[dict[str, float | str]] = [
        {"ngram": _join(g), "score": round(s, 4), "share": round(p, 3), "corpus_share": round(q, 4)}
        for s, g, p, q in chosen
    ]
    with_tokens = [e for e in examples if e.tokens]
    snippets = [snippet(e) for e in with_tokens[:3]]
    if chosen:
        text = ", ".join(f"“{_join(g)}”" for _, g, _, _ in chosen)
    elif with_tokens:  # no word stands out (punctuation, markdown): show where it fires
        start, end, _ = max(with_tokens[0].tokens, key=lambda t: t[2])
        text = f"“{clean(with_tokens[0].text[start:end])}” as in {snippets[0]}"
    else:
        text = "no examples"
    return FeatureLabel(f"{kind}: {text}", ngrams, snippets)


def snippet(example: Example, width: int = SNIPPET_CHARS) -> str:
    """The text around the example's strongest token, on one line, with the token in ⟦brackets⟧."""
    start, end, _ = max(example.tokens, key=lambda t: t[2])
    left = max(0, start - width // 2)
    right = min(len(example.text), end + width // 2)
    piece = (
        ("…" if left else "")
        + example.text[left:start]
        + "⟦"
        + example.text[start:end]
        + "⟧"
        + example.text[end:right]
        + ("…" if right < len(example.text) else "")
    )
    return clean(piece)


def clean(text: str) -> str:
    """One line, no control or bidi characters: labels and snippets come from untrusted rollout text."""
    return safe_text.line(text, None)


def _dominant_kind(examples: list[Example]) -> str:
    """The kind most examples share ("mixed" below 75%); with tool calls, the tool most of them call."""
    if not examples:
        return "mixed"
    kind, n = Counter(e.kind for e in examples).most_common(1)[0]
    tools = Counter(e.text.split(" ", 1)[0] for e in examples if e.kind == "tool_call")
    tool, calls = tools.most_common(1)[0] if tools else ("", 0)
    if n < 0.75 * len(examples):
        return f"mixed, mostly tool call {clean(tool)[:60]}" if calls >= 0.5 * len(examples) else "mixed"
    if kind == "tool_call" and calls >= 0.75 * len(examples):
        return f"tool call {clean(tool)[:60]}"
    return KIND_NAMES.get(kind, kind)


def _join(gram: tuple[str, ...]) -> str:
    return clean(" ".join(gram))


def _overlaps(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    return bool(set(a) & set(b))
