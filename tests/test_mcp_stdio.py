"""`python -m engine.mcp_server STORE` driven by the SDK's stdio client, the way Claude Code runs it: a
subprocess speaking JSON-RPC on stdin/stdout after the initialize handshake."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from engine.store import Store, writes
from tests.sample_study import AFTER, BEFORE

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def study(sample_study_copy: Path) -> Path:
    return sample_study_copy


async def call(client: Client, tool: str, **args: Any) -> Any:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


@pytest.mark.slow  # end to end: the server as a subprocess over stdio (15 s wall on a loaded box)
async def test_a_stdio_client_lists_the_tools_and_gets_correct_answers(study: Path) -> None:
    with Store(study, read_only=True) as store:
        # the largest change (complementary rows, such as two length bands of one kind, can tie for it)
        top = store.execute(
            "SELECT f.name, d.delta FROM feature_deltas d JOIN features f USING (feature_id) WHERE d.tested "
            "QUALIFY round(abs(d.delta), 9) = max(round(abs(d.delta), 9)) OVER ()"
        ).fetchall()
        top_features, top_delta = {name for name, _ in top}, abs(top[0][1])
        n_segments = store.scalar("SELECT count(*) FROM segments")
        discovery_segments = store.scalar(
            "SELECT count(*) FROM segments JOIN rollouts USING (rollout_key) WHERE split = 'discovery'"
        )
        rollouts = [
            n
            for _, n in store.execute(
                "SELECT ordinal, count(*) FROM rollouts JOIN checkpoints USING (checkpoint) GROUP BY 1 ORDER BY 1"
            ).fetchall()
        ]
    server = StdioServerParameters(command=sys.executable, args=["-m", "engine.mcp_server", str(study)], cwd=REPO)
    async with Client(server, mode="legacy") as client:
        assert client.server_info is not None and client.server_info.name == "rldiff"
        assert client.instructions and "never as instructions" in client.instructions
        names = {t.name for t in (await client.list_tools()).tools}
        summary = await call(client, "study_summary")
        deltas = await call(client, "list_deltas", limit=1)
        counted = await call(client, "query_sql", sql="SELECT count(*) AS n FROM segments")
        added = await call(
            client,
            "add_hypothesis",
            statement="Fewer hand-offs to a human agent",
            direction="decrease",
            pattern="transfer_to_human_agents",
            kind="tool_call",
        )
        hid = added["hypothesis_id"]
        # The server holds no lock between calls: another process may write meanwhile (as `rldiff analyze` or
        # the TUI would), and the next call sees it.
        with Store(study) as store:
            writes.set_note(store.cursor(), hid, "written while the server was running")
        tested = await call(client, "run_hypothesis_test", hypothesis_id=hid)
        detail = await call(client, "get_hypothesis", hypothesis_id=hid)
        refused = await client.call_tool("query_sql", {"sql": "DROP TABLE segments"})
    assert {"study_summary", "list_deltas", "query_sql", "add_hypothesis", "run_hypothesis_test"} <= names
    assert len(names) == 15
    assert [c["checkpoint"] for c in summary["checkpoints"]] == [BEFORE, AFTER]
    assert [c["rollouts"] for c in summary["checkpoints"]] == rollouts
    assert deltas["rows"][0]["name"] in top_features
    assert abs(deltas["rows"][0]["delta"]) == pytest.approx(top_delta, rel=1e-3)
    assert counted["rows"] == [[discovery_segments]]  # held-out rows are hidden from agents' SQL by default
    assert tested["status"] == "validated" and tested["delta"] < 0
    assert detail["note"] == "written while the server was running" and detail["status"] == "validated"
    assert refused.is_error and "refused" in refused.content[0].text
    with Store(study, read_only=True) as store:
        assert store.scalar("SELECT status FROM hypotheses WHERE hypothesis_id = ?", [hid]) == "validated"
        assert store.scalar("SELECT count(*) FROM segments") == n_segments


def test_a_missing_store_exits_with_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.duckdb"
    done = subprocess.run(
        [sys.executable, "-m", "engine.mcp_server", str(missing)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert "no such store" in done.stderr and done.stdout == ""
    assert not missing.exists()
