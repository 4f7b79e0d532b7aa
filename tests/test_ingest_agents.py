"""SWE-agent and mini-swe-agent trajectories, and OpenAI Responses API items: read and detected; and every
format's bad input (these, tau-bench, tau2, OpenAI and Anthropic shapes) rejected with FILE:LINE: field, the
store untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.ingest.formats import detect
from engine.ingest.input_file import InputFile
from engine.store import Store
from tests.test_ingest_errors import snapshot

SWE = {
    "environment": "swe_main",
    "history": [
        {"role": "system", "content": "You are an autonomous programmer."},
        {"role": "user", "content": [{"type": "text", "text": "Fix the off-by-one in range_sum."}]},
    ],
    "trajectory": [
        {"thought": "Find the function first.", "action": "grep -rn range_sum src", "observation": "src/m.py:3"},
        {"thought": "Open it.", "action": "open src/m.py", "observation": "def range_sum(a, b): ..."},
        {"thought": "Done.", "action": "submit", "observation": "diff --git ..."},
    ],
    "info": {
        "exit_status": "submitted",
        "model_stats": {"instance_cost": 0.12, "tokens_sent": 900, "tokens_received": 80},
    },
    "replay_config": json.dumps({"agent": {"model": {"name": "gpt-4o"}}}),
}
MINI = {
    "trajectory_format": "mini-swe-agent-1",
    "instance_id": "django__django-1",
    "info": {
        "exit_status": "LimitsExceeded",
        "model_stats": {"instance_cost": 0.3},
        "config": {"model": {"model_name": "claude-x"}},
    },
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": "THOUGHT: Look around.\n\n```bash\nls -la\n```"},
        {"role": "user", "content": "<returncode>0</returncode><output>setup.py</output>"},
        {"role": "assistant", "content": "I am stuck."},
    ],
}
RESPONSES = {
    "rollout_id": "r1",
    "task_id": "t1",
    "reward": 1,
    "input": "What is the weather in Paris?",
    "output": [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Call the weather tool."}]},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "18C, sunny"},
        {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA..."},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "18C and sunny."}]},
    ],
}


TAU_BENCH = {"task_id": 1, "trial": 0, "reward": 1.0, "info": {}, "traj": [{"role": "assistant", "content": "Hi"}]}
TAU2 = {
    "id": "s1",
    "task_id": "17",
    "reward_info": {"reward": 1.0},
    "messages": [{"role": "assistant", "content": "Hi"}],
}


def ingest(tmp_path: Path, name: str, text: str) -> Store:
    path = tmp_path / name
    path.write_text(text)
    assert main(["ingest", str(tmp_path / "s.duckdb"), str(path), "--checkpoint", "c"]) == 0
    return Store(tmp_path / "s.duckdb", read_only=True)


def segments(store: Store) -> list[tuple]:
    return store.execute("SELECT kind, text FROM segments ORDER BY segment_id").fetchall()


def test_swe_agent_trajectory(tmp_path: Path) -> None:
    (tmp_path / "astropy__astropy-12907.traj").write_text(json.dumps(SWE, indent=2))
    assert detect(InputFile(tmp_path / "astropy__astropy-12907.traj")) == "swe-agent"
    with ingest(tmp_path, "astropy__astropy-12907.traj", json.dumps(SWE, indent=2)) as store:
        assert segments(store)[:3] == [
            ("reasoning", "Find the function first."),
            ("tool_call", 'grep {"command":"grep -rn range_sum src"}'),
            ("reasoning", "Open it."),
        ]
        row = store.execute(
            "SELECT task_id, termination_reason, timed_out, tokens, cost_usd, model FROM rollouts"
        ).fetchone()
        assert row == ("astropy__astropy-12907", "submitted", False, 980, 0.12, "gpt-4o")
        first = store.execute("SELECT content FROM messages WHERE message_index = 0").fetchone()[0]
        assert first == "Fix the off-by-one in range_sum."


def test_mini_swe_agent_trajectory(tmp_path: Path) -> None:
    with ingest(tmp_path, "x.traj.json", json.dumps(MINI, indent=1)) as store:
        assert segments(store) == [
            ("reasoning", "Look around."),
            ("tool_call", 'bash {"command":"ls -la"}'),
            ("reasoning", "I am stuck."),
        ]
        assert store.execute("SELECT role FROM messages WHERE message_index = 3").fetchone() == ("tool",)
        row = store.execute("SELECT task_id, termination_reason, timed_out, model FROM rollouts").fetchone()
        assert row == ("django__django-1", "LimitsExceeded", True, "claude-x")


def test_responses_items(tmp_path: Path) -> None:
    (tmp_path / "probe.jsonl").write_text(json.dumps(RESPONSES) + "\n")
    assert detect(InputFile(tmp_path / "probe.jsonl")) == "openai-responses"
    with ingest(tmp_path, "r.jsonl", json.dumps(RESPONSES) + "\n") as store:
        assert segments(store) == [
            ("reasoning", "Call the weather tool."),
            ("tool_call", 'weather {"city":"Paris"}'),
            ("reasoning", "[redacted thinking]"),
            ("text", "18C and sunny."),
        ]
        roles = [r[0] for r in store.execute("SELECT role FROM messages ORDER BY message_index").fetchall()]
        assert roles == ["user", "assistant", "tool", "assistant"]


def broken(record: dict, **changes: object) -> dict:
    return {**record, **changes}


BAD = [
    (
        "swe: action not a string",
        "a.traj",
        json.dumps(broken(SWE, trajectory=[{"thought": "t", "action": 3}]), indent=2),
        "19: trajectory[0].action: expected a string",
    ),
    (
        "swe: second step missing its action",
        "a.traj",
        json.dumps(broken(SWE, trajectory=[SWE["trajectory"][0], {"thought": "x"}]), indent=2),
        "24: trajectory[1].action: missing",
    ),
    ("swe: malformed json", "a.traj", '{"trajectory": [\n{"action": "ls"},\n', "3: json: Expecting value (column 1)"),
    (
        "mini: unknown role",
        "m.traj.json",
        json.dumps(broken(MINI, messages=[{"role": "robot", "content": "x"}, *MINI["messages"]])),
        "1: messages[0].role: unknown role 'robot' (expected one of system, user, assistant, tool)",
    ),
    (
        "responses: unknown item type",
        "r.jsonl",
        json.dumps(RESPONSES)
        + "\n"
        + json.dumps(broken(RESPONSES, rollout_id="r2", output=[{"type": "image_gen"}]))
        + "\n",
        "2: output[0].type: unknown item type 'image_gen' (expected one of message, reasoning, function_call, "
        "function_call_output)",
    ),
    (
        "responses: call without a name",
        "r.jsonl",
        json.dumps(broken(RESPONSES, output=[{"type": "function_call", "call_id": "c", "arguments": "{}"}])) + "\n",
        "1: messages[1].tool_calls[0].name: missing",
    ),
    (
        "responses: output not a list",
        "r.jsonl",
        json.dumps(broken(RESPONSES, output={"type": "message"})) + "\n",
        "1: output: expected a list of items, got dict",
    ),
    (
        "tau-bench: traj not a list",
        "tb.json",
        f"[\n{json.dumps(TAU_BENCH)},\n{json.dumps(broken(TAU_BENCH, task_id=2, traj='x'))}\n]",
        "3: messages: expected a list, got str",
    ),
    (
        "tau2: simulation not an object",
        "t2.json",
        f'{{"info": {{}},\n "simulations": [\n{json.dumps(TAU2)},\n5]}}',
        "4: simulation: expected a JSON object, got int",
    ),
    (
        "tau2: reward not a number",
        "t2.json",
        f'{{"simulations": [\n{json.dumps(broken(TAU2, reward_info={"reward": "high"}))}]}}',
        '2: reward: expected a number, got "high"',
    ),
    (
        "anthropic: unknown block",
        "a.jsonl",
        json.dumps(
            {"rollout_id": "a", "task_id": "t", "messages": [{"role": "assistant", "content": [{"type": "video"}]}]}
        ),
        "1: messages[0].content[0].type: unknown content block type 'video'",
    ),
    (
        "openai: anthropic shapes",
        "o.jsonl",
        json.dumps(
            {
                "rollout_id": "a",
                "task_id": "t",
                "messages": [{"role": "assistant", "content": [{"type": "text", "text": "x"}]}],
            }
        ),
        "1: messages: anthropic message shapes in a file read as --format openai",
    ),
]


@pytest.mark.parametrize(("case", "name", "content", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_input(
    case: str, name: str, content: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "s.duckdb"
    good = tmp_path / "good.jsonl"
    good.write_text(
        json.dumps({"rollout_id": "g", "task_id": "t", "messages": [{"role": "assistant", "content": "a"}]})
    )
    assert main(["ingest", str(store_path), str(good), "--checkpoint", "c"]) == 0
    before = snapshot(store_path)
    bad = tmp_path / name
    bad.write_text(content)
    named = {"swe: malformed json": "swe-agent", "responses: output not a list": "openai-responses"}
    fmt = ["--format", named.get(case, "openai")] if case in named or case.startswith("openai") else []
    capsys.readouterr()
    assert main(["ingest", str(store_path), str(bad), "--checkpoint", "c", *fmt]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"rldiff: {bad}:{message}"
    assert snapshot(store_path) == before
