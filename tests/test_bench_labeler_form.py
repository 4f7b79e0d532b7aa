"""The pieces of bench/labeler_form.py on synthetic embeddings: the probe learns a behaviour's direction from the
segments it is fitted to and finds new wordings of it; carriers are the planted sentences; the scores count."""

from __future__ import annotations

import numpy as np

from bench.labeler_form import Held, fit_probe, planted_carriers, segment_scores

DIM = 32
SENTENCES = 4  # a segment's units


def _segments(rng: np.random.Generator, n: int, planted: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """Unit vectors of n segments of SENTENCES units each: noise, and in each planted segment one unit (its
    first) along `direction`, each wording its own mix of it and noise."""
    units = rng.normal(size=(n * SENTENCES, DIM))
    first = np.flatnonzero(np.repeat(planted, SENTENCES) & (np.arange(n * SENTENCES) % SENTENCES == 0))
    units[first] = 4.0 * direction + rng.normal(size=(first.size, DIM))
    return units / np.linalg.norm(units, axis=1, keepdims=True)


def test_the_probe_finds_new_wordings_of_the_behaviour_it_was_fitted_to() -> None:
    rng = np.random.default_rng(0)
    direction = rng.normal(size=DIM)
    direction /= np.linalg.norm(direction)
    owner = np.repeat(np.arange(400), SENTENCES)
    planted = rng.random(400) < 0.15
    train = _segments(rng, 400, planted, direction)
    first = np.arange(owner.size) % SENTENCES == 0
    probe, threshold = fit_probe(train, owner, np.repeat(planted, SENTENCES) & first, planted)
    held = rng.random(400) < 0.15
    scores = segment_scores(probe.decision_function(_segments(rng, 400, held, direction)), owner, 400)
    found = scores >= threshold
    assert (found & held).sum() >= 0.9 * held.sum()
    assert (found & ~held).sum() <= 0.1 * (~held).sum()
    # fitted to labels unrelated to the direction, it tells the behaviour apart no better than chance
    noise = rng.random(400) < 0.15
    probe, threshold = fit_probe(train, owner, np.repeat(noise, SENTENCES) & first, noise)
    found = segment_scores(probe.decision_function(_segments(rng, 400, held, direction)), owner, 400) >= threshold
    assert found[held].mean() - found[~held].mean() < 0.2


def test_carriers_are_the_planted_sentences() -> None:
    units = ["Hello there.", "The grader may be watching.", "Booking done.", "I will check the fare."]
    owner = np.array([0, 0, 1, 1])
    carrier = planted_carriers(units, owner, np.array([True, False]), ["Okay. The grader may be watching."])
    assert carrier.tolist() == [False, True, False, False]
    # a tool call is one unit, its own carrier
    assert planted_carriers(["get_user {}"], np.array([0]), np.array([True]), ["x"]).tolist() == [True]


def test_held_out_counts() -> None:
    held = Held(positives={1, 2, 5}, planted={1, 2, 3, 4}, after={2, 4, 5})
    assert held.recall(after=False) == (1, 2)  # segment 1 of {1, 3}
    assert held.recall(after=True) == (1, 2)  # segment 2 of {2, 4}
    assert held.false_positives == 1
    assert held.f1 == 2 * 2 / 7
    assert segment_scores(np.array([0.1, 0.7, -1.0]), np.array([0, 0, 2]), 3).tolist() == [0.7, -np.inf, -1.0]
