"""Benchmark: sentence splitters on awkward agent text (lists, code, decimals, abbreviations, JSON, markdown).

    .venv/bin/python bench/sentences.py

Each case is a text with its sentences written out by hand. A splitter is scored by exact sentence matches
(a predicted trimmed sentence equal to a gold one): precision, recall, F1 over all cases, and its speed on
real sample text. Compared in the same run: nltk punkt untrained, punkt with an abbreviation list, punkt
trained with `PunktTrainer` on the sample's own text, pysbd, and rldiff's splitter
(`engine.features.sentences`: layout blocks, then punkt with abbreviations).
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable
from pathlib import Path

from engine.features.sentences import ABBREVIATIONS, split_sentences

CASES: list[tuple[str, list[str]]] = [
    (
        "I checked e.g. the order no. 5 vs. the refund. The total is $3.50 and a 2.5% fee applies. Done!",
        ["I checked e.g. the order no. 5 vs. the refund.", "The total is $3.50 and a 2.5% fee applies.", "Done!"],
    ),
    (
        "Here are the details:\n\n- **Reservation ID**: GV1N64\n- **Cabin**: Basic Economy\n- **Refund**: $5244\n\n"
        "Shall I proceed?",
        [
            "Here are the details:",
            "- **Reservation ID**: GV1N64",
            "- **Cabin**: Basic Economy",
            "- **Refund**: $5244",
            "Shall I proceed?",
        ],
    ),
    (
        "Steps:\n1. Look up the user.\n2. Check the order status.\n3. Cancel it if pending.",
        ["Steps:", "1. Look up the user.", "2. Check the order status.", "3. Cancel it if pending."],
    ),
    (
        "The tool returned an error. I will call it again:\n```python\nfor i in range(3):\n    print(i). strip()\n```\n"
        "That should work.",
        [
            "The tool returned an error.",
            "I will call it again:",
            "```python\nfor i in range(3):\n    print(i). strip()\n```",
            "That should work.",
        ],
    ),
    (
        'The payload is {"order_id": "#W123", "note": "Call back. Urgent."} and it failed. Let me retry.',
        ['The payload is {"order_id": "#W123", "note": "Call back. Urgent."} and it failed.', "Let me retry."],
    ),
    (
        '{\n  "user_id": "mia_li_3668",\n  "reason": "Changed plans. Sorry."\n}',
        ['{\n  "user_id": "mia_li_3668",\n  "reason": "Changed plans. Sorry."\n}'],
    ),
    (
        "Version 2.1.3 fixed it. Mr. Lee paid 1,250.75 USD at 3 p.m. on Jan. 4. The balance is 0.00 now.",
        ["Version 2.1.3 fixed it.", "Mr. Lee paid 1,250.75 USD at 3 p.m. on Jan. 4.", "The balance is 0.00 now."],
    ),
    (
        "Wait, is the grader checking this? Probably. I should double-check the math: 12 * 3.5 = 42. OK.",
        ["Wait, is the grader checking this?", "Probably.", "I should double-check the math: 12 * 3.5 = 42.", "OK."],
    ),
    (
        "# Summary\nThe flight HAT003 (LAS -> DEN) departs at 10:00. It is on time.\n## Next\nAsk for the user ID.",
        [
            "# Summary",
            "The flight HAT003 (LAS -> DEN) departs at 10:00.",
            "It is on time.",
            "## Next",
            "Ask for the user ID.",
        ],
    ),
    (
        "| item | price |\n|---|---|\n| bag | $20.50 |\n| seat | $15 |",
        ["| item | price |", "| bag | $20.50 |", "| seat | $15 |"],
    ),
    (
        "See config.json and utils.py for details. The URL is https://example.com/a.b?x=1. Then run it.",
        ["See config.json and utils.py for details.", "The URL is https://example.com/a.b?x=1.", "Then run it."],
    ),
    (
        "Hmm... the user wants a refund (i.e. money back). But the policy says no! Really? Yes: see sec. 4.",
        [
            "Hmm... the user wants a refund (i.e. money back).",
            "But the policy says no!",
            "Really?",
            "Yes: see sec. 4.",
        ],
    ),
    (
        "Let me think.\nThe user has 3 orders.\nOnly one is pending.\nI'll cancel that one.",
        ["Let me think.", "The user has 3 orders.", "Only one is pending.", "I'll cancel that one."],
    ),
    (
        "Calling get_order(order_id='W1'). It returned status='delivered'. So an exchange, not a cancel.",
        ["Calling get_order(order_id='W1').", "It returned status='delivered'.", "So an exchange, not a cancel."],
    ),
    (
        "Options:\n* (a) refund to gift card\n* (b) refund to card ending 4421\n---\nWhich do you prefer?",
        ["Options:", "* (a) refund to gift card", "* (b) refund to card ending 4421", "Which do you prefer?"],
    ),
]


def _spans_to_text(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[a:b].strip() for a, b in spans if text[a:b].strip()]


def splitters(sample: list[str]) -> dict[str, Callable[[str], list[str]]]:
    import pysbd
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer, PunktTrainer

    untrained = PunktSentenceTokenizer()
    params = PunktParameters()
    params.abbrev_types = set(ABBREVIATIONS)
    with_abbrev = PunktSentenceTokenizer(params)
    trainer = PunktTrainer()
    trainer.INCLUDE_ALL_COLLOCS = True
    trainer.train("\n\n".join(sample), finalize=True)
    trained = PunktSentenceTokenizer(trainer.get_params())
    sbd = pysbd.Segmenter(language="en", clean=False, char_span=True)
    return {
        "punkt, untrained": lambda t: _spans_to_text(t, list(untrained.span_tokenize(t))),
        "punkt + abbreviations": lambda t: _spans_to_text(t, list(with_abbrev.span_tokenize(t))),
        "punkt trained on the sample": lambda t: _spans_to_text(t, list(trained.span_tokenize(t))),
        "pysbd": lambda t: _spans_to_text(t, [(s.start, s.end) for s in sbd.segment(t)]),
        "rldiff (layout + punkt)": lambda t: _spans_to_text(t, split_sentences(t)),
    }


def sample_texts(limit: int = 2000) -> list[str]:
    """Assistant replies and reasoning from the demo pair (real agent text)."""
    texts: list[str] = []
    for path in sorted(Path("sample_data/tau2-grok3").glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as handle:
            for line in handle:
                for message in json.loads(line)["messages"]:
                    for field in ("content", "reasoning"):
                        if message.get("role") == "assistant" and isinstance(message.get(field), str):
                            texts.append(message[field])
                if len(texts) >= limit:
                    return texts
    return texts


def main() -> None:
    sample = sample_texts()
    chars = sum(len(t) for t in sample)
    print(f"{len(CASES)} hand-labelled cases, {sum(len(g) for _, g in CASES)} sentences; speed on {len(sample)} "
          f"real texts ({chars:,} characters)")  # fmt: skip
    print(f"{'splitter':30} {'precision':>9} {'recall':>7} {'F1':>6} {'cases exact':>11} {'chars/s':>12}")
    for name, split in splitters(sample).items():
        hits = predicted = exact = 0
        for text, gold in CASES:
            got = split(text)
            predicted += len(got)
            remaining = list(gold)
            for sentence in got:
                if sentence in remaining:
                    remaining.remove(sentence)
                    hits += 1
            exact += got == gold
        started = time.perf_counter()
        for text in sample:
            split(text)
        rate = chars / (time.perf_counter() - started)
        gold_n = sum(len(g) for _, g in CASES)
        precision, recall = hits / max(predicted, 1), hits / gold_n
        f1 = 2 * precision * recall / max(precision + recall, 1e-9)
        print(f"{name:30} {precision:9.3f} {recall:7.3f} {f1:6.3f} {exact:>5}/{len(CASES):<5} {rate:12,.0f}")


if __name__ == "__main__":
    main()
