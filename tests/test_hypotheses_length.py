"""The equal-length test beside held-out validation: longer turns alone earn a caution, a planted sentence in
turns of varied length keeps its verdict without one, and claims about length itself are not standardised."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from factories_hypotheses import FILLER, Planted, make_study

from engine.hypotheses.cautions import caution_line, has_caution
from engine.hypotheses.equal_length import EqualLength, about_length
from engine.hypotheses.length import length_strata
from engine.hypotheses.population import Population, load_population
from engine.hypotheses.provenance import provenance_text
from engine.hypotheses.validate import Claim, _caution_q, validate
from engine.hypotheses.verifier import Verifier
from engine.kinds import HELDOUT

APOLOGY = Planted("apology", "text", "I sincerely apologize for the inconvenience.", 0.05, 0.45)
AIRPORTS = Planted("airports", "tool_call", "list_all_airports", 0.3, 0.02)


def lengthened(population: Population, extra_before: float, extra_after: float, seed: int = 0) -> Population:
    """Each text turn with Poisson(extra) more filler sentences, the mean set per checkpoint."""
    rng = np.random.default_rng(seed)
    texts = []
    for r in population.segments.iter_rows(named=True):
        text = r["text"]
        if r["kind"] == "text":
            n = rng.poisson(extra_after if r["checkpoint"] == population.after else extra_before)
            text = " ".join([text, *rng.choice(FILLER, n)])
        texts.append(text)
    return replace(population, segments=population.segments.with_columns(text=pl.Series(texts)))


def validated_one(population: Population, spec: dict, direction: str = "increase"):
    labels = population.verifier_labels(Verifier(spec), ["text"]).with_columns(hypothesis_id=pl.lit(0))
    [result] = validate(population, labels, [Claim(0, direction)], np.random.default_rng(0), n_permutations=500)
    return result


@pytest.fixture
def heldout(tmp_path: Path) -> Population:
    store, _ = make_study(tmp_path / "s.duckdb", [APOLOGY, AIRPORTS], n_tasks=40)
    with store:
        return load_population(store, "before", "after", HELDOUT)


def test_longer_turns_alone_validate_with_a_caution(heldout: Population) -> None:
    """Twice the filler sentences after: 'contains confirm' rises with length, not per turn of a length."""
    population = lengthened(heldout, 1.0, 3.0)
    result = validated_one(population, {"regex": "confirm"})
    assert result.status == "validated" and result.delta > 0.1
    equal = result.equal_length
    assert equal is not None and equal.informative and equal.caution
    assert equal.words_after > equal.words_before and abs(equal.delta) < result.delta / 2
    assert result.reason.startswith("caution, it may be longer turns: at equal turn length")


def test_a_planted_sentence_in_turns_of_varied_length_holds_at_equal_length(heldout: Population) -> None:
    result = validated_one(lengthened(heldout, 1.5, 1.5), {"regex": "apologi[sz]e"})
    equal = result.equal_length
    assert result.status == "validated" and equal is not None and equal.informative
    assert equal.delta > 0.1 and equal.p_value < 0.05 and not equal.caution
    assert "caution" not in result.reason
    # the same rate per turn at every length: the equal-length delta is the delta, not the share of rollouts with
    # turns of each length times it (0.33 against 0.44 when a rollout without a stratum counted as no change)
    assert abs(equal.delta - result.delta) < 0.1 * result.delta


def test_a_claim_against_the_length_change_gets_no_caution(heldout: Population) -> None:
    """Turns grow, and fewer of them carry a planted phrase: length would raise it, so the fall is not length."""
    swapped = replace(heldout, before=heldout.after, after=heldout.before)  # after turns now have no apology
    result = validated_one(lengthened(swapped, 1.0, 2.0), {"regex": "apologi[sz]e"}, "decrease")
    assert result.status == "validated" and result.delta < 0
    assert result.equal_length is not None and not result.equal_length.caution


def test_when_length_and_label_coincide_the_test_says_so_and_decides_nothing(heldout: Population) -> None:
    """The same filler sentence in every turn: a turn is long exactly when it apologises, so no stratum varies."""
    one_filler = pl.col("text").str.replace(r"^[^.?]*[.?]", FILLER[0])
    result = validated_one(
        replace(heldout, segments=heldout.segments.with_columns(one_filler)), {"regex": "apologi[sz]e"}
    )
    assert result.status == "validated" and result.equal_length is not None
    assert not result.equal_length.informative and not result.equal_length.caution
    assert "length and label coincide" in result.equal_length.phrase()


def test_claims_about_length_or_tool_calls_only_are_not_standardised(heldout: Population) -> None:
    assert about_length({"all": [{"kind": "text"}, {"structural": "length:400+"}]})
    assert not about_length({"all": [{"kind": "text"}, {"structural": "apology"}]})
    labels = heldout.verifier_labels(Verifier({"structural": "length:10-49"}), ["text"])
    tools = heldout.verifier_labels(Verifier({"tool_name": "list_all_airports"}), ["tool_call"])
    labels = pl.concat([labels.with_columns(hypothesis_id=pl.lit(0)), tools.with_columns(hypothesis_id=pl.lit(1))])
    claims = [Claim(0, "increase", about_length=True), Claim(1, "decrease")]
    results = validate(heldout, labels, claims, np.random.default_rng(0), n_permutations=200)
    assert [r.equal_length for r in results] == [None, None]


def test_strata_are_quantile_bins_per_kind_and_one_stratum_for_tool_calls() -> None:
    kind = np.array(["text"] * 400 + ["tool_call"] * 30 + ["reasoning"] * 150)
    words = np.concatenate([np.arange(400), np.full(30, 7), np.arange(150)])
    codes = length_strata(kind, words)
    assert np.unique(codes[:400]).size == 4 and np.all(np.diff(codes[:400]) >= 0)  # quartiles, in word order
    assert np.unique(codes[400:430]).size == 1 and np.unique(codes[430:]).size == 1  # 150 < 2 x 100 per bin
    assert len({*codes[:400]} & {*codes[400:430]}) == 0


@pytest.mark.parametrize(
    ("sign", "words_after", "delta", "p", "caution"),
    [
        (1, 180, 0.01, 0.4, True),  # more, turns grew, nothing at equal length
        (1, 180, 0.08, 0.001, False),  # holds at equal length
        (1, 90, 0.01, 0.4, False),  # turns shrank: length would lower it
        (1, 124, 0.01, 0.4, False),  # 3% longer: no reason for caution
        (-1, 90, -0.01, 0.4, True),  # fewer, turns shrank
        (-1, 180, -0.01, 0.4, False),  # fewer though turns grew
    ],
)
def test_the_caution_follows_the_length_change_and_the_claim(
    sign: int, words_after: float, delta: float, p: float, caution: bool
) -> None:
    equal = EqualLength(delta, delta - 0.03, delta + 0.03, p, 120.0, words_after)
    assert equal.needs_caution(sign, 0.05) is caution


def test_holding_at_equal_length_is_one_claim_per_finding_whose_turns_grew() -> None:
    """Nine validated findings whose turns grew half again: the one that holds at equal length with p = 0.02
    is one of nine such claims (BH q = 0.18) and keeps its caution; alone it would not. A finding that did not
    validate, or whose turns shrank, is not in that family."""
    grew = [EqualLength(0.03, 0.0, 0.06, p, 100.0, 150.0) for p in (0.02, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)]
    shrank = EqualLength(0.03, 0.0, 0.06, 0.001, 100.0, 60.0)
    family = _caution_q([*grew, grew[1], shrank], [True] * 9 + [False, True], [1.0] * 11)
    assert family[0] is not None and family[0].q_value == pytest.approx(0.18)
    assert family[0].needs_caution(1.0, 0.05) and not grew[0].needs_caution(1.0, 0.05)
    assert family[9] is not None and family[9].q_value is None and family[10] == shrank
    [alone] = _caution_q(grew[:1], [True], [1.0])
    assert alone is not None and alone.q_value == pytest.approx(0.02) and not alone.needs_caution(1.0, 0.05)


def test_provenance_names_the_equal_length_result() -> None:
    from engine.store.queries.hypotheses import HypothesisRow

    equal = EqualLength(0.012, -0.01, 0.034, 0.3, 87.0, 127.0, caution=True)
    row = HypothesisRow(
        1, "More text turns like 'x'", "increase", "verifier", {}, "validated", "extractive",
        *[None] * 13, provenance={"equal_length": equal.as_json()},
    )  # fmt: skip
    assert (
        "at equal turn length +1.2 pts (CI -1.0 to +3.4), p=0.3; turns without it 87 -> 127 words"
        in provenance_text(row)
    )
    assert has_caution(row.provenance) and not has_caution({})
    assert caution_line(row.provenance, "increase") == f"it may be longer turns: {equal.phrase()}"
    assert caution_line({"equal_length": {**equal.as_json(), "caution": False}}, "increase") is None
