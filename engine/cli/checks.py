"""Commands that check rldiff itself: the A/A check (`check-null`) and the planted benchmark (`bench-planted`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from engine import safe_text
from engine.cli import output
from engine.cli.study import analyze_config
from engine.errors import InputError


def cmd_check_null(args: argparse.Namespace) -> int:
    import tempfile

    from engine.null_check import run_null_check
    from engine.progress import for_terminal

    work = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="rldiff-null-")) / "null.duckdb"
    result = run_null_check(
        args.input,
        work,
        analyze_config(args),
        args.checkpoint,
        for_terminal(output.err),
        fmt=args.format,
        score=args.score,
    )
    if args.json:
        output.print_json(result)
        return 0
    from engine.safe_text import clean

    def q(x: float | None) -> str:
        return "–" if x is None else f"{x:.3g}"

    output.out.print(
        f"A/A check of {clean(result.checkpoint)!r}: {result.n_rollouts} rollouts over {result.n_tasks} tasks "
        f"({result.n_shared_tasks} with rollouts on both sides) dealt into two pseudo-checkpoints.",
        markup=False,
    )
    output.out.print(
        f"validated: {len(result.validated)} of {result.n_hypotheses_tested} hypotheses tested (should be 0); "
        f"smallest hypothesis q {q(result.min_hypothesis_q)}; {result.n_deltas_tested} feature deltas tested, "
        f"smallest q {q(result.min_delta_q)} (p {q(result.min_delta_p)}), {result.n_significant_deltas} with "
        f"q < {result.fdr}",
        markup=False,
    )
    for statement in result.validated:
        output.out.print(f"  false finding: {' '.join(clean(statement).split())}", markup=False)
    verdict = "PASS: nothing validated" if result.passed else "FAIL: findings validated where none exist"
    output.out.print(f"{verdict}. Study store: {result.store}", markup=False)
    return 0


def cmd_bench_planted(args: argparse.Namespace) -> int:
    import tempfile

    from engine.planted import SAMPLE_PAIR
    from engine.planted_suites import check_selection, report_lines, run_suites
    from engine.progress import for_terminal

    if (args.before_file is None) != (args.after_file is None):
        raise InputError("give both BEFORE and AFTER files, or neither (the gpt-4o sample pair)")
    check_selection(args.suite, args.quick)
    pair = (args.before_file, args.after_file) if args.before_file else SAMPLE_PAIR
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="rldiff-planted-"))
    output.err.print(f"planting into {pair[1]} and {pair[0]}; stores and planted files in {work}", markup=False)
    report = run_suites(
        work, analyze_config(args), suite=args.suite, quick=args.quick, pair=pair, progress=for_terminal(output.err)
    )
    for line in report_lines(report):
        output.out.print(safe_text.clean(line), markup=False, highlight=False)
    return 0
