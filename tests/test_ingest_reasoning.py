"""Reasoning from every format lands in the reasoning field and segments, never as text or nowhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.ingest import ingest_file
from engine.ingest.reasoning import REDACTED
from engine.store import Store

GROK = (
    "tau2-grok3mini-reasoning/2025-10-06T06-22-46.727114_airline_llm_agent_grok-3-mini_user_simulator_grok-3-mini.json"
)


def test_grok_sample_ingests_its_reasoning(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = shared_data / GROK
    raw = json.loads(path.read_text())
    assistant = [m for s in raw["simulations"] for m in s["messages"] if m["role"] == "assistant"]
    with_reasoning = [m for m in assistant if ((m.get("raw_data") or {}).get("message") or {}).get("reasoning_content")]
    assert (len(assistant), len(with_reasoning)) == (35, 25)
    store_path = tmp_path / "s.duckdb"
    assert main(["ingest", str(store_path), str(path), "--checkpoint", "grok"]) == 0
    assert "reasoning on 25 of 35 assistant turns" in capsys.readouterr().err
    with Store(store_path, read_only=True) as store:
        texts = [
            r[0]
            for r in store.execute("SELECT text FROM segments WHERE kind = 'reasoning' ORDER BY segment_id").fetchall()
        ]
        assert texts == [m["raw_data"]["message"]["reasoning_content"].strip() for m in with_reasoning]
        assert store.scalar("SELECT count(DISTINCT origin) FROM segments WHERE kind = 'reasoning'") == 1
        strata = store.execute("SELECT DISTINCT termination_reason, timed_out, model FROM rollouts").fetchall()
        assert strata == [("user_stop", False, "xai/grok-3-mini")]
        assert store.scalar("SELECT count(*) FROM rollouts WHERE tokens > 0 AND cost_usd > 0") == 10


def ingest_messages(tmp_path: Path, messages: list[dict]) -> Store:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"rollout_id": "r", "task_id": "t", "messages": messages}) + "\n")
    store = Store(tmp_path / "s.duckdb")
    ingest_file(store, path, "c")
    return store


def segments(store: Store) -> list[tuple[str, str]]:
    return store.execute("SELECT kind, text FROM segments ORDER BY segment_id").fetchall()


CASES = [
    (
        "think tag",
        {"content": "<think>\nCheck the order first.\n</think>\n\nYour order shipped."},
        [("reasoning", "Check the order first."), ("text", "Your order shipped.")],
    ),
    ("thinking tag", {"content": "  <thinking>plan</thinking>Done."}, [("reasoning", "plan"), ("text", "Done.")]),
    (
        "tag later in the text stays text",
        {"content": "Use <think>x</think> tags."},
        [("text", "Use <think>x</think> tags.")],
    ),
    (
        "openai reasoning_content",
        {"content": "Hi.", "reasoning_content": "greet"},
        [("reasoning", "greet"), ("text", "Hi.")],
    ),
    (
        "litellm thinking_blocks",
        {"content": "Hi.", "thinking_blocks": [{"type": "thinking", "thinking": "hmm"}]},
        [("reasoning", "hmm"), ("text", "Hi.")],
    ),
    (
        "raw_data choice",
        {"content": "Hi.", "raw_data": {"message": {"content": "Hi.", "reasoning_content": "r1"}}},
        [("reasoning", "r1"), ("text", "Hi.")],
    ),
    (
        "raw_data completion",
        {"content": "Hi.", "raw_data": {"choices": [{"message": {"reasoning": "r2"}}]}},
        [("reasoning", "r2"), ("text", "Hi.")],
    ),
    (
        "raw_data gemini thinking_blocks",
        {"content": "Hi.", "raw_data": {"message": {"thinking_blocks": [{"type": "thinking", "thinking": "g"}]}}},
        [("reasoning", "g"), ("text", "Hi.")],
    ),
    (
        "anthropic redacted thinking",
        {"content": [{"type": "redacted_thinking", "data": "EncRypTed"}, {"type": "text", "text": "Sure."}]},
        [("reasoning", REDACTED), ("text", "Sure.")],
    ),
    (
        "anthropic thinking",
        {"content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "ok"}]},
        [("reasoning", "t"), ("text", "ok")],
    ),
]


@pytest.mark.parametrize(("case", "message", "expected"), CASES, ids=[c[0] for c in CASES])
def test_reasoning_shapes(case: str, message: dict, expected: list, tmp_path: Path) -> None:
    with ingest_messages(tmp_path, [{"role": "user", "content": "q"}, {"role": "assistant", **message}]) as store:
        assert segments(store) == expected


def test_user_reasoning_in_raw_data_is_not_the_models(tmp_path: Path) -> None:
    user = {"role": "user", "content": "q", "raw_data": {"message": {"reasoning_content": "simulated user"}}}
    with ingest_messages(tmp_path, [user, {"role": "assistant", "content": "a"}]) as store:
        assert segments(store) == [("text", "a")]


def test_a_format_without_reasoning_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plain.jsonl"
    path.write_text(
        json.dumps({"rollout_id": "r", "task_id": "t", "messages": [{"role": "assistant", "content": "a"}]})
    )
    assert main(["ingest", str(tmp_path / "s.duckdb"), str(path), "--checkpoint", "c"]) == 0
    assert "reasoning on 0 of 1 assistant turns (none found" in capsys.readouterr().err


def test_canonical_strata_keys(tmp_path: Path) -> None:
    record = {
        "rollout_id": "r",
        "task_id": "t",
        "messages": [{"role": "assistant", "content": "a"}],
        "termination_reason": "max_turns",
        "timed_out": True,
        "tokens": 1200,
        "cost_usd": 0.02,
        "model": "qwen3-8b",
        "error": {"type": "Timeout"},
    }
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(record) + "\n" + json.dumps({**record, "rollout_id": "r2", "error": False}) + "\n")
    with Store(tmp_path / "s.duckdb") as store:
        ingest_file(store, path, "c")
        rows = store.execute(
            "SELECT termination_reason, error, timed_out, tokens, cost_usd, model FROM rollouts ORDER BY rollout_id"
        ).fetchall()
    assert rows == [
        ("max_turns", '{"type": "Timeout"}', True, 1200, 0.02, "qwen3-8b"),
        ("max_turns", None, True, 1200, 0.02, "qwen3-8b"),
    ]


def test_bad_strata_name_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "in.jsonl"
    good = {"rollout_id": "r", "task_id": "t", "messages": [{"role": "assistant", "content": "a"}]}
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "rollout_id": "r2", "timed_out": "yes"}) + "\n")
    assert main(["ingest", str(tmp_path / "s.duckdb"), str(path), "--checkpoint", "c"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f'rldiff: {path}:2: timed_out: expected true or false, got "yes"'


def test_a_version_1_store_is_migrated_to_the_current_schema(tmp_path: Path) -> None:
    from engine.ingest.records import STRATA
    from engine.store.store import SCHEMA_VERSION

    path = tmp_path / "old.duckdb"
    with Store(path) as store:  # made new, then turned back into what schema version 1 wrote
        for column in STRATA:
            store.execute(f"ALTER TABLE rollouts DROP COLUMN {column}")
        for column in ("family", "pooled_before", "pooled_after", "min_p"):  # added by version 3
            store.execute(f"ALTER TABLE feature_deltas DROP COLUMN {column}")
        store.execute("DROP TABLE heldout_tests")
        store.execute("DROP TABLE sentences")  # added by version 4
        store.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    with Store(path) as store:
        columns = {r[0] for r in store.execute("SELECT column_name FROM (DESCRIBE rollouts)").fetchall()}
        assert set(STRATA) <= columns
        deltas = {r[0] for r in store.execute("SELECT column_name FROM (DESCRIBE feature_deltas)").fetchall()}
        assert {"family", "pooled_before", "pooled_after", "min_p"} <= deltas
        assert store.scalar("SELECT count(*) FROM heldout_tests") == 0
        assert store.scalar("SELECT count(*) FROM sentences") == 0
        assert store.scalar("SELECT value FROM meta WHERE key = 'schema_version'") == str(SCHEMA_VERSION)
