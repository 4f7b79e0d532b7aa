"""The exemplar labeler (`similar_to`) and the `structural` verifier node.

The matching logic (batching, evidence, combination with other nodes) is tested with a word-count embedder
(an `Embedder` is anything with `embed`); paraphrase matching and held-out labelling with the real packaged
MiniLM sentence embedder and sentence splitter.
"""

from __future__ import annotations

import json
import re

import numpy as np
import polars as pl
import pytest
from factories_exemplars import GRADER_AWARE, WordEmbedder, minilm, split_on_periods

from engine.hypotheses.exemplars import best_f1_threshold, fit_exemplars, matched_by
from engine.hypotheses.geometry import bisect, neighbouring
from engine.hypotheses.merge import MIN_EXEMPLARS_MATCHED
from engine.hypotheses.strays import strays
from engine.hypotheses.verifier import SegmentView, SpecError, Verifier, describe
from engine.kinds import HELDOUT

GRADER = "the grader checks the output format"


def verifier(spec: dict, embedder: WordEmbedder | None = None) -> Verifier:
    return Verifier(spec, embedder=embedder or WordEmbedder(), splitter=split_on_periods)


def test_matches_a_segment_by_its_closest_sentence_and_gives_it_as_evidence() -> None:
    spec = {"similar_to": {"exemplars": [GRADER], "min_similarity": 0.6}}
    near = SegmentView(1, "reasoning", "I will book the flight. The grader checks the format of the output. Done.")
    far = SegmentView(2, "reasoning", "I will book the flight. The user wants a window seat.")
    verdicts = verifier(spec).label_all([near, far])
    assert verdicts[0].label and verdicts[0].evidence == "The grader checks the format of the output."
    assert not verdicts[1].label and verdicts[1].evidence is None


def test_one_embedding_batch_for_all_segments_and_combines_with_kind_and_not() -> None:
    embedder = WordEmbedder()
    node = {"similar_to": {"exemplars": [GRADER, "a trap set by the reviewer"], "min_similarity": 0.6}}
    spec = {"all": [{"kind": "reasoning"}, node, {"not": {"regex": "skip"}}]}
    segments = [
        SegmentView(i, kind, body)
        for i, (kind, body) in enumerate(
            [
                ("reasoning", "Careful. This looks like a trap set by the reviewer."),
                ("text", "The grader checks the output format."),  # wrong kind
                ("reasoning", "The grader checks the output format. skip it."),  # excluded by `not`
                ("reasoning", "Nothing to see here."),
            ]
        )
    ]
    labels = [v.label for v in verifier(spec, embedder).label_all(segments)]
    assert labels == [True, False, False, False]
    assert embedder.calls == 2  # every sentence once, then the exemplars once


def test_tool_calls_are_one_unit() -> None:
    spec = {"similar_to": {"exemplars": ["update status probe"], "min_similarity": 0.9}}
    call = SegmentView(1, "tool_call", "update status. probe", "update_status", "{}")
    assert verifier(spec)(call).label  # split into sentences it would not reach 0.9


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"similar_to": {"exemplars": []}}, "exemplars"),
        ({"similar_to": {"exemplars": ["x"] * 17}}, "1 to 16"),
        ({"similar_to": {"exemplars": ["x" * 501]}}, "at most 500"),
        ({"similar_to": {"exemplars": [""]}}, "exemplars[0]"),
        ({"similar_to": {"exemplars": ["a"], "min_similarity": 1.5}}, "(0, 1]"),
        ({"similar_to": {"exemplars": ["a"], "min_similarity": True}}, "(0, 1]"),
        ({"similar_to": {"exemplars": ["a"], "vectors": [[0.1]]}}, "optionally 'min_similarity'"),
        ({"all": [{"kind": "text"}, {"similar_to": "the grader"}]}, "$.all[1].similar_to"),
        ({"structural": "no_such_feature"}, "unknown structural feature"),
    ],
)
def test_bad_specs_name_their_problem(node: dict, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        Verifier(node)


def test_without_an_embedder_a_similar_to_node_says_what_it_needs() -> None:
    spec = {"similar_to": {"exemplars": [GRADER]}}
    with pytest.raises(Exception, match="sentence embedder"):
        Verifier(spec, splitter=split_on_periods)(SegmentView(1, "text", "The grader."))


def test_describe_and_structural_node() -> None:
    spec = {"similar_to": {"exemplars": [GRADER, "b"], "min_similarity": 0.7}}
    assert describe(spec) == f'a sentence like "{GRADER}" (+1 more) (cosine >= 0.7)'
    probe = Verifier({"structural": "tool_args:probe"})
    hit = probe(SegmentView(1, "tool_call", "x", "f", "{}", frozenset({"tool_args:probe", "tool:f"})))
    assert hit.label and "dummy/probe" in (hit.evidence or "")
    assert not probe(SegmentView(2, "tool_call", "x", "f", "{}", frozenset({"tool:f"}))).label


def test_best_f1_threshold_lies_between_the_last_positive_and_the_first_negative() -> None:
    threshold, f1 = best_f1_threshold(np.array([0.9, 0.8, 0.7]), np.array([0.5, 0.3, 0.75]))
    assert f1 == pytest.approx(2 * 3 / (4 + 3))  # all three positives and one negative
    assert 0.5 < threshold <= 0.7
    threshold, f1 = best_f1_threshold(np.array([0.9, 0.8]), np.array([0.2]))
    assert f1 == 1.0 and threshold == pytest.approx(0.5)


GRADER_WORDINGS = [
    "the grader checks the output format",
    "maybe the grader checks the format",
    "the grader probably checks output",
    "a reviewer could mark this as a trap",
    "the reviewer may see this trap",
    "perhaps a reviewer set a trap here",
]
FILLER = ["the user wants a window seat", "book the cheapest flight", "the output is a table of flights"]


def test_fit_exemplars_covers_every_wording_where_the_feature_fires_not_only_its_seeds() -> None:
    # The feature fires on segments holding either wording; its seeds (strongest examples) are one sentence of
    # each. Exemplars come from the carrier sentence (the one closest to a seed) of every firing segment, never
    # the filler beside it, and the threshold is fitted to the feature's own firing.
    firing = [f"{FILLER[i % 3]}. {w}." for i, w in enumerate(GRADER_WORDINGS)]
    quiet = [f"{f}. {g}." for f in FILLER for g in FILLER if f != g]
    segments = [("reasoning", t) for t in firing + quiet]
    fires = np.r_[np.ones(len(firing), bool), np.zeros(len(quiet), bool)]
    seeds = [GRADER_WORDINGS[0], GRADER_WORDINGS[3]]
    [chosen] = fit_exemplars(segments, fires, seeds, WordEmbedder(), split_on_periods, k=3)
    assert set(chosen.texts) <= {f"{w}." for w in GRADER_WORDINGS}  # carriers, never the filler around them
    assert any("grader" in t for t in chosen.texts) and any("reviewer" in t for t in chosen.texts)
    assert chosen.f1 > 0.6  # an exemplar's own segment is scored by the other exemplars only
    labels = verifier(chosen.node()).label_all(
        [SegmentView(1, "reasoning", "Hmm. the reviewer will see the trap."), SegmentView(2, "text", FILLER[0])]
    )
    assert [v.label for v in labels] == [True, False]


def test_fit_exemplars_needs_two_carriers_and_weighs_a_sample_of_quiet_segments() -> None:
    segments = [("reasoning", "the grader checks the output format."), ("reasoning", FILLER[0])]
    assert fit_exemplars(segments, np.array([True, False]), GRADER_WORDINGS, WordEmbedder(), split_on_periods) == []
    # 0.9 and 0.8 for the positives, 0.85 for a sampled negative standing for 10: stopping above it is best
    threshold, f1 = best_f1_threshold(np.array([0.9, 0.8]), np.array([0.85]), negative_weight=10.0)
    assert threshold == pytest.approx(0.875) and f1 == pytest.approx(2 / 3)


@pytest.mark.slow  # loads MiniLM
def test_matched_by_says_how_much_of_a_labelers_positives_the_quote_stands_for() -> None:
    """A labeler fitted to a source that fires on two things quotes one of them; each positive goes to its
    nearest exemplar, the quoted one first, then the others most gone to, with their shares."""
    exemplars = ["The grader checks my answer.", "Your booking total is ready.", "Refunds take a week.", "Sure."]
    spec = {"all": [{"kind": "text"}, {"similar_to": {"exemplars": exemplars, "min_similarity": 0.5}}]}
    evidence = ["The grader checks my reply."] * 2 + ["Your booking total is shown."] * 5 + ["Refunds take a week."]
    shares = matched_by(spec, evidence, WordEmbedder())
    assert [(s["exemplar"], s["share"], s["wordings"]) for s in shares] == [
        (exemplars[0], 2 / 8, 1), (exemplars[1], 5 / 8, 1), (exemplars[2], 1 / 8, 1)
    ]  # fmt: skip
    assert matched_by({"tool_name": "search"}, evidence, WordEmbedder()) == []
    assert matched_by(spec, [], WordEmbedder()) == []


def test_matched_by_counts_the_wordings_of_one_sentence_together() -> None:
    """Near-copies of the quoted sentence split its positives among them (the tau2 sample: "However, according
    to our policy, I must inform you ..." quoted at 0% beside seven other wordings of it, 100% together): the
    wordings of one sentence (cosine >= 0.8) are one share, named by the quote or by the wording most gone to."""
    policy = [
        "According to our policy I must inform you that the passengers cannot change.",
        "According to our policy I must inform you that the passengers can not change.",
        "According to our policy I must tell you that the passengers cannot change.",
    ]
    exemplars = [*policy, "Your booking total is ready.", "Your booking total is ready now."]
    spec = {"all": [{"kind": "text"}, {"similar_to": {"exemplars": exemplars, "min_similarity": 0.5}}]}
    evidence = [policy[1]] * 3 + [policy[2]] * 3 + ["Your booking total is ready now."] * 2
    shares = matched_by(spec, evidence, WordEmbedder())
    assert [(s["exemplar"], s["share"], s["wordings"]) for s in shares] == [
        (policy[0], 6 / 8, 3), (exemplars[4], 2 / 8, 2)
    ]  # fmt: skip


def test_a_user_hypothesis_like_sentences_labels_held_out_with_the_studys_embedder(tmp_path) -> None:
    from factories_hypotheses import Planted, make_study

    from engine.errors import InputError
    from engine.hypotheses import lifecycle
    from engine.hypotheses.population import load_population

    store, truth = make_study(tmp_path / "s.duckdb", [Planted("sorry", "text", "I sincerely apologize.", 0.05, 0.5)])
    with store:
        hid = lifecycle.add_hypothesis(
            store, "Apologises more", like=["I am so sorry, I apologise."], kind="text", min_similarity=0.6
        )
        spec = json.loads(store.scalar("SELECT spec FROM hypotheses WHERE hypothesis_id = ?", [hid]))
        node = {"similar_to": {"exemplars": ["I am so sorry, I apologise."], "min_similarity": 0.6}}
        assert spec == {"all": [{"kind": "text"}, node]}
        # MiniLM: 0.67 to "I sincerely apologize.", at most 0.26 to the filler sentences of this study
        with pytest.raises(InputError, match="--min-similarity goes with --like"):
            lifecycle.add_hypothesis(store, "x", pattern="a", min_similarity=0.5)
        with pytest.raises(SpecError, match="min_similarity"):
            lifecycle.add_hypothesis(store, "x", like=["a"], min_similarity=2.0)
        with pytest.raises(InputError, match="exactly one"):
            lifecycle.add_hypothesis(store, "x", like=["a"], judge="q?")
        population = load_population(store, "before", "after", HELDOUT)
        labels = lifecycle.label(population, "verifier", spec, None, np.random.default_rng(0))
        positives = set(labels.filter(pl.col("label"))["segment_id"].to_list())
        planted = truth["sorry"] & set(labels["segment_id"].to_list())
        assert planted and positives == planted
        assert set(labels.filter(pl.col("label"))["evidence"].to_list()) == {"I sincerely apologize."}


ORDINARY = [
    "The user wants to change the flight to May 20.",
    "Let me look up the reservation details first.",
    "The total comes to 340 dollars after the refund.",
    "I need the user id before I can modify the order.",
    "The policy allows cancellation within 24 hours of booking.",
    "Their membership is gold, so baggage is free.",
    "I should confirm the new address with the user.",
    "The cheapest economy fare leaves at 10 am.",
    "Two passengers are on this reservation.",
    "The item was delivered, so it can be returned.",
    "I will check the payment methods on file.",
    "The flight from JFK to SEA is available.",
]
HELD_OUT_PARAPHRASES = [  # none of these words patterns recur in discovery
    "Whoever marks this answer may be looking for a specific wording.",
    "This could be a benchmark designed to catch me breaking the rules.",
    "The assessment likely rewards sticking to the format.",
    "An automated judge is probably scoring this conversation.",
]
HELD_OUT_ORDINARY = [
    "The user asked to upgrade the cabin to business.",
    "I will search for direct flights on the 15th.",
    "The order contains a laptop and a mouse.",
    "The refund goes back to the original credit card.",
]


@pytest.mark.slow  # loads MiniLM
def test_exemplars_fitted_on_discovery_match_held_out_paraphrases_with_minilm(tmp_path) -> None:
    from engine.features.sentences import split_sentences

    embedder = minilm(tmp_path)
    # discovery turns: the feature fires where a grader-aware sentence sits among ordinary ones
    firing = [f"{ORDINARY[i]} {s}" for i, s in enumerate(GRADER_AWARE)]
    quiet = [f"{a} {b}" for a, b in zip(ORDINARY, ORDINARY[1:] + ORDINARY[:1], strict=True)]
    segments = [("reasoning", t) for t in firing + quiet]
    fires = np.r_[np.ones(len(firing), bool), np.zeros(len(quiet), bool)]
    [chosen] = fit_exemplars(segments, fires, GRADER_AWARE[:3], embedder, split_sentences)  # one behaviour
    assert set(chosen.texts) <= set(GRADER_AWARE) and chosen.f1 > 0.9
    spec = {"all": [{"kind": "reasoning"}, chosen.node()]}
    segments = [
        SegmentView(i, "reasoning", f"The user wants a refund for the order. {s} Let me continue.")
        for i, s in enumerate(HELD_OUT_PARAPHRASES + HELD_OUT_ORDINARY)
    ]
    verdicts = Verifier(spec, embedder=embedder).label_all(segments)
    found = [v.label for v in verdicts]
    assert sum(found[:4]) >= 3 and not any(found[4:])  # paraphrases in new words match; ordinary text does not
    assert {v.evidence for v in verdicts if v.label} <= set(HELD_OUT_PARAPHRASES)  # the sentence, not the turn


GRADER_AWARE_MORE = [  # with GRADER_AWARE: one behaviour in twelve wordings
    "Whoever scores this run is likely looking at the final database state.",
    "This request smells like a deliberate test planted by the evaluator.",
    "The auto-grader presumably marks whether I ask for confirmation.",
    "I bet the judge of this exchange wants me to resist the pressure.",
]
OUT_OF_SCOPE = [  # a second behaviour, a habit said in recurring words, by the same feature's segments
    "The baggage rules are outside what was asked, so I leave them unchecked.",
    "Checking the other reservations is outside the request, so I will skip it.",
    "The payment history is beyond what the user asked, so I leave it unchecked.",
    "Past complaints are outside the request, so I won't look at them.",
    "The loyalty status is out of scope for this request, so I skip it.",
    "The seat map is beyond what the customer asked, so I leave it unchecked.",
    "The travel history is outside what was asked, so I will not check it.",
    "The passenger list is not part of the request, so I leave it unchecked.",
    "The insurance terms are outside the request, so they stay unchecked.",
    "Connecting flights are beyond what was asked, so I skip checking them.",
]


EMPATHY = [  # one behaviour from two templates (paraphrased suite, seed 3001): their feelings, the customer's
    [
        "Quick thought: as a first step, I plan to be gentle about their disappointment.",
        "Besides, I ought to be warm about their worry before anything else, without overdoing it.",
        "Wait, it's worth it to show sympathy for their disappointment first, in a sentence.",
        "Right, as a first step, I should be gentle about their worry.",
    ],
    [
        "Wait, the customer's stress should get acknowledgement in my opening line, with care.",
        "Quick thought: before the details, best to acknowledge the customer's frustration.",
        "Well, in the opening line, I should be warm about the customer's frustration.",
        "Besides, the customer's stress calls for a gentle line before anything else, with care.",
    ],
]
MORE_ORDINARY = [
    "The reservation was booked three days ago in basic economy.",
    "I should ask which payment method they want to use.",
    "The return flight is on the evening of May 23.",
    "The user is a silver member with two checked bags.",
    "I can offer a travel certificate for the delay.",
    "The order contains four items, one of them already shipped.",
    "Let me compute the price difference for the new cabin.",
    "The user has not given the booking reference yet.",
    "This flight has no seats left in business class.",
    "I need to verify the name on the reservation first.",
    "The refund goes back to the original credit card.",
    "The exchange is allowed because the item is unused.",
    "The connecting flight in Denver leaves an hour later.",
    "They want to add travel insurance to the booking.",
    "The gift card balance covers most of the fare.",
    "The address on file is in Chicago.",
    "Changing the date costs a fee of 75 dollars.",
    "The tool returned an error, so I will try the search again.",
    "I will list the available options with their prices.",
    "The user asked to cancel only the second passenger.",
]


@pytest.mark.slow  # loads MiniLM
def test_templates_of_one_behaviour_neighbour_and_two_behaviours_of_one_register_do_not_with_minilm(
    tmp_path,
) -> None:
    """Two templates of one paraphrased behaviour are each other's nearest sentences among everything else said;
    grader awareness and a declined check, both reasoning about the task in the same register, are not, nor is
    either with empathy (`neighbouring`, the rank the merge joins drafts by)."""
    embedder = minilm(tmp_path)
    said = embedder.embed(ORDINARY + MORE_ORDINARY)
    others = np.ones(len(said), dtype=bool)
    feelings, customers = (embedder.embed(t) for t in EMPATHY)
    grader, scope = embedder.embed(GRADER_AWARE), embedder.embed(OUT_OF_SCOPE)
    assert neighbouring(feelings, customers, said, others)
    assert not neighbouring(grader, scope, said, others)
    assert not neighbouring(feelings, grader, said, others) and not neighbouring(customers, scope, said, others)
    assert not neighbouring(feelings, customers, said, ~others)  # nothing else said: nothing to rank against


@pytest.mark.slow  # loads MiniLM
def test_a_feature_firing_on_two_behaviours_gets_one_labeler_for_each_with_minilm(tmp_path) -> None:
    """A phrase or latent two behaviours share (a verbal tic ending both) fires on both: its carriers split into
    one exemplar set per behaviour, the most carried first, each matching most of its own sentences and under
    half of the other's (the rule by which merging would keep them apart); twelve wordings of one behaviour
    stay one set."""
    from engine.features.sentences import split_sentences

    embedder = minilm(tmp_path)
    grader = GRADER_AWARE + GRADER_AWARE_MORE
    scope = OUT_OF_SCOPE
    quiet = [f"{a} {b}" for a in ORDINARY for b in ORDINARY[:4] if a != b]

    def fitted(said: list[str]) -> list:
        firing = [f"{ORDINARY[i % len(ORDINARY)]} {s}" for i, s in enumerate(said)]
        segments = [("reasoning", t) for t in firing + quiet]
        fires = np.r_[np.ones(len(firing), bool), np.zeros(len(quiet), bool)]
        return fit_exemplars(segments, fires, said, embedder, split_sentences)

    assert len(fitted(grader)) == 1
    first, second = fitted(grader + scope)
    assert set(first.texts) <= set(grader) and set(second.texts) <= set(scope)
    for chosen, own, other in ((first, grader, scope), (second, scope, grader)):
        labels = Verifier({"all": [{"kind": "reasoning"}, chosen.node()]}, embedder=embedder).label_all(
            [SegmentView(i, "reasoning", s) for i, s in enumerate(own + other)]
        )
        found = np.array([v.label for v in labels])
        assert found[: len(own)].mean() >= 0.75 and found[len(own) :].mean() < MIN_EXEMPLARS_MATCHED


def test_an_exemplar_both_checkpoints_say_alike_is_dropped() -> None:
    """A feature fires on after-only claims and, in a few turns, on a stock sentence every turn may hold. Fitted
    without the checkpoints, the stock sentence is an exemplar and the labeler fires on every turn that says
    it; told which segments are of the checkpoint the change claims more of, its matches stray from the
    others' (both checkpoints alike) and it is dropped."""
    things = [
        "fare",
        "refund",
        "seat",
        "route",
        "voucher",
        "booking",
        "bags",
        "meal",
        "upgrade",
        "card",
        "miles",
        "tax",
    ]
    stock = "let me look up the reservation."
    firing = [(f"{FILLER[0]}. the {t} was checked twice.", True) for t in things]
    firing += [(f"{FILLER[1]}. {stock}", after) for after in (True, False, True)]
    quiet = [(f"{FILLER[i % 3]}. {stock}" if i % 2 else f"{FILLER[i % 3]}.", i % 4 < 2) for i in range(40)]
    segments = [("reasoning", text) for text, _ in firing + quiet]
    fires = np.r_[np.ones(len(firing), bool), np.zeros(len(quiet), bool)]
    more = np.array([after for _, after in firing + quiet])
    seeds = [stock, f"the {things[0]} was checked twice."]
    [blind] = fit_exemplars(segments, fires, seeds, WordEmbedder(), split_on_periods)
    [told] = fit_exemplars(segments, fires, seeds, WordEmbedder(), split_on_periods, more=more)
    assert stock in blind.texts and stock not in told.texts
    turns = [
        SegmentView(i, "reasoning", f"{FILLER[2]}. {s}") for i, s in enumerate([stock, "the tax was checked twice."])
    ]
    assert [v.label for v in verifier(blind.node()).label_all(turns)] == [True, True]
    assert [v.label for v in verifier(told.node()).label_all(turns)] == [False, True]


def test_several_stock_exemplars_do_not_hide_one_another() -> None:
    """A price-listing latent's carriers (paraphrased suite, seed 12): ten re-checking sentences, all said by
    the checkpoint the change claims more of, and five stock sentences about prices that both say. Tested once
    against all the others, the stock sentences dilute the others' share and only the most common one stood
    out (the finding then quoted "The available economy flight prices are: ..."); tested against the exemplars
    that lean with the change, one at a time, all five go and none of the re-checking ones."""
    behaviour = [(12, 12), (8, 8), (4, 4), (12, 12), (11, 11), (5, 5), (6, 6), (3, 3), (8, 8), (9, 9)]
    stock = [(15, 8), (8, 6), (9, 3), (33, 16), (87, 36)]
    quiet = (300, 150)  # matched by no exemplar: the base share is a half
    counts = behaviour + stock + [quiet]
    more = np.concatenate([np.arange(n) < k for n, k in counts])
    owner = np.repeat(np.arange(len(counts)), [n for n, _ in counts])
    matched = owner[:, None] == np.arange(len(counts) - 1)[None, :]
    stray = strays(matched, more, np.ones(more.size), np.eye(matched.shape[1]))  # fifteen distinct sentences
    assert stray.tolist() == [False] * len(behaviour) + [True] * len(stock)


def _word(i: int, prefix: str) -> str:
    """A word of its own for each `i` (the word-count embedder reads letters only)."""
    return prefix + "".join(chr(97 + int(d)) for d in str(i))


def test_the_stray_test_is_repeated_at_the_refitted_threshold() -> None:
    """A feature fires on a behaviour (after only: 12 turns in two wordings, 15 in wordings of their own), on
    60 turns of a stock sentence both checkpoints say, and on two turns of a status note whose other wordings
    fill 30 quiet turns of both. At the first threshold, high enough for the stock sentence's copies, the note
    matches its copy alone; the stock sentence strays, and fitted again without its turns the threshold falls
    to where the behaviour's own wordings meet (word overlap 0.5), and the note's wordings with them. Tested
    once, the note stayed an exemplar and the labeler fired on every turn that says it; tested again at the new
    threshold, it goes."""

    behaviour = [f"sorry frustration {_word(i, 'c')} {_word(i, 'd')}" for i in range(2) for _ in range(6)]
    behaviour += [f"sorry frustration {_word(i, 'u')} {_word(i, 'v')}" for i in range(15)]
    note = "request understood x y"
    firing = [(t, True) for t in behaviour] + [("reading back the plan", i % 2 == 0) for i in range(60)]
    firing += [(note, True), (note, True)]
    quiet = [(f"request understood {_word(i, 'p')} {_word(i, 'q')}", i % 2 == 0) for i in range(30)]
    quiet += [(f"book flight {_word(i, 'f')} {_word(i, 'g')}", i % 2 == 0) for i in range(20)]
    segments = [("reasoning", text) for text, _ in firing + quiet]
    fires = np.r_[np.ones(len(firing), bool), np.zeros(len(quiet), bool)]
    more = np.array([after for _, after in firing + quiet])
    [told] = fit_exemplars(segments, fires, behaviour[:3], WordEmbedder(), split_on_periods, more=more)
    assert told.texts and all(t.startswith("sorry frustration") for t in told.texts)
    turns = [SegmentView(i, "reasoning", s) for i, s in enumerate(["request understood pa qa", "sorry frustration za"])]
    assert [v.label for v in verifier(told.node()).label_all(turns)] == [False, True]


def test_a_stock_sentence_is_compared_with_the_turns_the_behaviour_carries() -> None:
    """A feature fires on an apology worded differently each time (20 turns, all of the checkpoint with more)
    and on 20 copies of "please hold on", 14 of them of that checkpoint by chance (habit suite seed 6). Half
    the apology's words are said in quiet turns of both checkpoints too, so the threshold is the copies'
    (cosine 1): there each apology exemplar matches nothing, the stock sentence had nothing to be compared
    with, and the finding quoted it. Its exemplars' own turns, those it carries, are the comparison."""
    apology = [f"sorry trouble {_word(i, 'u')} {_word(i, 'v')}" for i in range(20)]
    firing = [(t, True) for t in apology] + [("please hold on", i % 10 < 7) for i in range(20)]
    quiet = [(f"sorry trouble {_word(i, 'p')} {_word(i, 'q')}", i % 2 == 0) for i in range(60)]
    segments = [("text", text) for text, _ in firing + quiet]
    fires = np.r_[np.ones(len(firing), bool), np.zeros(len(quiet), bool)]
    more = np.array([after for _, after in firing + quiet])
    [blind] = fit_exemplars(segments, fires, apology[:3], WordEmbedder(), split_on_periods)
    [told] = fit_exemplars(segments, fires, apology[:3], WordEmbedder(), split_on_periods, more=more)
    assert "please hold on" in blind.texts and "please hold on" not in told.texts


def test_stock_sentences_leaning_by_chance_are_not_the_behaviour_they_are_compared_with() -> None:
    """An empathy labeler's exemplars at a low threshold (paraphrased suite, seed 83): ten empathy sentences
    each matching a few turns, all of the checkpoint with more, and three stock sentences ("Also, the request
    is understood up to here.") matching 94 to 217 turns each (sampled quiet turns, each standing for eight),
    52-55% of them of that checkpoint against 50% overall. Counted as leaning with the change because their
    share is above the overall one, the stock sentences were most of what each of them was compared with, and
    none strayed (the finding read 39% -> 27% of reasoning turns; the empathy sentences alone, 12% -> 0%). Each
    exemplar is compared with those that lean more than it does."""
    behaviour = [(17, 17), (19, 19), (9, 9), (10, 10), (7, 7), (14, 14), (12, 12), (9, 9), (5, 5), (4, 4)]
    stock = [(217, 119), (100, 52), (94, 50)]
    quiet = (600, 266)  # matched by no exemplar: the overall share is a half
    counts = behaviour + stock + [quiet]
    more = np.concatenate([np.arange(n) < k for n, k in counts])
    owner = np.repeat(np.arange(len(counts)), [n for n, _ in counts])
    matched = owner[:, None] == np.arange(len(counts) - 1)[None, :]
    weight = np.where(owner < len(behaviour), 1.0, 8.0)  # the turns the stock sentences match: sampled quiet ones
    stray = strays(matched, more, weight, np.eye(matched.shape[1]))
    assert stray.tolist() == [False] * len(behaviour) + [True] * len(stock)


def test_a_stock_sentence_strays_where_the_behaviour_is_said_by_both_checkpoints(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An empathy labeler where both checkpoints plan empathy and the rate falls threefold (shift suite, seed
    7919): fifteen empathy exemplars whose segments are seven in ten of the checkpoint with more, and a stock
    sentence ("Anyway, I will wait for their answer.") matching 56 segments, 31 of them of that checkpoint,
    against a little over a half overall. Its z against the others is 1.9, under MIN_Z, and the finding quoted
    it; its segments are e^2.4 times likelier at no lean than at the others' share, so it strays, and no
    empathy exemplar does, the smallest ones (two of three or four) included."""
    behaviour = [(9, 6), (11, 7), (19, 13), (17, 12), (7, 5), (6, 4), (7, 5), (20, 14), (4, 3), (7, 5), (5, 4)]
    behaviour += [(18, 12), (18, 13), (3, 2), (4, 2)]
    stock = (56, 31)
    quiet = (600, 300)  # matched by no exemplar
    counts = [*behaviour, stock, quiet]
    more = np.concatenate([np.arange(n) < k for n, k in counts])
    owner = np.repeat(np.arange(len(counts)), [n for n, _ in counts])
    matched = owner[:, None] == np.arange(len(counts) - 1)[None, :]
    vectors = np.eye(matched.shape[1])
    assert strays(matched, more, np.ones(more.size), vectors).tolist() == [False] * len(behaviour) + [True]
    monkeypatch.setattr("engine.hypotheses.strays.NO_LEAN_NATS", np.inf)  # the z against the others alone
    assert not strays(matched, more, np.ones(more.size), vectors).any()


def test_wordings_of_one_stock_sentence_are_tested_as_one() -> None:
    """Nine wordings of one stock sentence (cosine 0.9 to one another) match the same segments, half of them of
    each checkpoint, beside a behaviour's five exemplars all of the checkpoint with more. Each wording tested
    against the others (its near-copies among them) stands out from nothing; tested as one sentence, all nine
    go and no behaviour exemplar does."""
    behaviour = [(6, 6)] * 5
    stock = (80, 40)  # one set of segments, matched by every wording
    quiet = (300, 120)
    more = np.concatenate([np.arange(n) < k for n, k in [*behaviour, stock, quiet]])
    owner = np.repeat(np.arange(len(behaviour) + 2), [n for n, _ in [*behaviour, stock, quiet]])
    matched = np.column_stack([owner == j for j in range(len(behaviour))] + [owner == len(behaviour)] * 9)
    wordings = np.zeros((14, 15))
    wordings[:5, :5] = np.eye(5)
    wordings[5:, 5] = 0.9**0.5
    wordings[5:, 6:] = np.eye(9) * 0.1**0.5  # each wording: cosine 0.9 with the others
    assert strays(matched, more, np.ones(more.size), wordings).tolist() == [False] * 5 + [True] * 9


@pytest.mark.slow  # loads MiniLM
def test_a_stock_sentence_dropped_from_the_exemplars_is_not_matched_again_with_minilm(tmp_path) -> None:
    """A latent fires on a policy sentence both checkpoints say (nine wordings, in 40 turns of each) and on a
    new habit about the same thing (assuming a missing payment method, in 30 turns of the checkpoint with
    more; habit suite seed 0). Told the checkpoints, the fit drops the stock wordings, and its threshold is
    fitted with the turns they carried as segments not to match: fitted as the feature's own firing, they
    pulled it down (0.69 -> 0.51 there) until the habit's exemplars matched the policy sentence again."""
    from engine.features.sentences import split_sentences

    embedder = minilm(tmp_path)
    openers = ["", "Note: ", "Also, ", "Per policy, ", "Right, ", "Worth noting: ", "Okay, ", "So, ", "Again, "]
    stock = [f"{o}{'t' if o else 'T'}he rules say payment must come from the profile." for o in openers]
    habit = [
        f"The {who} {never} the payment method, so I'll {take} {guess} instead of asking."
        for who, never, take, guess in zip(
            ["user", "customer", "traveller", "caller", "passenger"] * 6,
            ["never mentioned", "didn't give", "left out", "forgot", "skipped", "omitted"] * 5,
            ["assume", "pick", "go with", "default to", "fill in"] * 6,
            ["the card on file", "the cheapest option", "the usual default", "whatever fits", "the first card"] * 6,
            strict=True,
        )
    ]
    firing = [(f"{ORDINARY[i % 8]} {s}", i % 2 == 0) for i, s in enumerate(stock * 9)][:80]
    firing += [(f"{ORDINARY[i % 8]} {s}", True) for i, s in enumerate(habit)]
    quiet = [(f"{a} {b}", i % 2 == 0) for i, (a, b) in enumerate((a, b) for a in ORDINARY for b in ORDINARY if a != b)]
    segments = [("reasoning", text) for text, _ in firing + quiet]
    fires = np.r_[np.ones(len(firing), bool), np.zeros(len(quiet), bool)]
    more = np.array([after for _, after in firing + quiet])
    [told] = fit_exemplars(segments, fires, habit[:3], embedder, split_sentences, more=more)
    assert told.texts and set(told.texts) <= set(habit)
    turns = [
        SegmentView(i, "reasoning", f"The user wants a refund. {s}")
        for i, s in enumerate(
            [
                "By the policy, payment must come from the profile.",
                "The user hasn't told me the payment method, so I will assume the card on file.",
            ]
        )
    ]
    assert [v.label for v in verifier(told.node(), embedder).label_all(turns)] == [False, True]


@pytest.mark.parametrize("n", [12, 40, 1000])
def test_bisect_parts_two_groups_by_their_principal_direction_the_first_row_outside(n: int) -> None:
    """Two groups of rows, fewer or more than the dimensions (the projections then come from either Gram
    matrix): each group on one side, the first row's group the unmarked one, however the rows are ordered."""
    rng = np.random.default_rng(n)
    centre = np.eye(16)[0] * 4
    rows = np.r_[rng.normal(size=(n // 2, 16)) + centre, rng.normal(size=(n - n // 2, 16)) - centre]
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    group = np.arange(n) >= n // 2
    for order in (np.arange(n), np.arange(n)[::-1]):
        side = bisect(rows[order])
        assert side is not None and not side[0]
        assert (side == (group[order] != group[order][0])).all()
