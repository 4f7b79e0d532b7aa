"""The suites runner's plumbing on a slice of the gpt-4o pair: the analysis stops after the split stage (the
full pipeline is what `rldiff bench-planted` measures, minutes a study), the baseline and scoring are real."""

from __future__ import annotations

from dataclasses import asdict
from functools import partial
from pathlib import Path

import pytest

from engine import cli
from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.pipeline import analyze
from engine.planted import SAMPLE_PAIR, read_records, write_records
from engine.planted_suites import BASELINE, RLDIFF, ablation_config, report_lines, rescore, run_suites

pytestmark = pytest.mark.slow


def _slice(tmp_path: Path, rollouts: int = 30) -> tuple[Path, Path]:
    paths = []
    for name, source in zip(("before", "after"), SAMPLE_PAIR, strict=True):
        paths.append(tmp_path / f"{name}.jsonl")
        write_records(paths[-1], read_records(source)[:rollouts])
    return paths[0], paths[1]


def test_quick_run_scores_every_method_and_shares_one_cache(tmp_path: Path) -> None:
    work = tmp_path / "work"
    split_only = partial(analyze, until="split")
    report = run_suites(work, AnalyzeConfig(), quick=True, pair=_slice(tmp_path), analyze=split_only)
    assert [(r.suite, r.seed) for r in report.results] == [("paraphrased", 0), ("unmodified, reasoning", 0)]
    planted, null = report.results
    assert set(planted.scores) >= {RLDIFF, BASELINE}
    assert planted.scores[RLDIFF].validated == 0  # nothing past the split ran, so nothing validated
    assert sum(planted.planted_counts.values()) > 20 and null.planted_counts == {}
    # the planted segments tested as labels, on the split the findings would be tested on
    assert set(planted.perfect_p) == set(planted.behaviours) and null.perfect_p == {}
    assert all(ps and all(p is None or 0 < p <= 1 for p in ps) for ps in planted.perfect_p.values())
    # nothing past the split ran, so no feature row was tested: no source isolates anything
    assert planted.source_f1 == dict.fromkeys(planted.behaviours, 0.0) and null.source_f1 == {}
    assert null.scores[BASELINE].validated == null.scores[BASELINE].false_discoveries
    for study in ("paraphrased-0", "unmodified-reasoning-0"):
        link = work / study / "study.duckdb.rldiff" / "cache"
        assert link.is_symlink() and link.resolve() == (work / "shared" / "cache").resolve()
    lines = list(report_lines(report))
    assert any("paraphrased suite, >= 4 behaviours recovered on every seed: **does not hold**" in x for x in lines)
    assert any("nothing validated on the unmodified pairs: **holds**" in x for x in lines)
    assert any(x.startswith("| paraphrased | 0 | rldiff | 0/6 | 0 |") for x in lines)
    p = planted.perfect_p["grader_awareness"][0]
    assert any(
        x.startswith("| paraphrased | 0 | grader_awareness |") and x.endswith(f" | 0.00 | {p:.2g} |") for x in lines
    )
    assert (work / "suites.json").is_file()
    again = rescore(work)  # the stores scored again, nothing analysed: the same figures
    assert [asdict(r) for r in again.results] == [asdict(r) for r in report.results]
    assert again.variety == report.variety


@pytest.mark.parametrize(
    ("suite", "behaviours", "sentences"),
    [
        ("replies", {"feedback_request", "overclaim"}, {"feedback_request", "overclaim"}),
        (
            "habits",
            {"assume_missing", "confirm_first", "apology", "guess_ids"},
            {"assume_missing", "confirm_first", "apology"},
        ),
        (
            "shifts",
            {"grader_awareness", "out_of_scope", "recheck", "empathy", "feedback_request", "overclaim"},
            {"grader_awareness", "out_of_scope", "recheck", "empathy", "feedback_request", "overclaim"},
        ),
    ],
)
def test_the_reply_habit_and_shift_suites_run_with_their_null(
    tmp_path: Path, suite: str, behaviours: set[str], sentences: set[str]
) -> None:
    split_only = partial(analyze, until="split")
    report = run_suites(
        tmp_path / "work", AnalyzeConfig(), suite=suite, quick=True, pair=_slice(tmp_path), analyze=split_only
    )
    assert [(r.suite, r.seed) for r in report.results] == [(suite, 0), ("unmodified, reasoning", 0)]
    planted = report.results[0]
    assert set(planted.planted_counts) == behaviours and min(planted.planted_counts.values()) > 0
    assert {v.behaviour for v in report.variety[0]} == sentences
    lines = list(report_lines(report))
    assert any(x.startswith(f"| {suite} | 0 | rldiff | 0/{len(behaviours)} | 0 |") for x in lines)
    assert any(x.startswith("- habit suite") for x in lines) == (suite == "habits")
    assert any(x.startswith("- shift suite") for x in lines) == (suite == "shifts")
    again = rescore(tmp_path / "work")  # the seed's own habit and shift rates found again
    assert [asdict(r) for r in again.results] == [asdict(r) for r in report.results]


def test_a_quick_run_of_the_fixed_suite_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--quick` keeps the paraphrased or reply suite only: with `--suite fixed` it would run nothing and print
    empty tables, so it says so instead, from the command line and from `run_suites`, creating nothing."""
    work = tmp_path / "work"
    assert cli.main(["bench-planted", "--quick", "--suite", "fixed", "--work", str(work)]) == 2
    assert "selects nothing of --suite fixed" in capsys.readouterr().err
    with pytest.raises(InputError, match="--quick .* selects nothing of --suite fixed"):
        run_suites(work, AnalyzeConfig(), suite="fixed", quick=True, pair=_slice(tmp_path))
    assert not work.exists()


def test_ablation_runs_only_where_the_switch_exists() -> None:
    ablated = ablation_config(AnalyzeConfig())
    if hasattr(AnalyzeConfig(), "sentence_features"):
        assert ablated is not None and ablated.sentence_features is False
    else:
        assert ablated is None
