"""`analyze --where`: a safe DuckDB expression over rollout columns restricts the study and is recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.pipeline import analyze
from engine.store import Store
from engine.strata import check_where


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("reward > 0; DROP TABLE rollouts", "one expression, no ';'"),
        ("task_id IN (SELECT task_id FROM segments)", "subquery not allowed"),
        ("read_csv('/etc/passwd') IS NOT NULL", "function 'read_csv' not allowed"),
        ("getenv('HOME') = 'x'", "function 'getenv' not allowed"),
        ("text LIKE '%x%'", "'text' is not a rollout column"),
        ("segments.kind = 'text'", "'segments.kind' is not a rollout column"),
        ("reward >", "syntax error"),
        ("", "empty expression"),
        ("reward > 0) UNION (SELECT 1", "not a query"),
        ("sum(reward) > 0", "function 'sum' not allowed"),
        ("reward = 'high'", "Conversion Error"),
    ],
)
def test_unsafe_or_wrong_expressions_are_refused(tau2_store: Store, expression: str, problem: str) -> None:
    with pytest.raises(InputError, match="--where") as caught:
        check_where(tau2_store, expression)
    assert problem.lower() in str(caught.value).lower()


def test_allowed_expressions(tau2_store: Store) -> None:
    for expression in (
        "NOT coalesce(timed_out, false) AND reward >= 0.5",
        "termination_reason IN ('user_stop', 'agent_stop') OR lower(model) LIKE '%grok%'",
        "json_extract_string(metadata, '$.source_format') = 'tau2' AND rollouts.trial BETWEEN 0 AND 3",
    ):
        assert check_where(tau2_store, expression) == expression


def test_where_excludes_rollouts_and_is_recorded(tau2_store: Store) -> None:
    analyze(tau2_store, AnalyzeConfig(where="reward >= 0.5", seed=1), until="split")
    rows = tau2_store.execute(
        "SELECT split = 'excluded', reward >= 0.5, count(*) FROM rollouts GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert {(excluded, success) for excluded, success, _ in rows} == {(True, False), (False, True)}
    config = json.loads(tau2_store.scalar("SELECT config FROM runs WHERE stage = 'split'"))
    assert config["where"] == "reward >= 0.5"


def test_a_where_that_leaves_a_checkpoint_empty(tau2_store: Store) -> None:
    with pytest.raises(InputError, match="no rollouts of checkpoint 'standard' are left"):
        analyze(tau2_store, AnalyzeConfig(where="reward > 99"), until="split")


def test_cli_refuses_before_writing(tau2_store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(tau2_store.path)
    tau2_store.close()
    assert main(["analyze", str(path), "--llm", "none", "--where", "read_text('x') = ''"]) == 2
    assert "function 'read_text' not allowed" in capsys.readouterr().err
    with Store(path, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM runs") == 0
        assert store.scalar("SELECT count(*) FROM rollouts WHERE split IS NOT NULL") == 0
