"""Bad input: exit code 2, `FILE:LINE: field: what is wrong`, and the store exactly as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.store import SCHEMA_VERSION, Store, StoreSchemaError

GOOD = {"rollout_id": "r0", "task_id": "t0", "messages": [{"role": "assistant", "content": "hello"}]}


def line(**changes: object) -> str:
    record = {**GOOD, **changes}
    return json.dumps({k: v for k, v in record.items() if v is not None})


def assistant(**fields: object) -> list[dict]:
    return [{"role": "assistant", **fields}]


BAD_INPUTS = [
    (
        "malformed json",
        f'{line()}\n{{"rollout_id": "r1",\n',
        "2: json: Expecting property name enclosed in double quotes (column 21)",
    ),
    ("missing task_id", f"{line()}\n{line(rollout_id='r1', task_id=None)}\n", "2: task_id: missing"),
    (
        "unknown role",
        f"{line(messages=[{'role': 'robot', 'content': 'x'}] + assistant(content='y'))}\n",
        "1: messages[0].role: unknown role 'robot' (expected one of system, user, assistant, tool)",
    ),
    (
        "tool call without a name",
        f"{line(messages=assistant(tool_calls=[{'id': 'c', 'arguments': {}}]))}\n",
        "1: messages[0].tool_calls[0].name: missing",
    ),
    (
        "openai tool call without a name",
        f"{line(messages=assistant(tool_calls=[{'type': 'function', 'function': {'arguments': '{}'}}]))}\n",
        "1: messages[0].tool_calls[0].function.name: missing",
    ),
    (
        "duplicate rollout_id",
        f"{line()}\n\n{line()}\n",
        "3: rollout_id: duplicate 'r0' in checkpoint 'after' (first at line 1)",
    ),
    ("empty file", "\n  \n", "1: file: empty file: no rollouts"),
    (
        "undetectable format",
        '{"hello": "world"}\n',
        "1: format: cannot detect the format (expected canonical JSONL with 'messages', a tau-bench trajectory "
        "list, a tau2 simulation file, Responses API items, an Inspect log or a SWE-agent trajectory); "
        "name it with --format",
    ),
    ("reward not a number", f"{line(reward='high')}\n", '1: reward: expected a number, got "high"'),
    (
        "no assistant message",
        f"{line(messages=[{'role': 'user', 'content': 'hi'}])}\n",
        "1: messages: no assistant message: nothing the model produced to analyse",
    ),
]


def snapshot(path: Path) -> dict[str, list]:
    with Store(path, read_only=True) as s:
        return {
            t: s.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
            for t in ("checkpoints", "sources", "rollouts", "messages", "segments")
        }


@pytest.fixture
def study(tmp_path: Path) -> Path:
    """A store that already holds one good file in checkpoint 'after'."""
    path = tmp_path / "study.duckdb"
    good = tmp_path / "good.jsonl"
    good.write_text(line(rollout_id="existing") + "\n")
    assert main(["ingest", str(path), str(good), "--checkpoint", "after"]) == 0
    return path


@pytest.mark.parametrize(("case", "content", "message"), BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input(
    case: str, content: str, message: str, study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    before = snapshot(study)
    capsys.readouterr()
    assert main(["ingest", str(study), str(bad), "--checkpoint", "after"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"rldiff: {bad}:{message}"
    assert snapshot(study) == before


def test_failure_late_in_a_file_rolls_back(study: Path, tmp_path: Path) -> None:
    bad = tmp_path / "late.jsonl"
    bad.write_text("".join(line(rollout_id=f"r{i}") + "\n" for i in range(5000)) + "not json\n")
    before = snapshot(study)
    assert main(["ingest", str(study), str(bad), "--checkpoint", "after"]) == 2
    assert snapshot(study) == before


def test_duplicate_of_a_stored_rollout(study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    again = tmp_path / "again.jsonl"
    again.write_text(line(rollout_id="existing", task_id="other") + "\n")
    assert main(["ingest", str(study), str(again), "--checkpoint", "after"]) == 2
    assert "1: rollout_id: duplicate 'existing' in checkpoint 'after' (first at line 1)" in capsys.readouterr().err


def test_every_file_is_checked_before_any_is_written(study: Path, tmp_path: Path) -> None:
    good = tmp_path / "fine.jsonl"
    good.write_text(line(rollout_id="fresh") + "\n")
    before = snapshot(study)
    assert main(["ingest", str(study), str(good), str(tmp_path / "missing.jsonl"), "--checkpoint", "after"]) == 2
    assert snapshot(study) == before


def test_skip_bad_quarantines(study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        f"{line(rollout_id='a')}\n{{broken\n{line(rollout_id='b', task_id=None)}\n{line(rollout_id='c')}\n"
    )
    assert main(["ingest", str(study), str(mixed), "--checkpoint", "after", "--skip-bad"]) == 0
    with Store(study, read_only=True) as s:
        ids = [r[0] for r in s.execute("SELECT rollout_id FROM rollouts ORDER BY rollout_id").fetchall()]
        assert ids == ["a", "c", "existing"]
        assert s.scalar("SELECT n_skipped FROM sources WHERE path = ?", [str(mixed)]) == 2
    [quarantine] = study.with_name("study.duckdb.quarantine").glob("mixed.jsonl.*.after.jsonl")
    entries = [json.loads(x) for x in quarantine.read_text().splitlines()]
    assert [(e["line"], e["field"]) for e in entries] == [(2, "json"), (3, "task_id")]
    assert entries[0]["text"] == "{broken"
    assert "2 bad records skipped" in capsys.readouterr().err


def test_skip_bad_with_nothing_usable_fails(study: Path, tmp_path: Path) -> None:
    bad = tmp_path / "allbad.jsonl"
    bad.write_text("{oops\n")
    assert main(["ingest", str(study), str(bad), "--checkpoint", "after", "--skip-bad"]) == 2


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["ingest", str(tmp_path / "s.duckdb")])  # no FILE, no --checkpoint
    assert usage.value.code == 2
    assert main(["info", str(tmp_path / "missing.duckdb")]) == 2
    assert "no such store" in capsys.readouterr().err

    def explode(*_: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("engine.cli.study.print_summary", explode)
    good = tmp_path / "good.jsonl"
    good.write_text(line() + "\n")
    assert main(["ingest", str(tmp_path / "s.duckdb"), str(good), "--checkpoint", "x"]) == 1
    assert "internal error: RuntimeError: boom" in capsys.readouterr().err


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.duckdb"
    with Store(path) as s:
        s.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    with pytest.raises(StoreSchemaError, match="newer than this rldiff supports"):
        Store(path)


def test_info_prints_the_summary(tau2_store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    path = tau2_store.path
    tau2_store.close()
    assert main(["info", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "standard" in printed and "tighter" in printed
    assert "0.30 (0.06–0.54)" in printed  # tau2 standard: 20/66 rewarded, CI clustered by 4 tasks
