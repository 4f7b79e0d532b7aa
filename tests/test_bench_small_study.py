"""The small-study bench's planted hand-offs: exact counts, real messages untouched, a file rldiff ingests."""

from __future__ import annotations

import json
from pathlib import Path

from bench.small_study import PAIR, hands_off, planted_file, real_summaries
from engine.ingest import ingest_file
from engine.store import Store


def test_hand_offs_are_planted_up_to_the_target_and_ingest(shared_data: Path, tmp_path: Path):
    folder = shared_data / "tau2-grok3-policy"
    source = folder / PAIR[0]
    original = json.loads(source.read_text())["simulations"]
    out = planted_file(source, 13, 0, real_summaries(folder), tmp_path / "before.json")
    planted = json.loads(out.read_text())["simulations"]
    assert sum(hands_off(s) for s in original) == 5 and sum(hands_off(s) for s in planted) == 13
    for old, new in zip(original, planted, strict=True):
        assert new["messages"][: len(old["messages"])] == old["messages"]  # only appended to
        assert len(new["messages"]) - len(old["messages"]) in (0, 4)
    with Store(tmp_path / "s.duckdb") as store:
        ingest_file(store, out, "before")
        calls = store.scalar(
            "SELECT count(*) FROM segments WHERE kind = 'tool_call' AND text LIKE '%transfer_to_human%'"
        )
    assert calls >= 13
