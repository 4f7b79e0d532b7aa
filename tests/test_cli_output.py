"""CLI output a person can read at 80 columns, and JSON a script can read without parsing tables."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from engine import cli
from engine.console import elide_middle
from engine.store import Store
from tests.restated import restate_a_finding

LONG = "asks the customer to confirm the reservation number before changing any flight in the booking"


@pytest.fixture(scope="module")
def study(sample_study: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The analysed demo pair with one long label planted on the top delta (to check eliding)."""
    path = Path(shutil.copy(sample_study, tmp_path_factory.mktemp("out") / "study.duckdb"))
    with Store(path) as store:
        top = store.scalar(
            "SELECT feature_id FROM feature_deltas WHERE tested ORDER BY q_value, abs(delta) DESC LIMIT 1"
        )
        for table in ("features", "feature_kind_labels"):  # what its rows are called, at every kind
            store.execute(f"UPDATE {table} SET label = ? WHERE feature_id = ?", [LONG, top])
    return path


def run(monkeypatch: pytest.MonkeyPatch, *argv: str, width: int = 80) -> str:
    buffer = io.StringIO()
    monkeypatch.setattr(cli.output, "out", Console(file=buffer, width=width, highlight=False))
    assert cli.main(list(argv)) == 0
    return buffer.getvalue()


def test_deltas_fit_80_columns_with_whole_labels(study: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = run(monkeypatch, "deltas", str(study), "--top", "8")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    label_width = next(line for line in lines if line.startswith("feature")).index("kind")
    words = " ".join(line[:label_width].strip() for line in lines)  # the label column's cells, wrapped
    # the label wraps over lines, and a label too long for them loses its middle, not its start or end
    assert "asks the customer" in words and "in the booking" in words and "…" in words
    q_ends = {len(line.rstrip()) for line in lines if line.rstrip().endswith(("e-05", "e-06")) or "…" in line[40:]}
    assert len(q_ends) <= 2  # numbers stay right-aligned in their columns


def test_deltas_show_the_pooled_share_beneath_the_rates(study: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each row's second line carries its pooled shares (the tested rates are on the first) and the caption says
    which is which."""
    text = run(monkeypatch, "deltas", str(study), "--top", "8")
    with Store(study) as store:
        rows = store.frame(
            "SELECT prevalence_before, prevalence_after, pooled_before, pooled_after FROM feature_deltas "
            "WHERE tested ORDER BY q_value, abs(delta) DESC, feature_id, kind LIMIT 8"
        )
    lines = text.splitlines()
    level_lines = [i for i, line in enumerate(lines) if "(" in line and "…" in line and "%" in line]
    assert len(level_lines) == 8
    shown = 0
    for i, r in zip(level_lines, rows.iter_rows(named=True), strict=True):
        levels = f"{100 * r['prevalence_before']:.1f}%", f"{100 * r['prevalence_after']:.1f}%"
        pooled = f"{100 * r['pooled_before']:.1f}%", f"{100 * r['pooled_after']:.1f}%"
        assert all(x in lines[i] for x in levels)
        assert all(x in lines[i + 1] for x in pooled)
        shown += pooled != levels
    assert shown  # the sample pair has rows where the two differ
    flat = " ".join(text.split())
    assert "pooled: the share of all segments" in flat
    assert re.search(
        r"BH within each family: .* Rollouts are \d\.\d\dx as long after \(\d+\.\d -> \d+\.\d segments", flat
    )


def test_elide_middle_keeps_both_ends() -> None:
    assert elide_middle("abcdefghij", 7) == "abc…hij"
    assert elide_middle("short", 7) == "short"
    # whole words go, so a label's quoted phrases are not cut into fragments
    label = "reply: “i must adhere”, “before proceeding”, “like to proceed”"
    assert elide_middle(label, 50) == "reply: “i must adhere”, … “like to proceed”"
    assert elide_middle(label, 40) == "reply: “i must … “like to proceed”"


def test_deltas_json(study: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli.output, "out", Console(file=io.StringIO()))
    assert cli.main(["deltas", str(study), "--top", "5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["deltas"]) == 5
    assert {"label", "kind", "delta", "q_value"} <= set(data["deltas"][0])
    assert data["tested"]["tested"] > 0


def test_deltas_by_reward(study: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    text = run(monkeypatch, "deltas", str(study), "--top", "5", "--by", "reward")
    assert "within successes and failures" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert cli.main(["deltas", str(study), "--top", "5", "--by", "reward", "--json"]) == 0
    strata = json.loads(capsys.readouterr().out)["by_reward"]
    with Store(study, read_only=True) as store:
        row = strata[0]
        before, after = store.execute("SELECT checkpoint FROM checkpoints ORDER BY ordinal").fetchall()
        n = store.scalar(
            "SELECT count(*) FROM segments s JOIN rollouts r USING (rollout_key) WHERE r.split = 'discovery' "
            "AND r.checkpoint = ? AND r.reward IS NOT NULL AND (r.reward >= 0.5) = ? AND (? = 'any' OR s.kind = ?)",
            [before[0], row["stratum"] == "success", row["kind"], row["kind"]],
        )
        if row["kind"] != "any":
            assert row["n_before"] == n
        assert {r["stratum"] for r in strata} <= {"success", "failure"}
        assert all(0 <= r["prevalence_before"] <= 1 for r in strata if r["prevalence_before"] is not None)


def test_info_and_hypothesis_list_json(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["info", str(study), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [c["checkpoint"] for c in info["checkpoints"]] and info["n_hypotheses"] > 0
    assert cli.main(["hypothesis", "list", str(study), "--json"]) == 0
    hypotheses = json.loads(capsys.readouterr().out)
    assert len(hypotheses) == info["n_hypotheses"]
    assert {"hypothesis_id", "statement", "status", "q_value"} <= set(hypotheses[0])


def test_hypothesis_list_text_is_one_line_each_and_clean(study: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(study) as store:
        store.execute("UPDATE hypotheses SET statement = 'evil \x1b[2J\nnext' WHERE hypothesis_id = 1")
        store.execute(
            "UPDATE hypotheses SET statement = 'longer turns', provenance = json_merge_patch(coalesce(provenance, "
            "'{}'), '{\"equal_length\": {\"caution\": true}}') WHERE hypothesis_id = 0"
        )
    text = run(monkeypatch, "hypothesis", "list", str(study))
    assert "\x1b" not in text
    assert any(line.endswith("evil next") for line in text.splitlines())
    assert any(line.endswith("(may be turn length) longer turns") for line in text.splitlines())


def test_an_empty_hypothesis_list_says_so_on_stderr(
    study: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(monkeypatch, "hypothesis", "list", str(study), "--status", "proposed") == ""
    assert capsys.readouterr().err.split() == "no hypotheses with status proposed".split()


def test_a_finding_that_restates_another_says_so_in_list_json_and_show(
    sample_study_copy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A validated finding whose positives are half of another's, with the same evidence, is listed right after it,
    flagged; the JSON names the broader finding and `show` says so with its counts."""
    broad, narrow, n = restate_a_finding(sample_study_copy)
    text = run(monkeypatch, "hypothesis", "list", str(sample_study_copy), width=400).splitlines()
    ids = [int(line.split()[0]) for line in text]
    assert ids.index(narrow) == ids.index(broad) + 1
    assert [i for i, line in zip(ids, text, strict=True) if f"(same behaviour as {broad}?)" in line] == [narrow]
    assert cli.main(["hypothesis", "list", str(sample_study_copy), "--json"]) == 0
    listed = {h["hypothesis_id"]: h["same_evidence"] for h in json.loads(capsys.readouterr().out)}
    assert listed[narrow] == {"hypothesis_id": broad, "shared": n, "positives": n}
    shown = run(monkeypatch, "hypothesis", "show", str(sample_study_copy), str(narrow), width=400)
    assert f"likely the same behaviour as finding {broad}: the same evidence in {n} of its {n} positives" in shown


def test_a_small_study_says_so_up_front_and_shows_its_exploratory_ranking_on_request(
    study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo pair shares 4 tasks, so the split is within task: `rldiff info` prints the split stage's
    small-study notice and where the whole-study ranking is, not the ranking: it includes held-out rollouts.
    `--exploratory` shows it under a title that says it is not validated and how it is ordered, and logs a
    held-out view (in the JSON too); the same study marked as split by task has no ranking to show."""
    path = Path(shutil.copy(study, tmp_path / "small.duckdb"))
    with Store(path, read_only=True) as store:
        assert store.meta("split_mode") == "rollout"
        warning = store.meta("split_warning")
        top = json.loads(store.scalar("SELECT metrics FROM runs WHERE stage = 'deltas'"))["exploratory"]
        label = store.scalar("SELECT label FROM features WHERE feature_id = ?", [top[0]["feature_id"]])

    def views() -> int:
        with Store(path, read_only=True) as store:
            return int(store.scalar("SELECT count(*) FROM heldout_views"))

    text = " ".join(run(monkeypatch, "info", str(path), width=120).split())
    assert f"Small study: {warning}" in text and "exploratory, never validated" in text
    assert f"`rldiff info {path} --exploratory` shows it" in text
    assert "Exploratory ranking" not in text and " ".join(label.split())[:12] not in text
    capsys.readouterr()
    assert cli.main(["info", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert all("exploratory" not in stage["metrics"] for stage in summary["stages"]) and views() == 0
    text = " ".join(run(monkeypatch, "info", str(path), "--exploratory", width=120).split())
    assert "Exploratory ranking, whole study" in text and "not validated: these rows include the held-out" in text
    assert "the families take turns" in text and " ".join(label.split())[:12] in text and views() == 1
    assert cli.main(["info", str(path), "--json", "--exploratory"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [r["feature_id"] for r in shown["exploratory"]] == [r["feature_id"] for r in top] and views() == 2
    assert shown["exploratory"][0]["label"] == label
    by_task = Path(shutil.copy(study, tmp_path / "by-task.duckdb"))
    with Store(by_task) as store:
        store.execute("UPDATE meta SET value = 'task' WHERE key = 'split_mode'")
        store.execute("UPDATE runs SET metrics = json_object() WHERE stage = 'deltas'")
    text = " ".join(run(monkeypatch, "info", str(by_task), width=120).split())
    assert "Small study" not in text and "exploratory" not in text
    assert cli.main(["info", str(by_task), "--exploratory"]) == 2


def test_info_ends_with_what_was_found_and_why_the_rest_was_not(
    sample_study_copy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Beneath the study table: the hypotheses by status and why, the validated findings with their held-out
    change (none the user rejected, no control characters), and where the rest are."""
    from engine.hypotheses.reasons import tally
    from engine.store.queries import hypotheses

    with Store(sample_study_copy) as store:
        rows = hypotheses(store.cursor())
        found = [h for h in rows if h.status == "validated"]
        assert len(found) >= 2 and len(rows) > len(found)
        dropped, kept = found[0], found[1]
        store.execute("UPDATE hypotheses SET decision = 'rejected' WHERE hypothesis_id = ?", [dropped.hypothesis_id])
        hostile = "UPDATE hypotheses SET statement = 'evil \x1b[2J' || statement WHERE hypothesis_id = ?"
        store.execute(hostile, [kept.hypothesis_id])
    text = run(monkeypatch, "info", str(sample_study_copy), width=400)
    findings = text[text.index("Findings: ") :]
    assert findings.splitlines()[0] == f"Findings: {len(rows)} hypotheses: {tally(rows)}."
    assert "\x1b" not in findings
    shown = {int(line.split()[0]): line for line in findings.splitlines()[2:] if line.split()[0].isdigit()}
    assert dropped.hypothesis_id not in shown
    assert f"{kept.prevalence_before:.1%} -> {kept.prevalence_after:.1%}" in shown[kept.hypothesis_id]
    assert f"evil {kept.statement}" in shown[kept.hypothesis_id]
    assert f"`rldiff hypothesis list {sample_study_copy}` lists all {len(rows)}" in findings
    listed = run(monkeypatch, "hypothesis", "list", str(sample_study_copy), width=400).splitlines()
    assert len(listed) == len(rows)  # one line each on stdout; the tally on stderr
    assert capsys.readouterr().err.split() == f"{len(rows)} hypotheses: {tally(rows)}".split()


def test_findings_tested_on_a_small_studys_discovery_fold_are_headed_other_fold(sample_study: Path) -> None:
    from engine.console import findings_text
    from engine.store.queries import hypotheses

    with Store(sample_study, read_only=True) as store:
        found = next(h for h in hypotheses(store.cursor()) if h.status == "validated")
    console = Console(file=io.StringIO(), width=200)
    console.print(findings_text([found], [found], None, "s.duckdb"))
    other_fold = dataclasses.replace(found, provenance={"split": "discovery"})
    console.print(findings_text([other_fold], [other_fold], None, "s.duckdb"))
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert [line.split()[:2] for line in shown.splitlines() if line.startswith("id ")] == [
        ["id", "held-out"],
        ["id", "other"],
    ]
    assert "-o report.html` shows each finding's evidence." in shown and "others" not in shown  # none failed


def test_a_study_without_hypotheses_says_why_beneath_its_table() -> None:
    from engine.console import findings_text
    from engine.hypotheses.stage import NOTHING_HELD_OUT

    console = Console(file=io.StringIO(), width=400)
    console.print(findings_text([], [], NOTHING_HELD_OUT, "s.duckdb"))
    assert console.file.getvalue().strip() == f"Findings: no hypotheses: {NOTHING_HELD_OUT}."  # type: ignore[attr-defined]
