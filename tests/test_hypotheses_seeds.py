"""Seed sentences of an exemplar labeler: the feature's examples in its firing segments, or, when it has none
there, the sentence each firing segment shares with the others and the quiet segments lack."""

from __future__ import annotations

import numpy as np
from factories_exemplars import WordEmbedder

from engine.hypotheses.seeds import carrier_seeds

BACKGROUND = ["the flight search comes next", "the user wants a refund", "payment must come from the profile"]
APOLOGY = ["sorry about the long delay truly", "truly sorry about the wait", "so sorry the delay was long"]


def units(n_firing: int, n_quiet: int) -> tuple[list[list[str]], np.ndarray]:
    """Firing segments: background sentences with an apology among them; quiet ones: background only."""
    segments = [[BACKGROUND[i % 3], APOLOGY[i % 3], BACKGROUND[(i + 1) % 3]] for i in range(n_firing)]
    segments += [[BACKGROUND[i % 3], BACKGROUND[(i + 2) % 3]] for i in range(n_quiet)]
    return segments, np.arange(n_firing + n_quiet) < n_firing


def test_examples_from_another_kind_give_way_to_the_sentence_the_firing_segments_share() -> None:
    segments, fires = units(9, 30)
    seeds = carrier_seeds(["- James Taylor (DOB: 1997-01-23)"], segments, fires, WordEmbedder().embed)
    assert set(seeds) == set(APOLOGY)  # one per firing segment, its apology, never a background sentence


def test_examples_found_in_the_firing_segments_are_the_seeds() -> None:
    segments, fires = units(9, 30)
    examples = ["not in any segment", APOLOGY[1]]
    assert carrier_seeds(examples, segments, fires, WordEmbedder().embed) == [APOLOGY[1]]
    assert carrier_seeds(examples, segments, np.zeros_like(fires), WordEmbedder().embed) == []
