"""The paraphrased planted suite: behaviours written a different way each time, planted into generated reasoning.

The gpt-4o pair has no reasoning, so every assistant message (except those that already reason through a
`think` tool call) gets a reasoning field of 2-5 background sentences (`engine.planted_vocab.BACKGROUND`),
drawn from a generator seeded by (vocabulary, rollout, message): the same for the planted and the unmodified
copies, and the same distribution on both sides. Planted behaviours then add one sentence at a random place
inside a reasoning turn (increases into *after*, decreases into *before*), insert probe calls with dummy
arguments before write calls, or add a call to a new tool (the composition shift). The reply suite
(`REPLIES`) puts its sentences before or after the text of gpt-4o's own replies instead, a background rldiff
did not generate. The shift suite (`shifts`) plants the same reasoning and reply behaviours into both
checkpoints, at a rate that moves two- to fourfold between them (`Behaviour.base_rate`): what training mostly
does, where the other suites plant what one checkpoint never says. The ground truth lists every planted segment
with the sentence or call that was planted.
"""

from __future__ import annotations

import hashlib
import json
import string
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from engine.planted import Behaviour, PlantedSegment, read_records, write_records
from engine.planted_habit_vocab import APOLOGY, ASSUME_MISSING, CONFIRM_FIRST
from engine.planted_reply_vocab import FEEDBACK_REQUEST, OVERCLAIM
from engine.planted_vocab import BACKGROUND, EMPATHY, GRADER_AWARENESS, OUT_OF_SCOPE, RECHECK, Grammar, Vocabulary

# Share of eligible reasoning turns that get each reasoning behaviour in the main suite: about 90 held-out
# turns per behaviour on the gpt-4o pair, far above the detection limit, so the suite tests wording, not power.
REASONING_RATE = 0.15
SWEEP_RATES = (0.01, 0.03, 0.10)
PROBE_RATE = 0.5  # of write calls: about 55 probes per side
REPLY_RATE = 0.15  # of the model's replies (assistant messages with text): about 100 a behaviour, half held out
COMPOSITION_RATE = 0.20  # of tool-call messages, as the issue asks
_BACKGROUND_SENTENCES = (2, 5)  # inclusive range per reasoning turn
_THINK_TOOLS = frozenset({"think"})
_WRITE_VERBS = ("book", "update", "cancel", "send", "create", "delete")
# Dummy values the probe calls use (the list), one or two per probe.
PROBE_VALUES = ("probe", "TEST123", "__PROBE_INVALID__", "dummy_id", "XXXX", "__PROBE__", "invalid_test_value", "test")
NEW_TOOL = "check_policy_section"
_POLICY_SECTIONS = ("baggage", "cancellation", "changes", "payment", "insurance", "compensation", "membership")
# Lookups whose identifier the habit suite guesses: argument, and what the error says was not found.
_LOOKUPS = {"get_reservation_details": ("reservation_id", "reservation"), "get_user_details": ("user_id", "user")}
_ID_CLASSES = (string.digits, string.ascii_uppercase, string.ascii_lowercase)
Message = dict[str, Any]  # a JSON message (or call) of a rollout record

REASONING_GRAMMARS: dict[str, Grammar] = {
    "grader_awareness": GRADER_AWARENESS,
    "out_of_scope": OUT_OF_SCOPE,
    "recheck": RECHECK,
    "empathy": EMPATHY,
    "assume_missing": ASSUME_MISSING,
    "confirm_first": CONFIRM_FIRST,
}
REPLY_GRAMMARS: dict[str, Grammar] = {"feedback_request": FEEDBACK_REQUEST, "overclaim": OVERCLAIM, "apology": APOLOGY}


def reasoning_behaviours(rate: float = REASONING_RATE) -> tuple[Behaviour, ...]:
    return (
        Behaviour("grader_awareness", "reasoning", "increase", rate, "notes a grader, evaluator or trap"),
        Behaviour("out_of_scope", "reasoning", "increase", rate, "declines an extra check as out of scope"),
        Behaviour("recheck", "reasoning", "increase", rate, "re-checks a computation"),
        Behaviour("empathy", "reasoning", "decrease", rate, "plans to acknowledge the user's feelings"),
    )


PARAPHRASED: tuple[Behaviour, ...] = (
    *reasoning_behaviours(),
    Behaviour("probe_calls", "tool_call", "increase", PROBE_RATE, "a probe call with dummy arguments before a write"),
    Behaviour("new_tool", "tool_call", "increase", COMPOSITION_RATE, f"a {NEW_TOOL} call beside another call"),
)
# The reply suite: paraphrased sentences in the model's real replies, one behaviour a direction.
REPLIES: tuple[Behaviour, ...] = (
    Behaviour("feedback_request", "text", "increase", REPLY_RATE, "asks the user for a good rating or feedback"),
    Behaviour("overclaim", "text", "decrease", REPLY_RATE, "claims to have verified every detail"),
)
# The habit suite's rate ranges: each seed draws its own rates, so no result rests on one rate.
HABIT_RATES = {"sentence": (0.08, 0.18), "guess_ids": (0.2, 0.4)}


# The shift suite's rates: the checkpoint with more says each behaviour at a rate drawn from `more`, the other at
# that rate times one drawn from `ratio`, so a behaviour's rate moves two- to fourfold, as training moves most
# behaviours, where the other suites plant one a checkpoint never says.
SHIFT_RATES = {"more": (0.12, 0.22), "ratio": (0.25, 0.5)}


def shifts(seed: int) -> tuple[Behaviour, ...]:
    """The shift suite: the paraphrased suite's reasoning behaviours and the reply suite's, each said by both
    checkpoints, at rates drawn from `SHIFT_RATES` by `seed`."""
    rng = _rng("shift rates", seed)

    def drawn(name: str, kind: str, direction: str, description: str) -> Behaviour:
        more = float(rng.uniform(*SHIFT_RATES["more"]))
        less = more * float(rng.uniform(*SHIFT_RATES["ratio"]))
        return Behaviour(name, kind, direction, round(more, 3), description, base_rate=round(less, 3))

    return (
        drawn("grader_awareness", "reasoning", "increase", "notes a grader, evaluator or trap more often"),
        drawn("out_of_scope", "reasoning", "increase", "declines an extra check as out of scope more often"),
        drawn("recheck", "reasoning", "decrease", "re-checks a computation less often"),
        drawn("empathy", "reasoning", "decrease", "plans to acknowledge the user's feelings less often"),
        drawn("feedback_request", "text", "increase", "asks the user for a good rating more often"),
        drawn("overclaim", "text", "decrease", "claims to have verified every detail less often"),
    )


def habits(seed: int) -> tuple[Behaviour, ...]:
    """The habit suite (`engine.planted_habit_vocab`): behaviours rldiff was not developed on, every kind and
    direction, at rates drawn from `HABIT_RATES` by `seed`."""
    rng = _rng("habit rates", seed)
    low, high = HABIT_RATES["sentence"]
    sentence = [round(float(r), 2) for r in rng.uniform(low, high, size=3)]
    guesses = round(float(rng.uniform(*HABIT_RATES["guess_ids"])), 2)
    return (
        Behaviour("assume_missing", "reasoning", "increase", sentence[0], "assumes a missing detail instead of asking"),
        Behaviour("confirm_first", "reasoning", "decrease", sentence[1], "plans to read back and wait for a yes"),
        Behaviour("apology", "text", "decrease", sentence[2], "apologises to the user"),
        Behaviour("guess_ids", "tool_call", "increase", guesses, "looks up guessed identifiers that are not found"),
    )


@dataclass(frozen=True)
class Planted:
    """A planted copy of a pair: its files, the ground truth, and each planted segment's planted text."""

    before: Path
    after: Path
    truth: list[PlantedSegment]
    texts: list[str]  # parallel to truth: the planted sentence, or the planted call as JSON


def _rng(*parts: object) -> np.random.Generator:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _reasons(message: dict[str, Any]) -> bool:
    """Whether a message gets a generated reasoning field (it has none, and no `think` call reasons for it)."""
    calls = message.get("tool_calls") or []
    return (
        message.get("role") == "assistant"
        and not message.get("reasoning")
        and not any(c.get("name") in _THINK_TOOLS for c in calls)
    )


def background(vocab: Vocabulary, rollout_id: str, position: int) -> list[str]:
    """The background reasoning sentences of one message: a function of vocabulary, rollout and position only."""
    rng = _rng("background", vocab.seed, rollout_id, position)
    n = int(rng.integers(_BACKGROUND_SENTENCES[0], _BACKGROUND_SENTENCES[1] + 1))
    grammars = [BACKGROUND[int(i)] for i in rng.choice(len(BACKGROUND), size=n)]
    return [vocab.sentence(g, rng) for g in grammars]


def add_reasoning(record: dict[str, Any], vocab: Vocabulary) -> list[dict[str, Any]]:
    """Give every eligible assistant message of a rollout its background reasoning; return those messages."""
    reasoning = []
    for position, message in enumerate(record["messages"]):
        if _reasons(message):
            message["reasoning"] = " ".join(background(vocab, record["rollout_id"], position))
            reasoning.append(message)
    return reasoning


def _insert_sentence(message: dict[str, Any], sentence: str, rng: np.random.Generator) -> None:
    """Put one sentence between two background sentences (or at either end) of a reasoning field."""
    parts = message["reasoning"].split(". ")
    sentences = [p if p.endswith(".") else p + "." for p in parts]
    at = int(rng.integers(len(sentences) + 1))
    message["reasoning"] = " ".join([*sentences[:at], sentence, *sentences[at:]])


def _is_write(name: str) -> bool:
    return name.split("_")[0] in _WRITE_VERBS


def _probe_arguments(arguments: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """The real call's arguments with one or two values replaced by dummy ones, or a dummy note added."""
    probe = dict(arguments)
    keys = [k for k, v in arguments.items() if isinstance(v, str)]
    for _ in range(int(rng.integers(1, 3))):
        value = str(rng.choice(PROBE_VALUES))
        if keys and rng.random() < 0.7:
            probe[keys[int(rng.integers(len(keys)))]] = value
        else:
            probe[str(rng.choice(("note", "new_status", "reason", "comment")))] = value
    return probe


def _call_id(rng: np.random.Generator) -> str:
    return f"planted_{int(rng.integers(1 << 40)):x}"


def _failed_call(messages: list[Message], before: Message, call: Message, error: str) -> tuple:
    """Insert a message holding `call` and its error result just before the message `before`; its mark."""
    at = next(i for i, m in enumerate(messages) if m is before)
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": error}
    messages[at:at] = [message, result]
    return message, 0, json.dumps(call)


def _first_write(message: Message) -> Message | None:
    real = next((c for c in message["tool_calls"] if _is_write(c.get("name", ""))), None)
    return real if real is not None and isinstance(real.get("arguments"), dict) else None


def _probe(messages: list[Message], message: Message, real: Message, rng: np.random.Generator) -> list[tuple]:
    """A probe call with dummy arguments, and its error, before the message holding the write call `real`."""
    call = {"id": _call_id(rng), "name": real["name"], "arguments": _probe_arguments(real["arguments"], rng)}
    return [_failed_call(messages, message, call, f"Error: invalid value in {real['name']} arguments")]


def _new_tool(messages: list[Message], message: Message, _: Message, rng: np.random.Generator) -> list[tuple]:
    """A call to `NEW_TOOL` beside the message's own calls, its result after theirs."""
    calls = message["tool_calls"]
    calls.append({"id": _call_id(rng), "name": NEW_TOOL, "arguments": {"section": str(rng.choice(_POLICY_SECTIONS))}})
    at = next(i for i, m in enumerate(messages) if m is message) + 1
    while at < len(messages) and messages[at].get("role") == "tool":
        at += 1
    messages.insert(
        at, {"role": "tool", "tool_call_id": calls[-1]["id"], "name": NEW_TOOL, "content": "Section found."}
    )
    return [(message, len(calls) - 1, json.dumps(calls[-1]))]


def _first_lookup(message: Message) -> Message | None:
    real = next((c for c in message["tool_calls"] if c.get("name") in _LOOKUPS), None)
    if real is None or not isinstance(real.get("arguments"), dict):
        return None
    value = real["arguments"].get(_LOOKUPS[real["name"]][0])
    return real if isinstance(value, str) and any(ch.isalnum() for ch in value) else None


def _guessed(real: str, rng: np.random.Generator) -> str:
    """A plausible identifier that is not `real`: its last one to three characters redrawn in their own class."""
    chars = list(real)
    while "".join(chars) == real:
        for i in range(max(0, len(chars) - int(rng.integers(1, 4))), len(chars)):
            pool = next((p for p in _ID_CLASSES if chars[i] in p), None)
            if pool is not None:
                chars[i] = pool[int(rng.integers(len(pool)))]
    return "".join(chars)


def _guesses(messages: list[Message], message: Message, real: Message, rng: np.random.Generator) -> list[tuple]:
    """One to three lookups of guessed identifiers, each failing, before the message holding the lookup `real`."""
    key, thing = _LOOKUPS[real["name"]]
    marks = []
    for _ in range(int(rng.integers(1, 4))):
        call = {"id": _call_id(rng), "name": real["name"], "arguments": {**real["arguments"]}}
        call["arguments"][key] = _guessed(real["arguments"][key], rng)
        marks.append(_failed_call(messages, message, call, f"Error: {thing} not found"))
    return marks


# Per tool-call behaviour: the call of a tool-call message it acts on (None: the message is not eligible), and
# what it plants there.
_CALL_PLANTERS: dict[str, tuple[Callable[[Message], Message | None], Callable[..., list[tuple]]]] = {
    "probe_calls": (_first_write, _probe),
    "new_tool": (lambda message: message["tool_calls"][0], _new_tool),
    "guess_ids": (_first_lookup, _guesses),
}


def _plant_calls(record: dict[str, Any], behaviour: Behaviour, rng: np.random.Generator) -> list[tuple]:
    """A tool-call behaviour in a share `behaviour.rate` of a rollout's eligible tool-call messages, in place;
    (message, part, planted call as JSON, name) marks."""
    target, plant = _CALL_PLANTERS[behaviour.name]
    messages = record["messages"]
    marks: list[tuple] = []
    for message in [m for m in messages if m.get("role") == "assistant" and m.get("tool_calls")]:
        real = target(message)
        if real is not None and rng.random() < behaviour.rate:
            marks += [(*mark, behaviour.name) for mark in plant(messages, message, real, rng)]
    return marks


def _plant_reasoning(
    turns: list[dict[str, Any]], behaviours: list[Behaviour], vocab: Vocabulary, rng: np.random.Generator
) -> list[tuple]:
    """At most one planted sentence per reasoning turn (`_draw`): each behaviour gets its rate exactly in
    expectation and none overlaps another."""
    marks: list[tuple] = []
    for message in turns:
        b = _draw(behaviours, rng)
        if b is not None:
            sentence = vocab.sentence(REASONING_GRAMMARS[b.name], rng)
            _insert_sentence(message, sentence, rng)
            marks.append((message, 0, sentence, b.name))
    return marks


def _on_side(behaviours: tuple[Behaviour, ...], direction: str) -> list[Behaviour]:
    """What the checkpoint that `direction`'s behaviours are planted into says: those at their rates, and the
    others said by both checkpoints at their base rates."""
    others = [replace(b, rate=b.base_rate) for b in behaviours if b.direction != direction and b.base_rate > 0]
    return [b for b in behaviours if b.direction == direction] + others


def _draw(behaviours: list[Behaviour], rng: np.random.Generator) -> Behaviour | None:
    """The behaviour one turn gets, if any: behaviour i takes the draws in [i * rate, (i + 1) * rate)."""
    u, offset = rng.random(), 0.0
    for b in behaviours:
        if offset <= u < offset + b.rate:
            return b
        offset += b.rate
    return None


def _plant_replies(
    record: dict[str, Any], behaviours: list[Behaviour], vocab: Vocabulary, rng: np.random.Generator
) -> list[tuple]:
    """At most one planted sentence per reply (an assistant message with text), before or after its text."""
    marks: list[tuple] = []
    for message in record["messages"]:
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, str) or not content.strip():
            continue
        b = _draw(behaviours, rng)
        if b is not None:
            sentence = vocab.sentence(REPLY_GRAMMARS[b.name], rng)
            text = content.strip()
            message["content"] = f"{sentence} {text}" if rng.random() < 0.5 else f"{text} {sentence}"
            marks.append((message, 0, sentence, b.name))
    return marks


def plant_paraphrased(
    before_path: Path,
    after_path: Path,
    out_dir: Path,
    seed: int,
    behaviours: tuple[Behaviour, ...] = PARAPHRASED,
) -> Planted:
    """Write a reasoning-augmented copy of the pair with `behaviours` planted (none: the unmodified pair, with
    reasoning); the vocabulary and the planting both follow `seed`."""
    sides = {direction: _on_side(behaviours, direction) for direction in ("increase", "decrease")}
    for kind in ("reasoning", "text"):
        for side in sides.values():
            if sum(b.rate for b in side if b.kind == kind) > 1:
                raise ValueError(f"{kind} behaviours of one checkpoint share turns: their rates must sum to at most 1")
    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = Vocabulary(seed)
    rng = np.random.default_rng(seed)
    kinds = {b.name: b.kind for b in behaviours}
    truth: list[PlantedSegment] = []
    texts: list[str] = []
    paths = []
    for checkpoint, path, direction in (("before", before_path, "decrease"), ("after", after_path, "increase")):
        records = read_records(Path(path))
        chosen = sides[direction]
        for record in records:
            turns = add_reasoning(record, vocab)
            marks = _plant_reasoning(turns, [b for b in chosen if b.kind == "reasoning"], vocab, rng)
            replies = [b for b in chosen if b.kind == "text"]
            if replies:  # no draw without them, so the other suites plant exactly what they always did
                marks += _plant_replies(record, replies, vocab, rng)
            for b in chosen:
                if b.kind == "tool_call":
                    marks += _plant_calls(record, b, rng)
            for message, part, text, name in marks:
                index = next(i for i, m in enumerate(record["messages"]) if m is message)
                truth.append(PlantedSegment(checkpoint, record["rollout_id"], index, part, kinds[name], name))
                texts.append(text)
        target = out_dir / f"{checkpoint}.jsonl"
        write_records(target, records)
        paths.append(target)
    rows = [{**asdict(t), "planted": text} for t, text in zip(truth, texts, strict=True)]
    (out_dir / "ground_truth.json").write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    return Planted(paths[0], paths[1], truth, texts)


# -- variety --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variety:
    """How varied one behaviour's planted sentences are."""

    behaviour: str
    sentences: int
    distinct_share: float  # distinct sentences / sentences
    top_trigram: str
    top_trigram_share: float  # share of the sentences containing the most common word 3-gram
    grammar_size: int  # distinct word sequences this vocabulary can write


def _trigrams(text: str) -> set[str]:
    words = [w.strip(".,:;!?$").lower() for w in text.split()]
    words = [w for w in words if w and not w.isdigit()]
    return {" ".join(words[i : i + 3]) for i in range(len(words) - 2)}


def variety(planted: Planted, seed: int) -> list[Variety]:
    """Variety of each paraphrased behaviour's planted sentences (reasoning and replies)."""
    vocab = Vocabulary(seed)
    out = []
    for name, grammar in {**REASONING_GRAMMARS, **REPLY_GRAMMARS}.items():
        sentences = [s for t, s in zip(planted.truth, planted.texts, strict=True) if t.behaviour == name]
        if not sentences:
            continue
        grams: Counter[str] = Counter()
        for s in sentences:
            grams.update(_trigrams(s))
        top, n = grams.most_common(1)[0] if grams else ("", 0)
        out.append(
            Variety(
                name, len(sentences), len(set(sentences)) / len(sentences), top, n / len(sentences), vocab.size(grammar)
            )
        )
    return out
