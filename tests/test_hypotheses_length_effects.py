"""Drafting: a sentence draft that only says the turns got longer is the length draft's side effect."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from factories_hypotheses import make_study
from test_hypotheses_length import APOLOGY, lengthened

from engine.hypotheses.discovery import DiscoverySplit, Draft
from engine.hypotheses.length_effects import without_length_effects
from engine.hypotheses.population import load_population
from engine.kinds import DISCOVERY

TEXT = ("text",)


def _draft(discovery: DiscoverySplit, spec: dict, hits: np.ndarray | None = None) -> Draft:
    """An increase draft on text labelled by `spec` (or, for a length band, holding `hits`)."""
    index, _ = discovery.index(TEXT)
    if hits is None:
        hits, _, _ = discovery.evaluate(discovery.verifier(spec), TEXT)
    ids = frozenset(index.segment_ids[hits].tolist())
    return Draft(f"More text turns {spec}", "increase", "verifier", spec, "extractive", 5.0, 0.2, {}, ids, TEXT)


def test_a_sentence_in_more_turns_only_because_turns_grew_goes_to_the_length_finding(tmp_path: Path) -> None:
    """After-turns hold three filler sentences more on average: "contains confirm" rises with them, and is the
    side effect of the length draft; the planted apology holds at equal length and stays. Without a length draft
    nothing is dropped (held-out validation cautions the claim instead)."""
    store, _ = make_study(tmp_path / "s.duckdb", [APOLOGY], n_tasks=60)
    with store:
        population = lengthened(load_population(store, "before", "after", DISCOVERY), 1.0, 4.0)
    discovery = DiscoverySplit(population)
    _, segs = discovery.index(TEXT)
    longer = (segs["text"].str.count_matches(r"\S+") >= 50).to_numpy()
    length = _draft(discovery, {"all": [{"kind": "text"}, {"structural": "length:50-149"}]}, longer)
    apology = _draft(discovery, {"all": [{"kind": "text"}, {"regex": "apologi[sz]e"}]})
    filler = _draft(discovery, {"all": [{"kind": "text"}, {"regex": "confirm"}]})
    assert discovery.z_among(filler, frozenset(), False) >= 2  # it separates the checkpoints on its own

    kept = without_length_effects([length, apology, filler], discovery, np.random.default_rng(0), fdr=0.05,
                                  n_permutations=500)  # fmt: skip
    assert kept == [length, apology]
    [effect] = length.provenance["side_effects"]
    assert effect["statement"] == filler.statement
    assert effect["relation"].startswith("changed with turn length only (at equal turn length")
    rng = np.random.default_rng(0)
    assert without_length_effects([apology, filler], discovery, rng, fdr=0.05, n_permutations=500) == [
        apology,
        filler,
    ]


def test_a_length_change_carried_by_a_finding_s_sentences_is_its_side_effect(tmp_path: Path) -> None:
    """The planted apology makes its turns longer and nothing else does: the length draft goes under it."""
    store, _ = make_study(tmp_path / "s.duckdb", [APOLOGY], n_tasks=60)
    with store:
        discovery = DiscoverySplit(lengthened(load_population(store, "before", "after", DISCOVERY), 1.0, 1.0))
    _, segs = discovery.index(TEXT)
    words = segs["text"].str.count_matches(r"\S+").to_numpy()
    length = _draft(discovery, {"all": [{"kind": "text"}, {"structural": "length:50-149"}]}, words >= np.median(words))
    apology = _draft(discovery, {"all": [{"kind": "text"}, {"regex": "apologi[sz]e"}]})
    rng = np.random.default_rng(0)
    assert without_length_effects([length, apology], discovery, rng, fdr=0.05, n_permutations=500) == [apology]
    [effect] = apology.provenance["side_effects"]
    assert effect["statement"] == length.statement
    assert effect["relation"].startswith("turn length changed mostly with the findings' sentences")
