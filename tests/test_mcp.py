"""The MCP server driven through the SDK's in-process client: every tool, its answers checked against the
store, bad arguments, the write tools' effects, that read tools never write, and a locked store.

Over 400 lines: one in-process server over the analysed sample study for all fourteen tools (the SQL tool and
the stdio transport have files of their own)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp import Client

from engine.hypotheses.reasons import tally, why
from engine.kinds import DISCOVERY, HELDOUT, SPLITS
from engine.mcp.results import clip, to_json
from engine.mcp_server import build_server
from engine.store import Store
from tests.hostile import HOSTILE, plant_hostile
from tests.restated import restate_a_finding
from tests.sample_study import AFTER, BEFORE

READ_TOOLS = {
    "study_summary",
    "exploratory_ranking",
    "list_deltas",
    "get_feature",
    "list_clusters",
    "get_cluster",
    "list_hypotheses",
    "get_hypothesis",
    "list_rollouts",
    "read_rollout",
    "read_segment",
    "query_sql",
}
WRITE_TOOLS = {"add_hypothesis", "run_hypothesis_test", "record_decision"}


@pytest.fixture
def study(sample_study_copy: Path) -> Path:
    """A fresh copy of the analysed demo pair for one test (write tools change it)."""
    return sample_study_copy


def sql(path: Path, query: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with Store(path, read_only=True) as store:
        return store.execute(query, params).fetchall()


async def call(client: Client, tool: str, **args: Any) -> Any:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def error(client: Client, tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, result.content[0].text
    return result.content[0].text


async def test_lists_every_tool_with_a_strict_schema_and_honest_annotations(study: Path) -> None:
    async with Client(build_server(study)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == READ_TOOLS | WRITE_TOOLS
    for name, tool in tools.items():
        assert tool.description and len(tool.description) > 40, name
        assert tool.input_schema["type"] == "object" and tool.input_schema["additionalProperties"] is False, name
        assert tool.annotations.read_only_hint is (name in READ_TOOLS), name
    for name in WRITE_TOOLS:
        assert tools[name].description.startswith("WRITES:"), name
        assert tools[name].annotations.destructive_hint is False
    assert set(tools["list_deltas"].input_schema["properties"]) >= {"kind", "direction", "source", "max_q", "search"}
    assert tools["add_hypothesis"].input_schema["required"] == ["statement", "direction"]


async def test_study_summary_matches_the_store(study: Path) -> None:
    async with Client(build_server(study)) as client:
        summary = await call(client, "study_summary")
    assert (summary["before"], summary["after"]) == (BEFORE, AFTER)
    assert summary["shared_tasks"] == 4
    for c in summary["checkpoints"]:
        rollouts, tasks, mean = sql(
            study,
            "SELECT count(*), count(DISTINCT task_id), avg(reward) FROM rollouts WHERE checkpoint = ?",
            [c["checkpoint"]],
        )[0]
        assert (c["rollouts"], c["tasks"]) == (rollouts, tasks)
        assert c["reward"]["mean"] == pytest.approx(mean, rel=1e-3)
        assert c["reward"]["ci_low"] < c["reward"]["mean"] < c["reward"]["ci_high"]
        by_kind = dict(
            sql(
                study,
                "SELECT s.kind, count(*) FROM segments s JOIN rollouts r USING (rollout_key) "
                "WHERE r.checkpoint = ? GROUP BY ALL",
                [c["checkpoint"]],
            )
        )
        assert {k: n for k, n in c["segments"].items() if n} == by_kind
    assert summary["rollouts_by_split"] == dict(sql(study, "SELECT split, count(*) FROM rollouts GROUP BY ALL"))
    assert summary["features"] == sql(study, "SELECT count(*) FROM features")[0][0]
    tested, significant = sql(
        study, "SELECT count(*) FILTER (WHERE tested), count(*) FILTER (WHERE q_value <= 0.05) FROM feature_deltas"
    )[0]
    assert (summary["deltas_tested"], summary["deltas_significant"]) == (tested, significant)
    families = summary["deltas_by_family"]
    per_family = sql(study, "SELECT family, count(*) FROM feature_deltas WHERE tested GROUP BY ALL")
    assert families["tested_by_family"] == dict(per_family) and sum(families["tested_by_family"].values()) == tested
    assert families["length_ratio"] > 0 and families["segments_per_rollout_after"] > 0
    assert summary["clusters"] == sql(study, "SELECT count(*) FROM clusters")[0][0] > 0
    assert summary["hypotheses_by_status"] == dict(sql(study, "SELECT status, count(*) FROM hypotheses GROUP BY 1"))
    statuses = sql(study, "SELECT status, reason FROM hypotheses")
    assert statuses and summary["hypotheses_tally"] == tally(SimpleNamespace(status=s, reason=r) for s, r in statuses)
    assert [s["stage"] for s in summary["stages"]] == ["split", "features", "deltas", "clusters"]


async def test_exploratory_ranking_of_a_small_study_is_logged_held_out_evidence(study: Path) -> None:
    """The demo pair shares 4 tasks: study_summary says it is small and where the whole-study ranking is; the
    tool returns the deltas stage's rows with labels and the ordering rule, and logs a held-out view (the ranking
    includes held-out rollouts). Split by task, there is no ranking: a clear error, nothing logged."""
    stored = json.loads(sql(study, "SELECT metrics FROM runs WHERE stage = 'deltas'")[0][0])["exploratory"]
    async with Client(build_server(study)) as client:
        summary = await call(client, "study_summary")
        assert summary["small_study"].startswith("Small study: only 4 tasks")
        assert "the exploratory_ranking tool shows it" in summary["exploratory_ranking"]
        assert sql(study, "SELECT count(*) FROM heldout_views")[0][0] == 0
        ranking = await call(client, "exploratory_ranking", limit=5)
    assert [r["feature_id"] for r in ranking["rows"]] == [r["feature_id"] for r in stored[:5]]
    assert all(r["status"] == "exploratory" and r["label"] for r in ranking["rows"])
    assert "families take turns" in ranking["rule"]
    assert sql(study, "SELECT via FROM heldout_views") == [("mcp",)]
    with Store(study) as store:
        store.execute("UPDATE meta SET value = 'task' WHERE key = 'split_mode'")
    async with Client(build_server(study)) as client:
        assert (await call(client, "study_summary"))["exploratory_ranking"] is None
        assert "no exploratory ranking" in await error(client, "exploratory_ranking")
    assert sql(study, "SELECT count(*) FROM heldout_views")[0][0] == 1


async def test_list_deltas_filters_sorts_and_pages(study: Path) -> None:
    async with Client(build_server(study)) as client:
        everything = await call(client, "list_deltas", limit=200)
        decreases = await call(client, "list_deltas", direction="decrease", limit=200)
        text = await call(client, "list_deltas", kind="text", limit=200)
        strong = await call(client, "list_deltas", max_q=0.05)
        found = await call(client, "list_deltas", search="TRANSFER")
        with_untested = await call(client, "list_deltas", include_untested=True, limit=200)
        by_q = await call(client, "list_deltas", sort="q", limit=200)
        first = await call(client, "list_deltas", limit=3)
        second = await call(client, "list_deltas", limit=3, offset=first["next_offset"])
    n_tested, n_all = sql(study, "SELECT count(*) FILTER (WHERE tested), count(*) FROM feature_deltas")[0]
    assert everything["total"] == len(everything["rows"]) == n_tested
    assert with_untested["total"] == n_all
    top = sql(study, "SELECT feature_id FROM feature_deltas WHERE tested ORDER BY abs(delta) DESC LIMIT 1")[0][0]
    assert everything["rows"][0]["feature_id"] == top
    assert [abs(r["delta"]) for r in everything["rows"]] == sorted(
        (abs(r["delta"]) for r in everything["rows"]), reverse=True
    )
    assert decreases["rows"] and all(r["delta"] < 0 for r in decreases["rows"])
    assert text["rows"] and {r["kind"] for r in text["rows"]} == {"text"}
    assert strong["rows"] and all(r["q_value"] <= 0.05 for r in strong["rows"])
    transfer = sql(
        study,
        "SELECT f.name FROM feature_deltas d JOIN features f USING (feature_id) LEFT JOIN feature_kind_labels kl "
        "ON kl.feature_id = d.feature_id AND kl.kind = d.kind WHERE d.tested "
        "AND (f.name ILIKE '%transfer%' OR coalesce(kl.label, f.label) ILIKE '%transfer%')",
    )
    assert "tool:transfer_to_human_agents" in {r["name"] for r in found["rows"]} == {n for (n,) in transfer}
    assert [r["q_value"] for r in by_q["rows"]] == sorted(r["q_value"] for r in by_q["rows"])
    assert first["next_offset"] == 3 and second["offset"] == 3
    assert [r["feature_id"] for r in first["rows"] + second["rows"]] == [
        r["feature_id"] for r in everything["rows"][:6]
    ]


async def test_get_feature_gives_deltas_tasks_clusters_and_examples(study: Path) -> None:
    fid = sql(study, "SELECT feature_id FROM features WHERE name = 'tool:transfer_to_human_agents'")[0][0]
    async with Client(build_server(study)) as client:
        feature = await call(client, "get_feature", feature_id=fid, examples_per_checkpoint=2)
        bare = await call(client, "get_feature", feature_id=fid, examples_per_checkpoint=0, include_tasks=False)
        missing = await error(client, "get_feature", feature_id=10_000)
    stored = sql(
        study,
        "SELECT kind, prevalence_before, prevalence_after, q_value FROM feature_deltas WHERE feature_id = ?",
        [fid],
    )
    assert {d["kind"] for d in feature["deltas"]} == {kind for kind, *_ in stored}
    for delta in feature["deltas"]:
        [(before, after, q)] = [row[1:] for row in stored if row[0] == delta["kind"]]
        assert delta["prevalence_before"] == pytest.approx(before, rel=1e-3)
        assert delta["prevalence_after"] == pytest.approx(after, rel=1e-3)
        assert delta["q_value"] == (None if q is None else pytest.approx(q, rel=1e-3))
    tasks = {r[0] for r in sql(study, "SELECT DISTINCT task_id FROM feature_task_deltas WHERE feature_id = ?", [fid])}
    assert tasks and {t["task_id"] for t in feature["task_deltas"]} == tasks
    clusters = sql(
        study,
        "SELECT cluster_id, label FROM cluster_members JOIN clusters USING (cluster_id) WHERE feature_id = ?",
        [fid],
    )
    assert sorted((c["cluster_id"], c["label"]) for c in feature["clusters"]) == sorted(clusters)
    checkpoints = [e["checkpoint"] for e in feature["examples"]]
    assert BEFORE in checkpoints and AFTER in checkpoints and checkpoints == sorted(checkpoints)  # before first
    assert len(checkpoints) <= 4
    for e in feature["examples"]:
        tool, checkpoint = sql(
            study,
            "SELECT s.tool_name, r.checkpoint FROM segments s JOIN rollouts r "
            "USING (rollout_key) WHERE s.segment_id = ?",
            [e["segment_id"]],
        )[0]
        assert tool == "transfer_to_human_agents" and checkpoint == e["checkpoint"]
        assert e["text"].startswith("transfer_to_human_agents")
    assert bare["examples"] == [] and bare["task_deltas"] is None
    assert "no feature with id 10000" in missing


async def test_get_feature_gives_as_many_examples_as_asked(study: Path) -> None:
    """Example ranks start at 1 (the features stage numbers them so); asking for n gives n a checkpoint."""
    fid = sql(study, "SELECT feature_id FROM features WHERE name = 'tool:transfer_to_human_agents'")[0][0]
    async with Client(build_server(study)) as client:
        feature = await call(client, "get_feature", feature_id=fid, examples_per_checkpoint=2)
    stored = dict(
        sql(study, "SELECT checkpoint, count(*) FROM feature_examples WHERE feature_id = ? GROUP BY 1", [fid])
    )
    expected = [c for c in (BEFORE, AFTER) for _ in range(min(2, stored.get(c, 0)))]
    assert [e["checkpoint"] for e in feature["examples"]] == expected


async def test_clusters_and_their_members(study: Path) -> None:
    async with Client(build_server(study)) as client:
        clusters = await call(client, "list_clusters")
        cluster = await call(client, "get_cluster", cluster_id=1)
        missing = await error(client, "get_cluster", cluster_id=10_000)
    stored = sql(study, "SELECT cluster_id, label FROM clusters")
    assert clusters["total"] == len(stored) > 1
    assert sorted((c["cluster_id"], c["label"]) for c in clusters["rows"]) == sorted(stored)
    members = {r[0] for r in sql(study, "SELECT feature_id FROM cluster_members WHERE cluster_id = 1")}
    assert members and {m["feature_id"] for m in cluster["members"]} == members
    assert "no cluster with id 10000" in missing


async def test_a_finding_that_restates_another_names_it_and_follows_it(study: Path) -> None:
    broad, narrow, positives = restate_a_finding(study)
    async with Client(build_server(study)) as client:
        listed = await call(client, "list_hypotheses", status="validated")
        detail = await call(client, "get_hypothesis", hypothesis_id=narrow)
    order = [h["hypothesis_id"] for h in listed["rows"]]
    assert order.index(narrow) == order.index(broad) + 1
    said = {"hypothesis_id": broad, "shared": positives, "positives": positives}
    assert [h["same_evidence"] for h in listed["rows"] if h["same_evidence"]] == [said] == [detail["same_evidence"]]


async def test_read_rollout_returns_the_transcript_with_segment_ids(study: Path) -> None:
    key, n_messages, task = sql(
        study,
        "SELECT rollout_key, n_messages, task_id FROM rollouts WHERE checkpoint = ? ORDER BY n_messages DESC LIMIT 1",
        [AFTER],
    )[0]
    async with Client(build_server(study)) as client:
        listed = await call(client, "list_rollouts", checkpoint=AFTER, search=task, limit=200)
        whole = await call(client, "read_rollout", rollout_key=key, max_messages=200, max_chars=20000)
        part = await call(client, "read_rollout", rollout_key=key, start_message=2, max_messages=3)
        missing = await error(client, "read_rollout", rollout_key=99_999)
    assert key in {r["rollout_key"] for r in listed["rows"]}
    assert all(r["checkpoint"] == AFTER and task in r["task_id"] + r["rollout_id"] for r in listed["rows"])
    assert whole["rollout"]["rollout_key"] == key and len(whole["messages"]) == n_messages
    assert whole["next_message"] is None
    stored = sql(study, "SELECT message_index, role, content FROM messages WHERE rollout_key = ? ORDER BY 1", [key])
    for m, (index, role, content) in zip(whole["messages"], stored, strict=True):
        assert (m["message_index"], m["role"], m.get("content")) == (index, role, content or None)
    listed_segments = {s["segment_id"] for m in whole["messages"] for s in m.get("segments", [])}
    assert listed_segments == {r[0] for r in sql(study, "SELECT segment_id FROM segments WHERE rollout_key = ?", [key])}
    assert [m["message_index"] for m in part["messages"]] == [2, 3, 4] and part["next_message"] == 5
    assert whole["counterparts"] and all(c["checkpoint"] == BEFORE for c in whole["counterparts"])
    counterpart_tasks = sql(
        study,
        "SELECT DISTINCT task_id FROM rollouts WHERE rollout_key IN (SELECT unnest(?))",
        [[c["rollout_key"] for c in whole["counterparts"]]],
    )
    assert counterpart_tasks == [(task,)]
    assert "no rollout with key 99999" in missing


async def test_reading_a_heldout_rollout_is_logged_as_a_heldout_view(study: Path) -> None:
    """A held-out transcript (read whole or around one segment) is held-out evidence: its reading is logged, so
    hypotheses written afterwards are exploratory; reading a discovery rollout logs nothing."""
    picks = {
        split: sql(
            study,
            "SELECT min(segment_id), any_value(rollout_key) FROM segments JOIN rollouts USING "
            "(rollout_key) WHERE split = ? GROUP BY rollout_key LIMIT 1",
            [split],
        )[0]
        for split in SPLITS
    }
    async with Client(build_server(study)) as client:
        await call(client, "read_rollout", rollout_key=picks[DISCOVERY][1])
        await call(client, "read_segment", segment_id=picks[DISCOVERY][0])
        assert sql(study, "SELECT count(*) FROM heldout_views") == [(0,)]
        await call(client, "read_rollout", rollout_key=picks[HELDOUT][1])
        await call(client, "read_segment", segment_id=picks[HELDOUT][0])
    assert sql(study, "SELECT via, hypothesis_id FROM heldout_views") == [("mcp", None), ("mcp", None)]


async def test_read_segment_gives_its_place_features_and_context(study: Path) -> None:
    sid, key, index, text = sql(
        study,
        "SELECT s.segment_id, s.rollout_key, s.message_index, s.text FROM segments s "
        "JOIN segment_features USING (segment_id) WHERE s.message_index >= 3 "
        "ORDER BY s.segment_id LIMIT 1",
    )[0]
    async with Client(build_server(study)) as client:
        seg = await call(client, "read_segment", segment_id=sid, context_messages=1, max_chars=20000)
        short = await call(client, "read_segment", segment_id=sid, context_messages=0, max_chars=20)
        missing = await error(client, "read_segment", segment_id=10**9)
    assert seg["segment"]["text"] == text and seg["segment"]["rollout_key"] == key
    assert [m["message_index"] for m in seg["context"]] == [index - 1, index, index + 1]
    assert sid in {s["segment_id"] for s in seg["context"][1]["segments"]}
    strongest = sql(
        study,
        "SELECT feature_id FROM segment_features WHERE segment_id = ? ORDER BY activation DESC, feature_id LIMIT 10",
        [sid],
    )
    assert [f["feature_id"] for f in seg["features"]] == [f for (f,) in strongest]
    assert short["segment"]["text"] == clip(text, 20) and len(short["context"]) == 1
    assert "no segment with id" in missing


async def test_hypothesis_add_test_list_and_decide(study: Path) -> None:
    existing = {h for (h,) in sql(study, "SELECT hypothesis_id FROM hypotheses")}
    accepted_before = [h for (h,) in sql(study, "SELECT hypothesis_id FROM hypotheses WHERE decision = 'accepted'")]
    async with Client(build_server(study)) as client:
        added = await call(
            client,
            "add_hypothesis",
            statement="The agent hands off to a human less often",
            direction="decrease",
            verifier={"tool_name": "transfer_to_human_agents"},
            kind="tool_call",
        )
        hid = added["hypothesis_id"]
        assert added["status"] == "proposed" and added["labeler"] == "verifier"
        assert added["spec"] == {"all": [{"kind": "tool_call"}, {"tool_name": "transfer_to_human_agents"}]}
        by_pattern = await call(
            client,
            "add_hypothesis",
            statement="More apologies",
            direction="increase",
            pattern=r"\bsorry\b",
            kind="text",
        )
        json_like = await call(
            client, "add_hypothesis", statement="More mentions of 1 or 2", direction="increase", pattern="[12]"
        )
        tested = await call(client, "run_hypothesis_test", hypothesis_id=hid)
        listed = await call(client, "list_hypotheses")
        proposed = await call(client, "list_hypotheses", status="proposed")
        bare = await call(client, "get_hypothesis", hypothesis_id=hid)
        views_before = sql(study, "SELECT count(*) FROM heldout_views")[0][0]
        detail = await call(client, "get_hypothesis", hypothesis_id=hid, examples_per_checkpoint=2)
        views_after = sql(study, "SELECT via, hypothesis_id FROM heldout_views")
        after_view = await call(
            client, "add_hypothesis", statement="Transfers, seen", direction="decrease", pattern="transfer"
        )
        seen = await call(client, "run_hypothesis_test", hypothesis_id=after_view["hypothesis_id"])
        decided = await call(
            client, "record_decision", hypothesis_id=hid, decision="accepted", note="hand-offs nearly vanish"
        )
        accepted = await call(client, "list_hypotheses", decision="accepted")
        cleared = await call(client, "record_decision", hypothesis_id=hid, decision="none")
        unknown = await error(client, "record_decision", hypothesis_id=99, decision="accepted")
        untestable = await error(client, "run_hypothesis_test", hypothesis_id=99)
    assert tested["hypothesis_id"] == hid and tested["direction"] == "decrease"
    assert tested["status"] == "validated" and tested["delta"] < 0 and tested["q_value"] < 0.05
    heldout = sql(
        study,
        "SELECT count(*) FROM segments s JOIN rollouts r USING (rollout_key) "
        "WHERE r.split = 'heldout' AND s.kind = 'tool_call'",
    )[0][0]
    assert tested["n_labeled"] == heldout
    others = [by_pattern["hypothesis_id"], json_like["hypothesis_id"]]
    assert {r["hypothesis_id"] for r in listed["rows"]} == {hid, *others, *existing}
    assert listed["rows"][0]["status"] == "validated"  # validated first
    assert {r["hypothesis_id"]: r["why_not"] for r in listed["rows"]} == {
        r["hypothesis_id"]: why(r["status"], r["reason"]) for r in listed["rows"]
    }
    assert listed["rows"][0]["why_not"] is None and {r["why_not"] for r in proposed["rows"]} == {None}
    assert [r["hypothesis_id"] for r in proposed["rows"]] == others
    assert json_like["spec"] == {"regex": "[12]", "ignore_case": True}
    assert by_pattern["spec"] == {"all": [{"kind": "text"}, {"regex": r"\bsorry\b", "ignore_case": True}]}
    assert detail["provenance"]["split"] == HELDOUT and detail["examples"]
    assert bare["examples"] == [] and views_before == 0 and views_after == [("mcp", hid)]  # asked for: logged
    assert detail["calibration"] is None  # never calibrated
    assert seen["status"] == "exploratory" and "held-out evidence was shown" in seen["reason"]
    for e in detail["examples"]:
        assert e["split"] == HELDOUT
        split, tool = sql(
            study,
            "SELECT r.split, s.tool_name FROM segments s JOIN rollouts r USING (rollout_key) WHERE s.segment_id = ?",
            [e["segment_id"]],
        )[0]
        assert split == HELDOUT and tool == "transfer_to_human_agents"
    assert decided == {
        "hypothesis_id": hid,
        "decision": "accepted",
        "note": "hand-offs nearly vanish",
        "status": "validated",
    }
    assert sorted(r["hypothesis_id"] for r in accepted["rows"]) == sorted([*accepted_before, hid])
    assert cleared["decision"] is None and cleared["note"] == "hand-offs nearly vanish"
    assert sql(study, "SELECT decision, note FROM hypotheses WHERE hypothesis_id = ?", [hid]) == [
        (None, "hand-offs nearly vanish")
    ]
    assert "no hypothesis with id 99" in unknown and "no hypothesis with id 99" in untestable


async def test_add_hypothesis_refuses_bad_labelers_and_writes_nothing(
    study: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    existing = sql(study, "SELECT * FROM hypotheses ORDER BY hypothesis_id")
    async with Client(build_server(study)) as client:
        none = await error(client, "add_hypothesis", statement="Something", direction="increase")
        two = await error(
            client, "add_hypothesis", statement="Something", direction="increase", pattern="a", judge_question="Is it?"
        )
        bad_regex = await error(client, "add_hypothesis", statement="Something", direction="increase", pattern="(")
        bad_spec = await error(
            client,
            "add_hypothesis",
            statement="Something",
            direction="increase",
            verifier={"all": [{"regex": "x"}, {"colour": "red"}]},
        )
        assert sql(study, "SELECT * FROM hypotheses ORDER BY hypothesis_id") == existing
        judged = await call(
            client,
            "add_hypothesis",
            statement="The agent offers alternatives",
            direction="increase",
            judge_question="Does the agent offer an alternative?",
        )
        no_key = await error(client, "run_hypothesis_test", hypothesis_id=judged["hypothesis_id"])
    assert "exactly one of pattern, verifier or judge_question" in none and "exactly one" in two
    assert "regex" in bad_regex and "colour" in bad_spec
    assert judged["labeler"] == "judge" and judged["spec"]["question"] == "Does the agent offer an alternative?"
    assert "ANTHROPIC_API_KEY" in no_key
    assert sql(study, "SELECT status FROM hypotheses WHERE hypothesis_id = ?", [judged["hypothesis_id"]]) == [
        ("proposed",)
    ]
    assert (
        sql(
            study, "SELECT * FROM hypotheses WHERE hypothesis_id <> ? ORDER BY hypothesis_id", [judged["hypothesis_id"]]
        )
        == existing
    )


async def test_bad_arguments_get_clear_errors(study: Path) -> None:
    async with Client(build_server(study)) as client:
        missing = await error(client, "get_feature")
        wrong_type = await error(client, "get_feature", feature_id="nine")
        out_of_range = await error(client, "list_deltas", limit=5000)
        negative = await error(client, "read_rollout", rollout_key=-1)
        unknown_arg = await error(client, "list_deltas", limt=3)
        bad_choice = await error(client, "list_deltas", kind="paragraph")
        bad_decision = await error(client, "record_decision", hypothesis_id=0, decision="maybe")
        unknown_tool = await client.call_tool("drop_everything", {})
    assert "'feature_id' is required" in missing
    assert "feature_id" in wrong_type and "integer" in wrong_type
    assert "limit" in out_of_range and "less than or equal to 200" in out_of_range
    assert "rollout_key" in negative and "greater than or equal to 0" in negative
    assert "unknown argument 'limt'" in unknown_arg and "limit" in unknown_arg
    assert "kind" in bad_choice and "'tool_call'" in bad_choice
    assert "'accepted', 'rejected' or 'none'" in bad_decision
    assert unknown_tool.is_error and "drop_everything" in unknown_tool.content[0].text


async def test_read_tools_leave_the_store_file_untouched(study: Path) -> None:
    """On discovery data (a held-out rollout's reading is logged: the test above)."""
    key, sid = sql(
        study,
        "SELECT rollout_key, min(segment_id) FROM segments JOIN rollouts USING (rollout_key) "
        "WHERE split = 'discovery' GROUP BY 1 ORDER BY 1 LIMIT 1",
    )[0]
    digest = hashlib.sha256(study.read_bytes()).hexdigest()
    calls = [
        ("study_summary", {}),
        ("list_deltas", {}),
        ("get_feature", {"feature_id": 0}),
        ("list_clusters", {}),
        ("get_cluster", {"cluster_id": 0}),
        ("list_hypotheses", {}),
        ("list_rollouts", {}),
        ("read_rollout", {"rollout_key": key}),
        ("read_segment", {"segment_id": sid}),
        ("query_sql", {"sql": "SELECT count(*) FROM segments"}),
        ("query_sql", {"sql": "DELETE FROM segments"}),
    ]
    async with Client(build_server(study)) as client:
        for tool, args in calls:
            await client.call_tool(tool, args)
    assert hashlib.sha256(study.read_bytes()).hexdigest() == digest


HOLD = (
    "import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == 'ro'); "
    "print('held', flush=True); sys.stdin.read()"
)


def hold(path: Path, mode: str) -> subprocess.Popen[str]:
    """Another process holding the store open ('rw' as a writer would, 'ro' as a reader) until stdin closes."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


async def test_a_store_locked_by_another_process_gives_a_clear_error(study: Path) -> None:
    server = build_server(study, lock_wait_s=0.3)
    writer = hold(study, "rw")
    try:
        async with Client(server) as client:
            busy = await error(client, "study_summary")
            busy_sql = await error(client, "query_sql", sql="SELECT 1")
    finally:
        writer.communicate("")
    assert f"PID {writer.pid}" in busy and "being written by another process" in busy
    assert f"PID {writer.pid}" in busy_sql
    reader = hold(study, "ro")
    try:
        async with Client(server) as client:
            readable = await call(client, "list_clusters")
            no_write = await error(client, "record_decision", hypothesis_id=0, decision="accepted")
    finally:
        reader.communicate("")
    n_clusters = sql(study, "SELECT count(*) FROM clusters")[0][0]
    assert readable["total"] == n_clusters
    assert f"PID {reader.pid}" in no_write and "writing needs sole access" in no_write
    async with Client(server) as client:  # free again: the server held nothing in between
        assert (await call(client, "list_clusters"))["total"] == n_clusters


def test_results_escape_control_and_bidi_characters_and_round_trip() -> None:
    hostile = "ok \x1b[31mred\x1b[0m \x9b2J \u202eevil\u202c line\u2028break \x07"
    text = to_json({"text": hostile, "p": 0.000123456789, "nan": float("nan"), "big": 12345.6789})
    assert not any(ch in text for ch in "\x1b\x9b\u202e\u202c\u2028\x07")
    assert json.loads(text) == {"text": hostile, "p": 0.0001235, "nan": None, "big": 12350.0}
    assert clip("abcdef", 4) == "abcd…[2 more chars]" and clip("abc", 4) == "abc"


async def test_every_read_tool_on_a_full_store_with_hostile_text(sample_study_copy: Path) -> None:
    """The analysed study fills every table the tools read (SAE features with n-grams and token activations,
    tested hypotheses with labels); terminal escapes and markup are planted in rollout text and a label."""
    path = sample_study_copy
    planted = plant_hostile(path)
    hypothesis_id, status = sql(
        path, "SELECT hypothesis_id, status FROM hypotheses WHERE status = 'validated' ORDER BY hypothesis_id LIMIT 1"
    )[0]
    sae_feature = planted.feature_id
    hostile_segment = planted.text_segment
    cluster_id = sql(path, "SELECT min(cluster_id) FROM clusters")[0][0]
    async with Client(build_server(path)) as client:
        texts = {}
        for tool, args in [
            ("study_summary", {}),
            ("exploratory_ranking", {"limit": 20}),
            ("list_deltas", {"source": "sae", "limit": 5}),
            ("get_feature", {"feature_id": sae_feature}),
            ("list_clusters", {}),
            ("get_cluster", {"cluster_id": cluster_id}),
            ("list_hypotheses", {"status": "validated"}),
            ("get_hypothesis", {"hypothesis_id": hypothesis_id}),
            ("list_rollouts", {"limit": 3}),
            ("read_rollout", {"rollout_key": planted.rollout_key, "max_chars": 20000}),
            ("read_segment", {"segment_id": hostile_segment, "max_chars": 20000}),
            (
                "query_sql",
                {"sql": f"SELECT text FROM segments WHERE segment_id = {hostile_segment}", "include_heldout": True},
            ),
        ]:
            result = await client.call_tool(tool, args)
            assert not result.is_error, (tool, result.content[0].text)
            texts[tool] = result.content[0].text
    for tool, text in texts.items():
        assert not any(ch in text for ch in "\x1b\x9b\x07"), tool
    feature = json.loads(texts["get_feature"])
    assert feature["source"] == "sae" and feature["top_ngrams"] and feature["examples"]
    assert all(e["peak"] is not None for e in feature["examples"])
    hypotheses = json.loads(texts["list_hypotheses"])
    assert hypothesis_id in {r["hypothesis_id"] for r in hypotheses["rows"]} and status == "validated"
    assert {r["status"] for r in hypotheses["rows"]} == {"validated"}
    assert json.loads(texts["read_segment"])["segment"]["text"] == HOSTILE
    assert json.loads(texts["query_sql"])["rows"] == [[clip(HOSTILE, 1000)]]
    rollout = json.loads(texts["read_rollout"])
    assert HOSTILE in [m.get("content") for m in rollout["messages"]]
