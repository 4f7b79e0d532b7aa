"""Turns like it a rollout beside held-out validation: a sentence said once a conversation "falls" as a share of
turns when conversations take more turns, and that earns a caution; a sentence the model says less keeps its
verdict without one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from factories_hypotheses import FILLER, make_study, validate_regex

from engine.hypotheses.cautions import caution_flag, caution_line
from engine.hypotheses.population import Population, load_population
from engine.hypotheses.turn_count import TurnCount
from engine.hypotheses.validate import Validation
from engine.kinds import HELDOUT

GREETING = "Hi! How can I help you today?"


@pytest.fixture
def heldout(tmp_path: Path) -> Population:
    store, _ = make_study(tmp_path / "s.duckdb", [], n_tasks=40, texts=4)
    with store:
        return load_population(store, "before", "after", HELDOUT)


def conversations(population: Population, *, greet_after: float, extra_after: float, seed: int = 0) -> Population:
    """Every before rollout greets once, in its first text turn, and a `greet_after` share of after rollouts
    does; each after rollout gets Poisson(`extra_after`) more text turns of filler."""
    rng = np.random.default_rng(seed)
    texts = population.segments.filter(pl.col("kind") == "text").sort("segment_id")
    first = set(texts.group_by("rollout_key").agg(pl.col("segment_id").min())["segment_id"].to_list())
    after = dict(population.rollouts.select("rollout_key", pl.col("checkpoint") == population.after).iter_rows())
    greets = {key: not is_after or rng.random() < greet_after for key, is_after in after.items()}
    segments = population.segments.with_columns(
        text=pl.struct("segment_id", "rollout_key", "text").map_elements(
            lambda r: f"{GREETING} {r['text']}" if r["segment_id"] in first and greets[r["rollout_key"]] else r["text"],
            return_dtype=pl.String,
        )
    )
    extra = []
    next_id = int(segments["segment_id"].max()) + 1
    for row in texts.filter(pl.col("checkpoint") == population.after).unique("rollout_key").iter_rows(named=True):
        for i in range(rng.poisson(extra_after)):
            extra.append({**row, "segment_id": next_id, "message_index": 100 + 2 * i, "text": str(rng.choice(FILLER))})
            next_id += 1
    if extra:
        segments = pl.concat([segments, pl.DataFrame(extra, schema=segments.schema)])
    return replace(population, segments=segments)


def greeting_result(population: Population) -> Validation:
    return validate_regex(population, "How can I help you today", "decrease", n_permutations=500)


def test_a_once_a_conversation_sentence_in_longer_conversations_is_cautioned(heldout: Population) -> None:
    result = greeting_result(conversations(heldout, greet_after=1.0, extra_after=4.0))
    assert result.status == "validated" and result.delta < -0.05  # a quarter of text turns -> about an eighth
    turns = result.turn_count
    assert turns is not None and turns.caution and turns.turns_after > 1.5 * turns.turns_before
    assert abs(turns.delta) < 0.05 and turns.q_value is not None  # still one greeting a conversation
    assert result.reason.startswith("caution, it may be more turns: turns like it a rollout")


def test_a_sentence_said_less_keeps_its_verdict_without_a_caution(heldout: Population) -> None:
    for extra in (0.0, 4.0):  # turns a rollout unchanged, or half as many again with the greeting mostly gone
        result = greeting_result(conversations(heldout, greet_after=0.3, extra_after=extra))
        turns = result.turn_count
        assert result.status == "validated" and turns is not None and not turns.caution, extra
        assert turns.delta < -0.5 and turns.p_value < 0.01 and "caution" not in result.reason


@pytest.mark.parametrize(
    ("sign", "turns_after", "delta", "p", "caution"),
    [
        (-1, 9.0, 0.0, 0.8, True),  # more turns, a fewer-claim, as many like it a rollout: caution
        (-1, 9.0, -0.6, 0.001, False),  # fewer like it a rollout too: holds
        (-1, 6.3, 0.0, 0.8, False),  # 5% more turns: no reason for caution
        (1, 9.0, 0.0, 0.8, False),  # more turns cannot make a more-claim: conservative
        (1, 4.0, 0.0, 0.8, True),  # fewer turns, a more-claim, as many like it a rollout: caution
    ],
)
def test_the_caution_follows_the_turns_and_the_claim(
    sign: int, turns_after: float, delta: float, p: float, caution: bool
) -> None:
    turns = TurnCount(delta, delta - 0.2, delta + 0.2, p, 6.0, turns_after)
    assert turns.needs_caution(sign, 0.05) is caution


def test_both_cautions_are_named_where_both_apply() -> None:
    turns = TurnCount(0.01, -0.1, 0.12, 0.8, 6.1, 9.0, caution=True)
    equal = {"delta": 0.01, "ci_low": -0.02, "ci_high": 0.04, "p_value": 0.4, "words_before": 80.0,
             "words_after": 120.0, "caution": True}  # fmt: skip
    provenance = {"turn_count": turns.as_json(), "equal_length": equal}
    assert caution_flag(provenance) == "(may be turn length or turn count) "
    line = caution_line(provenance, "decrease")
    assert line is not None and line.endswith(f"it may be more turns: {turns.phrase()}")
    assert "turns like it a rollout +0.01 (CI -0.10 to +0.12), p=0.8; turns a rollout 6.1 -> 9.0" in line
    assert caution_flag({"turn_count": {**turns.as_json(), "caution": False}}) == ""
