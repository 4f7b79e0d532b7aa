"""Lexical sources: word n-grams tested on each rollout's own rate, composition-proof for tool calls."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from factories_hypotheses import Planted, make_study

from engine.hypotheses.draft import DiscoverySplit
from engine.hypotheses.lexical import lexical_sources
from engine.hypotheses.population import load_population


def test_a_new_tool_does_not_make_the_other_tools_n_grams_decrease(tmp_path: Path) -> None:
    new_tool = Planted("new_tool", "tool_call", "check_policy_section", 0.0, 0.5)  # beside half the calls after
    store, _ = make_study(tmp_path / "s.duckdb", [new_tool])
    with store:
        discovery = DiscoverySplit(load_population(store, "before", "after", "discovery"))
        sources = lexical_sources(discovery, np.random.default_rng(0), fdr=0.05, n_permutations=2000)
    # every other tool is called exactly as before (as a share of all calls each fell by a third); the new
    # tool's own n-grams are on all of its calls, so its change is the structural tool feature's, not theirs
    assert not [s.top_ngrams for s in sources if s.kinds == ("tool_call",)]
