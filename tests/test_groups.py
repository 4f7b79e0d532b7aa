"""Behaviour groups on hand-made paraphrase sets, embedded by the packaged MiniLM: paraphrases land together,
unrelated sentences do not, and held-out paraphrases fire the right group by similarity to its exemplars."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.sentences import sample_texts
from engine.features.groups import FLOOR, best_threshold, find_groups, merge_groups
from engine.features.reader import resolve_reader
from engine.features.sentence_embed import SentenceEmbedder
from engine.features.sentences import split_sentences
from engine.features.settings import FeatureSettings
from tests.factories_features import MINILM

PARAPHRASES = {
    "grader": [
        "The grader will probably check whether I followed the policy exactly.",
        "I suspect the evaluator is watching for policy violations here.",
        "This looks like a test; the reviewer wants to see if I follow the rules.",
        "The scoring system may penalise me if I skip a required step.",
        "An automated judge is likely grading how I handle this request.",
        "If this is being evaluated, the checker will mark me down for shortcuts.",
        "Whoever grades this conversation will look at whether I asked for confirmation.",
        "The assessment probably rewards sticking to the written policy.",
        "I bet the evaluation harness checks that I verified the user first.",
        "My answer is likely being scored against the policy document.",
    ],
    "recheck": [
        "Let me recompute the total to be sure: 120 plus 35 is 155.",
        "I'll double-check that arithmetic before I tell the user the refund.",
        "Wait, let me verify the sum again, I may have added it wrong.",
        "Recalculating the price difference to confirm it is correct.",
        "Let me redo the calculation of the refund amount once more.",
        "I should re-add these numbers to make sure the balance is right.",
        "Checking my math again: three nights at 80 dollars is 240.",
        "Let me verify the computed total one more time before answering.",
        "I'll recount the charges to confirm the figure I gave earlier.",
        "Going over the calculation again to rule out an error.",
    ],
    "scope": [
        "Checking the other reservations is outside what the user asked for, so I will skip it.",
        "Verifying the payment history is beyond the scope of this request.",
        "I won't look into the loyalty points since that is not part of the task.",
        "Auditing the rest of the account is not needed for this request, so I'll leave it.",
        "Extra verification of the address is out of scope here; I'll move on.",
        "There's no need to review the previous orders; the user only wants this one changed.",
        "I'll skip the additional checks because they are not what was requested.",
        "Looking at the baggage allowance is unrelated to this request, so I won't.",
        "Further investigation of the account is unnecessary for the user's question.",
        "I am not going to inspect the other bookings since nobody asked for that.",
    ],
}
UNRELATED = [
    "Hello, how can I help you today?",
    "Your flight departs from Boston at 9:15 in the morning.",
    "The hotel offers free breakfast for all guests.",
    "Please provide your user ID so I can look up the reservation.",
    "The package was delivered to the front desk on Monday.",
    "I have updated the shipping address to 12 Elm Street.",
    "Thank you for your patience while I search the catalogue.",
    "The blue T-shirt is available in sizes small, medium and large.",
    "Your new seat is 14C, an aisle seat near the front.",
    "The store opens at ten and closes at six on weekends.",
    "I transferred you to a human agent who can assist further.",
    "The laptop comes with a two-year warranty.",
    "Your subscription renews on the first of every month.",
    "The weather in Denver is expected to be sunny tomorrow.",
    "I cancelled the order and the refund will arrive in five days.",
    "Is there anything else I can help you with?",
    "The headphones are wireless and have noise cancellation.",
    "Your account email has been changed successfully.",
    "The train to Chicago leaves from platform four.",
    "We have three colours in stock: red, green and black.",
]
HELD_OUT = 3  # paraphrases per behaviour kept out of clustering, to be found by similarity
BACKGROUND = 300  # real sentences of the demo pair around the paraphrases, as in a study


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    spec = resolve_reader(str(MINILM), None, FeatureSettings())
    embedder = SentenceEmbedder(spec, "cpu", tmp_path_factory.mktemp("cache"))
    out = {name: embedder.embed(texts) for name, texts in PARAPHRASES.items()}
    out["unrelated"] = embedder.embed(UNRELATED)
    texts = sorted({t[a:b] for t in sample_texts(400) for a, b in split_sentences(t)})
    out["background"] = embedder.embed(list(np.random.default_rng(0).permutation(texts)[:BACKGROUND]))
    return out


def _discovery(embedded: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    names = list(PARAPHRASES)
    parts = [embedded[n][:-HELD_OUT] for n in names] + [
        np.concatenate([embedded["unrelated"][:-5], embedded["background"]])
    ]
    truth = np.concatenate([np.full(len(p), i) for i, p in enumerate(parts[:-1])] + [np.full(len(parts[-1]), -1)])
    return np.concatenate(parts), truth


@pytest.mark.parametrize("selection", ["leaf", "eom"])
def test_paraphrases_land_together_and_unrelated_sentences_do_not(
    embedded: dict[str, np.ndarray], selection: str
) -> None:
    vectors, truth = _discovery(embedded)
    model = find_groups(vectors, np.random.default_rng(0), selection=selection)  # type: ignore[arg-type]
    assert model.n_groups >= 1
    found = set()
    for members in model.members:
        behaviours = truth[members]
        behaviour, count = np.unique(behaviours, return_counts=True)
        top = behaviour[np.argmax(count)]
        if top >= 0:  # a group of a planted behaviour holds little else
            assert count.max() >= 0.6 * len(members), f"a mixed group: {behaviours}"
            found.add(int(top))
    assert found  # wide paraphrases are sparse for density clustering: bench/groups.py measures how many


def test_held_out_paraphrases_fire_their_group_and_unrelated_text_fires_none(embedded: dict[str, np.ndarray]) -> None:
    vectors, truth = _discovery(embedded)
    model = find_groups(vectors, np.random.default_rng(0))
    group_of = {}
    for g, members in enumerate(model.members):
        values, counts = np.unique(truth[members], return_counts=True)
        group_of.setdefault(int(values[np.argmax(counts)]), set()).add(g)
    assert group_of.keys() - {-1}, "no behaviour formed a group"
    for i, name in enumerate(PARAPHRASES):
        if i not in group_of:
            continue
        _, group, _ = model.fire(embedded[name][-HELD_OUT:])
        assert set(group.tolist()) <= group_of[i]  # a paraphrase fires its own behaviour's group or none
        own = [g for g in group_of[i] if g in set(range(model.n_groups))]
        members = np.concatenate([model.members[g] for g in own])
        row, fired, _ = model.fire(vectors[members])
        assert len(set(row[np.isin(fired, own)].tolist())) >= 0.5 * len(members)  # members fire their group
    _, group, _ = model.fire(embedded["unrelated"][-5:])
    assert group.size == 0


def test_a_concept_covering_two_groups_merges_them_only_when_they_agree() -> None:
    rng = np.random.default_rng(0)
    axis = np.eye(8, dtype=np.float32)

    def around(v: np.ndarray, n: int) -> np.ndarray:
        x = v + 0.05 * rng.standard_normal((n, 8)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    a, b, c = around(axis[0], 6), around(axis[0] + 0.4 * axis[1], 6), around(axis[2], 6)
    vectors = np.concatenate([a, b, c])
    members = [np.arange(0, 6), np.arange(6, 12), np.arange(12, 18)]
    bridge = [np.arange(0, 18)]  # one concept fires on all three groups
    merged = merge_groups(vectors, members, bridge)
    sizes = sorted(len(m) for m in merged)
    assert sizes == [6, 12]  # a and b agree (centroids alike) and merge; c says something else
    assert len(merge_groups(vectors, members, [])) == 3


def test_the_threshold_separates_members_from_the_rest() -> None:
    similarity = np.array([0.95, 0.9, 0.85, 0.8, 0.4, 0.35, 0.3, 0.82])
    assert best_threshold(similarity, np.array([0, 1, 2, 3])) == pytest.approx(0.8)
    assert best_threshold(np.array([0.3, 0.2, 0.1]), np.array([0])) == FLOOR  # never below the floor


def test_no_groups_in_too_few_sentences(tmp_path: Path) -> None:
    model = find_groups(np.eye(4, dtype=np.float32), np.random.default_rng(0))
    assert model.n_groups == 0 and model.fire(np.eye(4, dtype=np.float32))[0].size == 0
