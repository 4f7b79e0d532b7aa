"""The stream-stability bench: the hypotheses stage re-run under other seeds, on a copy of the store."""

from __future__ import annotations

from pathlib import Path

from factories_hypotheses import Planted, add_features, make_study

from bench.stream_stability import validated_under
from engine.store import Store

APOLOGY = Planted("apology", "text", "I sincerely apologize for the inconvenience.", 0.05, 0.45)


def test_each_seed_reruns_the_stage_on_a_copy_and_finds_the_planted_change(tmp_path: Path) -> None:
    store, truth = make_study(tmp_path / "s.duckdb", [APOLOGY])
    with store:
        add_features(store, truth)
    found = [validated_under(store.path, seed, tmp_path) for seed in (0, 1)]
    assert found[0] == found[1] and any("apologize" in s for s in found[0])
    with Store(store.path) as original:  # the store itself is untouched: no hypotheses stage ran on it
        assert original.scalar("SELECT count(*) FROM hypotheses") == 0
