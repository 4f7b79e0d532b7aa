"""Inspect AI logs (.eval and .json) built with inspect_ai's own writer, read back as rollouts."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec, write_eval_log  # noqa: E402
from inspect_ai.model import (  # noqa: E402
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ContentReasoning,
    ContentText,
)
from inspect_ai.scorer import Score  # noqa: E402
from inspect_ai.tool import ToolCall, ToolCallError  # noqa: E402

from engine.cli import main  # noqa: E402
from engine.ingest.formats import detect  # noqa: E402
from engine.ingest.input_file import InputFile  # noqa: E402
from engine.store import Store  # noqa: E402
from tests.factories_features import tiny_reader  # noqa: E402
from tests.test_ingest_errors import snapshot  # noqa: E402


def sample(sid: int, epoch: int = 1, *, value: object = "C", cautious: bool = False) -> EvalSample:
    reply = "Let me double-check before I change anything." if cautious else "On it."
    messages = [
        ChatMessageSystem(content="You are a shell agent."),
        ChatMessageUser(content=f"Clean up folder {sid}."),
        ChatMessageAssistant(
            content=[ContentReasoning(reasoning=f"List folder {sid} first."), ContentText(text=reply)],
            tool_calls=[ToolCall(id="c1", function="ls", arguments={"path": f"/data/{sid}"})],
        ),
        ChatMessageTool(
            content="", tool_call_id="c1", function="ls", error=ToolCallError(type="permission", message="denied")
        ),
        ChatMessageAssistant(
            content=[ContentReasoning(reasoning="secret", redacted=True), ContentText(text="I could not list it.")]
        ),
    ]
    return EvalSample(
        id=sid,
        epoch=epoch,
        input=f"Clean up folder {sid}.",
        target="done",
        messages=messages,
        scores={"match": Score(value=value), "length": Score(value=len(reply))},
        metadata={"difficulty": "easy"},
    )


def write_log(path: Path, samples: list[EvalSample], model: str = "mockllm/model") -> Path:
    ids = sorted({s.id for s in samples})
    epochs = max(s.epoch for s in samples)
    spec = EvalSpec(
        created="2026-01-01T00:00:00+00:00",
        task="cleanup",
        dataset=EvalDataset(samples=len(ids), sample_ids=ids),
        model=model,
        config=EvalConfig(epochs=epochs),
    )
    write_eval_log(EvalLog(status="success", eval=spec, samples=samples), str(path))
    return path


@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_samples_become_rollouts(suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path / f"run{suffix}", [sample(0, value="I"), sample(1, value="P"), sample(1, 2, value=True)])
    assert detect(InputFile(log)) == "inspect"
    store_path = tmp_path / "s.duckdb"
    assert main(["ingest", str(store_path), str(log), "--checkpoint", "a"]) == 0
    assert "reasoning on 6 of 6 assistant turns" in capsys.readouterr().err
    with Store(store_path, read_only=True) as store:
        rollouts = store.execute(
            "SELECT rollout_id, task_id, trial, reward, model, termination_reason, timed_out, "
            "json_extract_string(metadata, '$.sample.difficulty') FROM rollouts ORDER BY rollout_id"
        ).fetchall()
        assert rollouts == [
            ("0:epoch1", "0", 1, 0.0, "mockllm/model", "completed", False, "easy"),
            ("1:epoch1", "1", 1, 0.5, "mockllm/model", "completed", False, "easy"),
            ("1:epoch2", "1", 2, 1.0, "mockllm/model", "completed", False, "easy"),
        ]
        first = store.execute(
            "SELECT kind, text FROM segments WHERE rollout_key = (SELECT min(rollout_key) FROM rollouts) "
            "ORDER BY segment_id"
        ).fetchall()
        assert first == [
            ("reasoning", "List folder 0 first."),
            ("text", "On it."),
            ("tool_call", 'ls {"path":"/data/0"}'),
            ("reasoning", "[redacted thinking]"),
            ("text", "I could not list it."),
        ]
        tool = store.execute(
            "SELECT content, is_error, tool_call_id FROM messages WHERE role = 'tool' LIMIT 1"
        ).fetchone()
        assert tool == ("permission: denied", True, "c1")


def test_score_chooses_the_reward(tmp_path: Path) -> None:
    log = write_log(tmp_path / "run.eval", [sample(0), sample(1, cautious=True)])
    store_path = tmp_path / "s.duckdb"
    assert main(["ingest", str(store_path), str(log), "--checkpoint", "a", "--score", "length"]) == 0
    with Store(store_path, read_only=True) as store:
        rewards = [r[0] for r in store.execute("SELECT reward FROM rollouts ORDER BY rollout_id").fetchall()]
    assert rewards == [6.0, float(len("Let me double-check before I change anything."))]


BAD = [
    (
        "unknown score",
        lambda p: write_log(p / "x.eval", [sample(0)]),
        ["--score", "nope"],
        "1: scores: no score named 'nope' (have: match, length); choose one with --score",
    ),
    (
        "dict score",
        lambda p: write_log(p / "x.eval", [sample(0), sample(1, value={"a": 1})]),
        [],
        "2: scores.match: a dict of values, not one; choose a scorer with --score",
    ),
    ("damaged zip", lambda p: damaged(p / "x.eval"), [], "1: log: cannot read as an Inspect log: "),
    (
        "not a log",
        lambda p: not_a_log(p / "x.json"),
        ["--format", "inspect"],
        "1: log: cannot read as an Inspect log: ",
    ),
    (
        "no assistant turn",
        lambda p: write_log(p / "x.json", [no_reply(0)]),
        [],
        "1: messages: no assistant message: nothing the model produced to analyse",
    ),
]


def damaged(path: Path) -> Path:
    good = write_log(path, [sample(0)]).read_bytes()
    path.write_bytes(good[: len(good) // 2])
    return path


def not_a_log(path: Path) -> Path:
    path.write_text('{"eval": {"task": "x"}, "samples": 3}')
    return path


def no_reply(sid: int) -> EvalSample:
    return EvalSample(id=sid, epoch=1, input="hi", target="x", messages=[ChatMessageUser(content="hi")])


@pytest.mark.parametrize(("case", "build", "options", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_logs(
    case: str, build, options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "s.duckdb"
    good = write_log(tmp_path / "good.eval", [sample(5)])
    assert main(["ingest", str(store_path), str(good), "--checkpoint", "a"]) == 0
    before = snapshot(store_path)
    bad = build(tmp_path)
    capsys.readouterr()
    assert main(["ingest", str(store_path), str(bad), "--checkpoint", "a", *options]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"rldiff: {bad}:{message}")
    assert snapshot(store_path) == before


def test_missing_inspect_ai_is_explained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    log = write_log(tmp_path / "run.eval", [sample(0)])
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # what an install without the extra sees
    assert main(["ingest", str(tmp_path / "s.duckdb"), str(log), "--checkpoint", "a"]) == 2
    assert "pip install 'rldiff[inspect]'" in capsys.readouterr().err


@pytest.mark.slow
def test_a_pair_of_logs_goes_through_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a terse agent; after: one that says it will double-check, on the same 20 tasks, 2 epochs."""
    before = write_log(tmp_path / "before.eval", [sample(i, e) for i in range(20) for e in (1, 2)], "mockllm/base")
    after = write_log(
        tmp_path / "after.json", [sample(i, e, cautious=True) for i in range(20) for e in (1, 2)], "mockllm/tuned"
    )
    store_path = tmp_path / "study.duckdb"
    reader = tiny_reader(tmp_path / "reader")  # a small random encoder: the pipeline, not the reader, is tested
    light = ["--reader", str(reader), "--sae-width", "64", "--sae-steps", "50", "--permutations", "300"]
    assert main(["compare", str(before), str(after), "--store", str(store_path), "--llm", "none", *light]) == 0
    with Store(store_path, read_only=True) as store:
        stages = {r[0] for r in store.execute("SELECT stage FROM runs WHERE status = 'done'").fetchall()}
        assert stages == {"split", "features", "deltas", "clusters", "hypotheses"}
        assert store.execute("SELECT DISTINCT model FROM rollouts ORDER BY 1").fetchall() == [
            ("mockllm/base",),
            ("mockllm/tuned",),
        ]
        significant = store.scalar("SELECT count(*) FROM feature_deltas WHERE q_value < 0.05")
        assert significant > 0
