"""Each adapter on the real public files: counts agree with the source; the canonical form round-trips."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from engine.ingest import ingest_file
from engine.ingest.formats import detect, parse
from engine.ingest.input_file import InputFile
from engine.ingest.records import Rollout
from engine.store import Store


def source_counts(trajectories: list[list[dict]]) -> tuple[int, int, int, int]:
    """(messages, text segments, tool calls, think calls) counted straight from the source messages."""
    messages = texts = calls = thinks = 0
    for traj in trajectories:
        messages += len(traj)
        for m in traj:
            if m["role"] != "assistant":
                continue
            texts += bool((m.get("content") or "").strip())
            for c in m.get("tool_calls") or []:
                calls += 1
                thinks += (c.get("function") or c)["name"] == "think"
    return messages, texts, calls, thinks


def table_counts(store: Store) -> dict[str, int]:
    return dict(store.execute("SELECT kind, count(*) FROM segments GROUP BY kind").fetchall())


def test_tau_bench_counts_match_source(store: Store, shared_data: Path) -> None:
    path = shared_data / "tau-bench/gpt-4o-airline.json"
    raw = json.loads(path.read_text())
    assert detect(InputFile(path)) == "tau-bench"
    result = ingest_file(store, path, "gpt-4o")
    messages, texts, calls, thinks = source_counts([r["traj"] for r in raw])
    assert result.rollouts == len(raw) == 200
    assert store.scalar("SELECT count(*) FROM messages") == messages
    counts = table_counts(store)
    assert counts["text"] == texts
    assert counts["tool_call"] == calls
    # the think tool's thought is stored a second time, as reasoning (origin 'think_tool')
    assert counts["reasoning"] == thinks == store.scalar("SELECT count(*) FROM segments WHERE origin = 'think_tool'")
    assert store.scalar("SELECT count(DISTINCT task_id) FROM rollouts") == 50
    assert store.scalar("SELECT sum(reward) FROM rollouts") == sum(r["reward"] for r in raw)


def test_tau_bench_lines_are_physical(store: Store, tmp_path: Path, shared_data: Path) -> None:
    """A pretty-printed list: each rollout's source_line is where its record starts."""
    raw = json.loads((shared_data / "tau-bench/gpt-4o-airline.json").read_text())[:3]
    path = tmp_path / "pretty.json"
    text = json.dumps(raw, indent=2)
    path.write_text(text)
    ingest_file(store, path, "x")
    lines = [r[0] for r in store.execute("SELECT source_line FROM rollouts ORDER BY rollout_key").fetchall()]
    physical = text.split("\n")
    assert [physical[n - 1].strip() for n in lines] == ["{"] * 3
    assert lines[0] == 2


def test_tau2_counts_match_source(store: Store, shared_data: Path) -> None:
    paths = sorted(p for p in (shared_data / "tau2-grok3-policy").glob("*.json") if p.name != "MANIFEST.json")
    sims = []
    for path in paths:
        assert detect(InputFile(path)) == "tau2"
        sims.extend(json.loads(path.read_text())["simulations"])
        ingest_file(store, path, "grok-3")
    messages, texts, calls, _ = source_counts([s["messages"] for s in sims])
    assert store.scalar("SELECT count(*) FROM rollouts") == len(sims) == 132
    assert store.scalar("SELECT count(*) FROM messages") == messages
    counts = table_counts(store)
    assert (counts["text"], counts["tool_call"]) == (texts, calls)
    # rollouts are keyed by the simulation id, since trial numbers repeat across files
    assert store.scalar("SELECT count(DISTINCT rollout_id) FROM rollouts") == 132
    errors = sum(bool(m.get("error")) for s in sims for m in s["messages"] if m["role"] == "tool")
    assert store.scalar("SELECT count(*) FROM messages WHERE is_error") == errors


def test_canonical_round_trip(tmp_path: Path, shared_data: Path) -> None:
    """tau-bench -> canonical JSONL -> ingest stores exactly the same messages and segments."""
    path = shared_data / "tau-bench/gpt-4o-airline.json"
    canonical = tmp_path / "canonical.jsonl.gz"
    rollouts = [r for r in parse(InputFile(path), "tau-bench") if isinstance(r, Rollout)]
    with gzip.open(canonical, "wt") as out:
        out.writelines(json.dumps(r.to_json()) + "\n" for r in rollouts)
    query = (
        "SELECT r.rollout_id, s.message_index, s.part_index, s.kind, s.text, s.tool_name, s.tool_args "
        "FROM segments s JOIN rollouts r USING (rollout_key) ORDER BY ALL"
    )
    messages = "SELECT role, content, tool_calls, tool_call_id FROM messages ORDER BY rollout_key, message_index"
    with Store(tmp_path / "a.duckdb") as a, Store(tmp_path / "b.duckdb") as b:
        assert ingest_file(a, path, "x").format == "tau-bench"
        assert ingest_file(b, canonical, "x").format == "jsonl"
        assert a.execute(query).fetchall() == b.execute(query).fetchall()
        assert a.execute(messages).fetchall() == b.execute(messages).fetchall()


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_openai_messages(store: Store, tmp_path: Path) -> None:
    record = {
        "rollout_id": "r1",
        "task_id": "t1",
        "reward": 1,
        "messages": [
            {"role": "user", "content": "find order A1"},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "I should look it up.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_order", "arguments": '{"order_id": "A1"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "Error: not found"},
            {"role": "assistant", "content": "It was not found."},
        ],
    }
    path = write_jsonl(tmp_path / "openai.jsonl", [record])
    result = ingest_file(store, path, "x")
    assert result.format == "openai"
    rows = store.execute("SELECT kind, text, tool_name, tool_args, args_valid FROM segments ORDER BY segment_id")
    assert rows.fetchall() == [
        ("reasoning", "I should look it up.", None, None, None),
        ("tool_call", 'get_order {"order_id":"A1"}', "get_order", '{"order_id":"A1"}', True),
        ("text", "It was not found.", None, None, None),
    ]
    assert store.scalar("SELECT is_error FROM messages WHERE role = 'tool'") is True


def test_anthropic_content_blocks(store: Store, tmp_path: Path) -> None:
    record = {
        "rollout_id": "r1",
        "task_id": "t1",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "cancel booking B7"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "The user wants a cancellation."},
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "tu1", "name": "get_booking", "input": {"id": "B7"}},
                    {"type": "tool_use", "id": "tu2", "name": "get_user", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "tu1",
                        "is_error": True,
                        "content": [{"type": "text", "text": "no such booking"}],
                    }
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "I could not find it."}]},
        ],
    }
    result = ingest_file(store, write_jsonl(tmp_path / "anthropic.jsonl", [record]), "x")
    assert result.format == "anthropic"
    kinds = store.execute("SELECT message_index, part_index, kind FROM segments ORDER BY segment_id").fetchall()
    assert kinds == [
        (1, 0, "reasoning"),
        (1, 0, "text"),
        (1, 0, "tool_call"),
        (1, 1, "tool_call"),
        (3, 0, "text"),
    ]
    tool = store.execute("SELECT role, tool_call_id, is_error, content FROM messages WHERE message_index = 2")
    assert tool.fetchall() == [("tool", "tu1", True, "no such booking")]


def test_invalid_arguments_kept_raw_with_warning(store: Store, tmp_path: Path) -> None:
    record = {
        "rollout_id": "r1",
        "task_id": "t1",
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}],
            }
        ],
    }
    result = ingest_file(store, write_jsonl(tmp_path / "raw.jsonl", [record]), "x")
    assert store.execute("SELECT tool_args, args_valid FROM segments").fetchall() == [("{oops", False)]
    assert len(result.warnings) == 1
    assert result.warnings[0].startswith(f"{tmp_path / 'raw.jsonl'}:1: messages[0].tool_calls[0].arguments: ")


def test_reingest_is_a_noop(store: Store, tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "a.jsonl",
        [{"rollout_id": "r", "task_id": "t", "messages": [{"role": "assistant", "content": "hi"}]}],
    )
    assert ingest_file(store, path, "x").rollouts == 1
    again = ingest_file(store, path, "x")
    assert again.already_ingested and again.rollouts == 0
    assert store.scalar("SELECT count(*) FROM rollouts") == 1
    # the same file into another checkpoint is new data
    assert ingest_file(store, path, "y").rollouts == 1


@pytest.mark.parametrize("name", ["standard", "tighter"])
def test_sample_pair_is_canonical(name: str, store: Store) -> None:
    path = Path(__file__).resolve().parents[1] / f"sample_data/tau2-grok3/{name}.jsonl.gz"
    assert ingest_file(store, path, name).rollouts == 66
