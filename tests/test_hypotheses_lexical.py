"""Lexical sources: word n-grams tested on each rollout's own rate, composition-proof for tool calls."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from factories_hypotheses import Planted, make_study

from engine.hypotheses import lexical
from engine.hypotheses.draft import DiscoverySplit
from engine.hypotheses.lexical import lexical_sources
from engine.hypotheses.ngrams import NgramIndex
from engine.hypotheses.population import load_population
from engine.kinds import DISCOVERY
from engine.text import ngrams


def test_a_new_tool_does_not_make_the_other_tools_n_grams_decrease(tmp_path: Path) -> None:
    new_tool = Planted("new_tool", "tool_call", "check_policy_section", 0.0, 0.5)  # beside half the calls after
    store, _ = make_study(tmp_path / "s.duckdb", [new_tool])
    with store:
        discovery = DiscoverySplit(load_population(store, "before", "after", DISCOVERY))
        sources = lexical_sources(discovery, np.random.default_rng(0), fdr=0.05, n_permutations=2000)
    # every other tool is called exactly as before (as a share of all calls each fell by a third); the new
    # tool's own n-grams are on all of its calls, so its change is the structural tool feature's, not theirs
    assert not [s.top_ngrams for s in sources if s.kinds == ("tool_call",)]


def test_the_index_finds_the_segments_that_have_any_of_the_n_grams() -> None:
    texts = ["Let me check the booking.", "I will check it again", "No booking found", ""]
    index = NgramIndex.build(texts, np.array([True, False, True, False]), np.arange(4))
    for gram in {g for t in texts for g in ngrams(t)} | {"not there"}:
        assert index.matches({gram}).tolist() == [gram in ngrams(t) for t in texts]
    assert index.matches({"check", "booking"}).tolist() == [True, True, True, False]
    assert index.matches(set()).tolist() == [False] * 4


def test_a_small_studys_fold_drafts_n_grams_at_its_looser_level(tmp_path: Path) -> None:
    """A fold of a 4-task study tests thousands of n-grams on a handful of rollouts, so a phrase said only
    after reaches q < 0.5 but not 0.05 (small habits seed 59: "before", the word of a confirmation habit, at
    q = 0.29): drafted at the drafting level (`sources.DRAFT_FDR`) as the fold's features are, and held
    to the configured level by the other fold's test."""
    phrase = Planted("recheck", "text", "I will double check the refund", 0.0, 0.25)
    store, _ = make_study(tmp_path / "s.duckdb", [phrase], n_tasks=4, k=4)
    with store:
        discovery = DiscoverySplit(load_population(store, "before", "after", DISCOVERY))
        strict = lexical_sources(discovery, np.random.default_rng(0), fdr=0.05, n_permutations=2000)
        loose = lexical_sources(discovery, np.random.default_rng(0), fdr=0.05, n_permutations=2000, draft_fdr=0.5)
    assert not strict
    assert [s.top_ngrams[0] for s in loose if s.kinds == ("text",)][0] in phrase.content
    assert all(0.05 <= s.q_value < 0.5 and s.delta > 0 for s in loose)


def test_a_tool_call_n_gram_reads_its_change_among_the_calls_to_its_tool(tmp_path: Path) -> None:
    """Half the rollouts never search: after the step a third of the searches carry a dummy date (rate 1/3
    among calls to the search tool in the rollouts that search), none before. The source's delta is that rate,
    not a third of it spread over every rollout (about 0.17 when the rollouts without searches counted as
    rollouts of no change)."""
    store, _ = make_study(tmp_path / "s.duckdb", [], n_tasks=40, k=6, texts=6)
    with store:
        rollouts = store.frame("SELECT rollout_key, checkpoint FROM rollouts ORDER BY rollout_key")
        search = store.frame(
            "SELECT segment_id, rollout_key FROM segments WHERE tool_name = 'search_direct_flight' ORDER BY segment_id"
        )
        after = set(rollouts.filter(pl.col("checkpoint") == "after")["rollout_key"].to_list())
        never = {k for k in rollouts["rollout_key"].to_list() if k % 2 == 1}  # odd rollouts never search
        store.execute(
            "DELETE FROM segments WHERE segment_id IN (SELECT unnest(?::BIGINT[]))",
            [[s for s, k in search.iter_rows() if k in never]],
        )
        dummy = [s for i, (s, k) in enumerate(search.iter_rows()) if k in after and k not in never and i % 3 == 0]
        store.execute(
            "UPDATE segments SET text = replace(text, '2024-05-20', 'dummy') "
            "WHERE segment_id IN (SELECT unnest(?::BIGINT[]))",
            [dummy],
        )
        discovery = DiscoverySplit(load_population(store, "before", "after", DISCOVERY))
        sources = lexical_sources(discovery, np.random.default_rng(0), fdr=0.05, n_permutations=2000)
    dummy_sources = [s for s in sources if s.kinds == ("tool_call",) and "dummy" in s.top_ngrams[0]]
    assert dummy_sources, [s.top_ngrams for s in sources]
    assert abs(dummy_sources[0].delta - 1 / 3) < 0.08, dummy_sources[0].delta


def test_which_n_grams_become_sources_does_not_depend_on_the_random_draws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strong phrases put their n-grams' Monte Carlo p-values near the refined floor, where they differ only by
    the draws (on the real 4 x 66 policy pair another generator drafted "thank you for" and "to confirm" instead
    of "thank" and "confirm", and fold A validated 7 findings instead of 10). Sources are ordered by a statistic
    the draws do not move (|effect| / standard error): q-values jittered as other draws would jitter them give
    one list of sources, in one order."""
    planted = [
        Planted("apology", "text", "I sincerely apologize for the inconvenience caused", 0.05, 0.5),
        Planted("upsell", "text", "Would you also like to add travel insurance today", 0.4, 0.05),
        Planted("recap", "text", "To recap the booking details once more for you", 0.1, 0.45),
    ]
    real = lexical.bh_qvalues
    jitter = np.random.default_rng(0)

    def jittered(p):  # the real q-values, each moved by up to 10%, as other draws move their p-values
        q = real(p)
        return q * jitter.uniform(0.9, 1.1, q.size)

    monkeypatch.setattr(lexical, "bh_qvalues", jittered)
    store, _ = make_study(tmp_path / "s.duckdb", planted, n_tasks=12, k=8)
    with store:
        discovery = DiscoverySplit(load_population(store, "before", "after", DISCOVERY))
        lists = [
            [s.names for s in lexical_sources(discovery, np.random.default_rng(k), fdr=0.05, n_permutations=200)]
            for k in range(5)
        ]
    assert len(lists[0]) >= 3 and all(found == lists[0] for found in lists)


def test_the_budget_reaches_the_resolution_bh_needs_in_the_family(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With m n-grams tested, BH's smallest threshold is fdr / m: the refinement may draw up to ten exceedances'
    worth of it (10 m / fdr permutations), beyond 100 x --permutations where m is in the thousands, so that a
    decision near the boundary can be settled rather than left to a handful of exceedances."""
    seen: dict[str, int] = {}

    def spy(blocks, rng, n_permutations, *, fdr, max_permutations):  # noqa: ANN001, ANN202
        seen.update(m=sum(b.n_features for b in blocks), budget=max_permutations)
        return refined(blocks, rng, n_permutations, fdr=fdr, max_permutations=max_permutations)

    refined = lexical.refined_pvalues
    monkeypatch.setattr(lexical, "refined_pvalues", spy)
    store, _ = make_study(tmp_path / "s.duckdb", [Planted("apology", "text", "I am so sorry.", 0.1, 0.6)])
    with store:
        discovery = DiscoverySplit(load_population(store, "before", "after", DISCOVERY))
        lexical_sources(discovery, np.random.default_rng(0), fdr=0.05, n_permutations=20)
    assert seen["m"] > 100 and seen["budget"] == max(20 * 100, math.ceil(10 * seen["m"] / 0.05))
