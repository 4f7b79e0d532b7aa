"""Sentence units: where the sentences of one text or reasoning segment start and end.

Agent text is not book prose: it has lists, markdown, code fences, JSON, decimals, IDs and abbreviations. The
splitter works in two steps (measured against nltk punkt alone and pysbd in `bench/sentences.py`; figures in
docs/concepts.md):
1. Blocks from the layout: a line break ends a block (lists, headings, table rows and short lines are units of
   their own), except inside a code fence or an open `{` or `[` (multi-line JSON, a literal); a fenced code block,
   and a block that is a JSON object or array, stay one unit.
2. Prose blocks (after a list marker, which stays with its item) are split by nltk's punkt (its trained data
   files are not installed: an untrained tokenizer with a list of common abbreviations, so "e.g. the" and
   "no. 5" do not end sentences).
Spans are `[start, end)` character offsets into the segment text, trimmed of whitespace, in order; a span
without a letter or digit (a rule, a lone bullet) is not a sentence.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nltk.tokenize.punkt import PunktSentenceTokenizer

# Abbreviations punkt would otherwise read as sentence ends (lowercase, without the final period).
ABBREVIATIONS = frozenset(
    "e.g i.e etc vs cf al approx incl excl est min max avg no nos dept fig eq ref refs sec ch vol pp ca "
    "mr mrs ms dr prof st jr sr inc ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec "
    "mon tue wed thu fri sat sun a.m p.m u.s u.k ph.d".split()
)
_FENCE = re.compile(r"^\s*(```|~~~)")
_WORD = re.compile(r"\w")
_MARKER = re.compile(r"[ \t]*(?:\d{1,3}[.)]|[-*+\u2022]|#{1,6}|>)[ \t]+")  # list item, heading, quote
_OPENERS, _CLOSERS = "[{", "]}"  # JSON and literals; a stray "(" in prose must not join lines


@lru_cache(maxsize=1)
def _punkt() -> PunktSentenceTokenizer:
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    params = PunktParameters()
    params.abbrev_types = set(ABBREVIATIONS)
    return PunktSentenceTokenizer(params)


def split_sentences(text: str) -> list[tuple[int, int]]:
    """The sentences of one segment as trimmed character spans `[start, end)`, in order."""
    spans: list[tuple[int, int]] = []
    for start, end, prose in _blocks(text):
        if not prose:
            spans.append((start, end))
            continue
        spans.extend(_prose(text, start, end))
    return [s for s in (_trim(text, a, b) for a, b in spans) if s is not None]


def _prose(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Punkt's sentences of one prose block; a list marker stays with its item, and a boundary inside an open
    `{` or `[` (inline JSON), or right after one closes with the sentence going on, is not one."""
    marker = _MARKER.match(text, start, end)
    body = marker.end() if marker else start
    spans: list[tuple[int, int]] = []
    depth = 0
    for a, b in _punkt().span_tokenize(text[body:end]):
        a, b = body + a, body + b
        if spans and (depth > 0 or _closes_inline(text, spans[-1][1], a)):
            spans[-1] = (spans[-1][0], b)
        else:
            spans.append((a, b))
        depth = max(0, depth + _depth(text[a:b]))
    if spans and marker:
        spans[0] = (start, spans[0][1])
    return spans


def _closes_inline(text: str, end: int, start: int) -> bool:
    """Punkt ended a sentence at a closing `}` or `]` that the text goes on after in lowercase."""
    before, after = text[:end].rstrip(), text[start:].lstrip()
    return before[-1:] in ("}", "]") and after[:1].islower()


def _depth(part: str) -> int:
    return sum(part.count(c) for c in _OPENERS) - sum(part.count(c) for c in _CLOSERS)


def _blocks(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, is_prose) layout blocks: lines, joined while a fence or a bracket is open."""
    blocks: list[tuple[int, int, bool]] = []
    start = 0
    depth = 0
    fenced = False
    position = 0
    for line in text.splitlines(keepends=True):
        line_start, position = position, position + len(line)
        if _FENCE.match(line):
            if not fenced and depth == 0:
                if line_start > start:
                    blocks.append((start, line_start, True))
                start, fenced = line_start, True
                continue
            if fenced:
                blocks.append((start, position, False))
                start, fenced = position, False
                continue
        if fenced:
            continue
        depth = max(0, depth + _depth(line))
        if depth == 0:
            blocks.append((start, position, not _is_json(text[start:position])))
            start = position
    if start < len(text):
        blocks.append((start, len(text), not fenced and not _is_json(text[start:])))
    return blocks


def _is_json(block: str) -> bool:
    """A block that is a JSON object or array (by its brackets: it need not parse)."""
    body = block.strip()
    return len(body) > 1 and (body[0], body[-1]) in {("{", "}"), ("[", "]")}


def _trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if _WORD.search(text, start, end) else None
