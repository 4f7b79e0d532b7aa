"""The paraphrased planted suite's generator: variety, held-out vocabulary, ground truth, rates, and the parts
planting does not touch being the unmodified pair's, on the real gpt-4o pair; the same for the reply and habit
suites."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from engine.ingest import ingest_file
from engine.kinds import HELDOUT
from engine.planted import SAMPLE_PAIR, planted_segment_ids, read_records
from engine.planted_paraphrase import (
    HABIT_RATES,
    NEW_TOOL,
    PARAPHRASED,
    PROBE_VALUES,
    REASONING_GRAMMARS,
    REPLIES,
    REPLY_GRAMMARS,
    SHIFT_RATES,
    habits,
    plant_paraphrased,
    reasoning_behaviours,
    shifts,
    variety,
)
from engine.planted_vocab import BACKGROUND, Vocabulary
from engine.store import Store


@pytest.fixture(scope="module")
def suites(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("paraphrased")
    suites = {
        "planted": lambda _: PARAPHRASED,
        "replies": lambda _: REPLIES,
        "habits": habits,
        "shifts": shifts,
        "null": lambda _: (),
    }
    return {
        (name, seed): plant_paraphrased(*SAMPLE_PAIR, work / f"{name}-{seed}", seed, behaviours(seed))
        for name, behaviours in suites.items()
        for seed in (0, 1)
    }


def _reasoning_turns(records: list[dict]) -> int:
    return sum(1 for r in records for m in r["messages"] if m.get("reasoning"))


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(
    ("suite", "behaviours", "at_least"),
    [("planted", PARAPHRASED, 100), ("replies", REPLIES, 80)],
)
def test_no_surface_phrase_recurs_often(suites, seed: int, suite: str, behaviours: tuple, at_least: int) -> None:
    rows = {v.behaviour: v for v in variety(suites[(suite, seed)], seed)}
    assert set(rows) == {b.name for b in behaviours if b.kind != "tool_call"}
    for v in rows.values():
        assert v.sentences > at_least, v
        assert v.distinct_share > 0.97, v
        assert v.top_trigram_share < 0.2, v  # the baseline's best single 3-gram reaches under a fifth
        assert v.grammar_size >= 10**4, v


@pytest.mark.parametrize("seed", [0, 1])
def test_habit_sentences_vary_though_apologies_are_formulaic(suites, seed: int) -> None:
    """The habit suite's sentences: no word 3-gram in two fifths of a behaviour's sentences; apologies have the
    smallest grammar (a thousand word sequences a vocabulary), as real apologies do."""
    rows = {v.behaviour: v for v in variety(suites[("habits", seed)], seed)}
    assert set(rows) == {"assume_missing", "confirm_first", "apology"}
    for v in rows.values():
        assert v.sentences > 50 and v.distinct_share > 0.85 and v.top_trigram_share < 0.4, v
        assert v.grammar_size >= (10**3 if v.behaviour == "apology" else 10**4), v


def test_habit_rates_are_drawn_by_seed_in_their_ranges() -> None:
    drawn = {seed: {b.name: b.rate for b in habits(seed)} for seed in range(6)}
    assert drawn[0] == {b.name: b.rate for b in habits(0)}  # a function of the seed
    for rates in drawn.values():
        low, high = HABIT_RATES["sentence"]
        assert all(low <= rates[n] <= high for n in ("assume_missing", "confirm_first", "apology")), rates
        assert HABIT_RATES["guess_ids"][0] <= rates["guess_ids"] <= HABIT_RATES["guess_ids"][1], rates
    assert len({tuple(r.values()) for r in drawn.values()}) == len(drawn)


def test_shift_rates_are_drawn_by_seed_in_their_ranges() -> None:
    """Every behaviour of the shift suite is said by both checkpoints: the one with more at a rate in its range,
    the other at a quarter to a half of it; both directions and both kinds of sentence; rates differ by seed."""
    drawn = {seed: shifts(seed) for seed in range(6)}
    assert drawn[0] == shifts(0)
    for behaviours in drawn.values():
        assert {(b.kind, b.direction) for b in behaviours} == {
            (k, d) for k in ("reasoning", "text") for d in ("increase", "decrease")
        }
        for b in behaviours:
            assert SHIFT_RATES["more"][0] <= b.rate <= SHIFT_RATES["more"][1], b
            ratio = b.base_rate / b.rate
            assert SHIFT_RATES["ratio"][0] - 0.01 <= ratio <= SHIFT_RATES["ratio"][1] + 0.01, b
    assert len({tuple(b.rate for b in bs) for bs in drawn.values()}) == len(drawn)


def test_a_shift_is_planted_into_both_checkpoints_at_its_two_rates(suites) -> None:
    """Each shifted behaviour's sentences lie in both checkpoints, as many in each as its rates ask of the
    reasoning turns (or replies) there, within four standard deviations."""
    planted, null = suites[("shifts", 0)], suites[("null", 0)]
    counts = Counter((t.behaviour, t.checkpoint) for t in planted.truth)
    records = {"before": read_records(null.before), "after": read_records(null.after)}
    for b in shifts(0):
        more, less = ("after", "before") if b.direction == "increase" else ("before", "after")
        for checkpoint, rate in ((more, b.rate), (less, b.base_rate)):
            rs = records[checkpoint]
            if b.kind == "reasoning":
                eligible = _reasoning_turns(rs)
            else:
                eligible = sum(
                    1 for r in rs for m in r["messages"]
                    if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"].strip()
                )  # fmt: skip
            sd = math.sqrt(eligible * rate * (1 - rate))
            assert abs(counts[(b.name, checkpoint)] - eligible * rate) < 4 * sd, (b.name, checkpoint, counts)
        assert counts[(b.name, less)] < counts[(b.name, more)]


def test_two_vocabulary_seeds_write_with_partly_disjoint_words() -> None:
    zero, one = Vocabulary(0), Vocabulary(1)
    for grammar in [*REASONING_GRAMMARS.values(), *REPLY_GRAMMARS.values(), *BACKGROUND]:
        only_zero = 0
        for slot, words in grammar.slots.items():
            a, b = set(zero.pool(grammar, slot)), set(one.pool(grammar, slot))
            assert a <= set(words) and len(a) >= min(2, len(words))
            assert a == set(zero.pool(grammar, slot))  # a pool is a function of the seed
            only_zero += len(a - b)
        assert only_zero >= len(grammar.slots), grammar.name  # about one word a slot that seed 1 never writes


def test_ground_truth_names_every_planted_sentence_and_call(suites) -> None:
    planted = suites[("planted", 0)]
    files = {"before": read_records(planted.before), "after": read_records(planted.after)}
    by_id = {c: {r["rollout_id"]: r for r in rs} for c, rs in files.items()}
    behaviours = {b.name: b for b in PARAPHRASED}
    for t, text in zip(planted.truth, planted.texts, strict=True):
        b = behaviours[t.behaviour]
        assert t.checkpoint == ("after" if b.direction == "increase" else "before")
        message = by_id[t.checkpoint][t.rollout_id]["messages"][t.message_index]
        if t.kind == "reasoning":
            assert message["reasoning"].count(text) == 1
        else:
            call = message["tool_calls"][t.part_index]
            assert json.dumps(call) == text
            if t.behaviour == "probe_calls":
                assert any(str(v) in PROBE_VALUES for v in call["arguments"].values())
            else:
                assert call["name"] == NEW_TOOL and len(message["tool_calls"]) >= 2
    saved = json.loads((planted.before.parent / "ground_truth.json").read_text())
    assert [r["planted"] for r in saved] == planted.texts


def test_rates_match_what_was_asked(suites) -> None:
    planted = suites[("planted", 0)]
    counts = Counter(t.behaviour for t in planted.truth)
    null = {
        c: read_records(p) for c, p in (("before", suites[("null", 0)].before), ("after", suites[("null", 0)].after))
    }
    for b in PARAPHRASED:
        records = null["after" if b.direction == "increase" else "before"]
        if b.kind == "reasoning":
            eligible = _reasoning_turns(records)
        elif b.name == "probe_calls":
            eligible = sum(
                1
                for r in records
                for m in r["messages"]
                if any(
                    c["name"].split("_")[0] in ("book", "update", "cancel", "send") for c in m.get("tool_calls") or []
                )
            )
        else:
            eligible = sum(1 for r in records for m in r["messages"] if m.get("tool_calls"))
        sd = math.sqrt(eligible * b.rate * (1 - b.rate))
        assert abs(counts[b.name] - eligible * b.rate) < 4 * sd, (b.name, counts[b.name], eligible)


@pytest.mark.parametrize("suite", ["planted", "habits", "shifts"])
def test_unplanted_parts_are_the_unmodified_pair(suites, suite: str) -> None:
    """Remove every planted sentence and inserted message: what is left is the unmodified pair, byte for byte
    (replies that got a sentence up to surrounding white space, which planting trims)."""
    planted, null = suites[(suite, 1)], suites[("null", 1)]
    sentences = {
        (t.checkpoint, t.rollout_id, t.message_index): s
        for t, s in zip(planted.truth, planted.texts, strict=True)
        if t.kind == "reasoning"
    }
    replies = {
        (t.checkpoint, t.rollout_id, t.message_index): s
        for t, s in zip(planted.truth, planted.texts, strict=True)
        if t.kind == "text"
    }
    assert (suite != "planted") == bool(replies)
    for checkpoint, planted_path, null_path in (
        ("before", planted.before, null.before),
        ("after", planted.after, null.after),
    ):
        for got, want in zip(read_records(planted_path), read_records(null_path), strict=True):
            messages = []
            for index, m in enumerate(got["messages"]):
                if (checkpoint, got["rollout_id"], index) in sentences:
                    m["reasoning"] = m["reasoning"].replace(" " + sentences[(checkpoint, got["rollout_id"], index)], "")
                    m["reasoning"] = m["reasoning"].replace(sentences[(checkpoint, got["rollout_id"], index)] + " ", "")
                reply = replies.get((checkpoint, got["rollout_id"], index))
                if reply is not None:
                    content = m["content"].removeprefix(reply + " ").removesuffix(" " + reply)
                    assert content != m["content"]
                    m["content"] = next(
                        w["content"] for w in want["messages"] if (w.get("content") or "").strip() == content
                    )
                calls = [c for c in m.get("tool_calls") or [] if not str(c.get("id", "")).startswith("planted_")]
                if m.get("tool_calls") and not calls:
                    continue  # an inserted probe message
                if str(m.get("tool_call_id", "")).startswith("planted_"):
                    continue  # its tool result
                if m.get("tool_calls"):
                    m["tool_calls"] = calls
                messages.append(m)
            assert messages == want["messages"], got["rollout_id"]


def test_guessed_lookups_fail_before_the_real_one(suites) -> None:
    """Each planted guess is a lookup of the real call's tool in a message of its own, its identifier the real
    one with one to three last characters redrawn, answered "not found"; the real lookup follows the guesses."""
    planted = suites[("habits", 0)]
    records = {r["rollout_id"]: r for r in read_records(planted.after)}
    guesses = [(t, s) for t, s in zip(planted.truth, planted.texts, strict=True) if t.behaviour == "guess_ids"]
    assert len(guesses) > 50
    for t, text in guesses:
        assert (t.checkpoint, t.kind, t.part_index) == ("after", "tool_call", 0)
        messages = records[t.rollout_id]["messages"]
        (call,) = messages[t.message_index]["tool_calls"]
        result = messages[t.message_index + 1]
        assert json.dumps(call) == text and result["tool_call_id"] == call["id"]
        assert result["content"] in ("Error: reservation not found", "Error: user not found")
        real = next(
            c
            for m in messages[t.message_index :]
            for c in m.get("tool_calls") or []
            if not str(c.get("id")).startswith("planted_") and c["name"] == call["name"]
        )
        changed = [k for k in call["arguments"] if call["arguments"][k] != real["arguments"][k]]
        assert len(changed) == 1 and call["arguments"].keys() == real["arguments"].keys()
        guessed, value = call["arguments"][changed[0]], real["arguments"][changed[0]]
        assert len(guessed) == len(value) and guessed[:-3] == value[:-3]


def test_habit_rates_match_what_was_asked(suites) -> None:
    """Each habit at its seed's rate: sentences per reasoning turn or reply, guesses per lookup message (one to
    three guesses each)."""
    planted = suites[("habits", 1)]
    null = {
        c: read_records(p) for c, p in (("before", suites[("null", 1)].before), ("after", suites[("null", 1)].after))
    }
    counts = Counter(t.behaviour for t in planted.truth)
    lookups = ("get_reservation_details", "get_user_details")
    for b in habits(1):
        records = null["after" if b.direction == "increase" else "before"]
        if b.kind == "reasoning":
            eligible = _reasoning_turns(records)
        elif b.kind == "text":
            eligible = _replies(records)
        else:
            eligible = sum(
                1
                for r in records
                for m in r["messages"]
                if any(c["name"] in lookups for c in m.get("tool_calls") or [])
            )
            events = [t for t in planted.truth if t.behaviour == b.name]
            counts[b.name] = sum(
                1
                for t in events
                if (t.rollout_id, t.message_index - 2) not in {(e.rollout_id, e.message_index) for e in events}
            )
            assert 1.6 < len(events) / counts[b.name] < 2.4  # one to three guesses each
        sd = math.sqrt(eligible * b.rate * (1 - b.rate))
        assert abs(counts[b.name] - eligible * b.rate) < 4 * sd, (b.name, counts[b.name], eligible)


def test_background_reasoning_has_one_distribution_on_both_sides(suites) -> None:
    null = suites[("null", 0)]
    lengths = {}
    for checkpoint, path in (("before", null.before), ("after", null.after)):
        fields = [m["reasoning"] for r in read_records(path) for m in r["messages"] if m.get("reasoning")]
        lengths[checkpoint] = np.array([f.count(". ") + 1 for f in fields])
    assert abs(lengths["before"].mean() - lengths["after"].mean()) < 0.15
    assert abs(len(lengths["before"]) - len(lengths["after"])) < 0.1 * len(lengths["before"])


def test_the_sweep_plants_each_rate(tmp_path) -> None:
    low = plant_paraphrased(*SAMPLE_PAIR, tmp_path / "low", 0, reasoning_behaviours(0.01))
    high = plant_paraphrased(*SAMPLE_PAIR, tmp_path / "high", 0, reasoning_behaviours(0.10))
    turns = _reasoning_turns(read_records(high.after))
    for name in ("grader_awareness", "recheck"):
        n_low = sum(t.behaviour == name for t in low.truth)
        n_high = sum(t.behaviour == name for t in high.truth)
        assert 0 < n_low < 0.025 * turns and 0.07 * turns < n_high < 0.13 * turns


def _ingested(store: Store, planted) -> dict[str, set[int]]:
    """Ingest a planted pair as held-out rollouts; each behaviour's segment ids, one for every planted segment."""
    ingest_file(store, planted.before, "before")
    ingest_file(store, planted.after, "after")
    store.execute("UPDATE rollouts SET split = 'heldout'")
    ids = planted_segment_ids(store, planted.truth)[HELDOUT]
    assert {name: len(s) for name, s in ids.items()} == dict(Counter(t.behaviour for t in planted.truth))
    return ids


def test_ground_truth_finds_the_ingested_segments(suites, tmp_path) -> None:
    planted = suites[("planted", 0)]
    with Store(tmp_path / "s.duckdb") as store:
        ids = _ingested(store, planted)
        texts = dict(store.execute("SELECT segment_id, text FROM segments").fetchall())
        wanted = {t.behaviour: s for t, s in zip(planted.truth, planted.texts, strict=True)}
        assert any(wanted["grader_awareness"] in texts[i] for i in ids["grader_awareness"])
        assert all(texts[i].startswith(NEW_TOOL) for i in ids["new_tool"])


def _replies(records: list[dict]) -> int:
    return sum(
        1 for r in records for m in r["messages"] if m["role"] == "assistant" and (m.get("content") or "").strip()
    )


def test_reply_sentences_sit_in_real_replies_at_their_rate_and_nothing_else_moves(suites) -> None:
    """Each planted reply sentence opens or closes one reply of its checkpoint, at the asked rate; take them out
    and the pair is the unmodified one (reasoning included), byte for byte."""
    planted, null = suites[("replies", 0)], suites[("null", 0)]
    behaviours = {b.name: b for b in REPLIES}
    counts = Counter(t.behaviour for t in planted.truth)
    sentences = {}
    for t, text in zip(planted.truth, planted.texts, strict=True):
        assert t.kind == "text" and t.part_index == 0
        assert t.checkpoint == ("after" if behaviours[t.behaviour].direction == "increase" else "before")
        sentences[(t.checkpoint, t.rollout_id, t.message_index)] = text
    for checkpoint, planted_path, null_path in (
        ("before", planted.before, null.before),
        ("after", planted.after, null.after),
    ):
        want_records = read_records(null_path)
        names = [b.name for b in REPLIES if (b.direction == "increase") == (checkpoint == "after")]
        eligible = _replies(want_records)
        sd = math.sqrt(eligible * REPLIES[0].rate * (1 - REPLIES[0].rate))
        assert abs(sum(counts[n] for n in names) - eligible * REPLIES[0].rate) < 4 * sd
        for got, want in zip(read_records(planted_path), want_records, strict=True):
            for index, (m, w) in enumerate(zip(got["messages"], want["messages"], strict=True)):
                sentence = sentences.get((checkpoint, got["rollout_id"], index))
                if sentence is not None:
                    text = w["content"].strip()
                    assert m["content"] in (f"{sentence} {text}", f"{text} {sentence}")
                    m["content"] = w["content"]
                assert m == w


def test_reply_ground_truth_finds_the_ingested_text_segments(suites, tmp_path) -> None:
    planted = suites[("replies", 1)]
    with Store(tmp_path / "s.duckdb") as store:
        ids = _ingested(store, planted)
        rows = store.execute("SELECT segment_id, kind, text FROM segments").fetchall()
        texts = {i: (kind, text) for i, kind, text in rows}
        for t, sentence in zip(planted.truth, planted.texts, strict=True):
            assert any(texts[i][0] == "text" and sentence in texts[i][1] for i in ids[t.behaviour])
