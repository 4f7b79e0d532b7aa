"""The `rldiff` command line (DESIGN.md §2). Exit codes: 0 ok, 2 bad input or usage, 1 internal error."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from engine import safe_text
from engine.errors import InputError, RldiffError

if TYPE_CHECKING:  # the CLI imports what a command needs when it runs, so `rldiff tui` starts fast
    from engine.config import AnalyzeConfig
    from engine.ingest import IngestResult
    from engine.store import Store

log = logging.getLogger("rldiff")
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

SAMPLE_DATA = Path(__file__).resolve().parent.parent / "sample_data"
DEMO_PAIR = ("tau2-grok3/standard.jsonl.gz", "tau2-grok3/tighter.jsonl.gz")


# -- commands -----------------------------------------------------------------------------------------------


def cmd_ingest(args: argparse.Namespace) -> int:
    from engine.ingest import resolve_formats
    from engine.store import Store

    resolved = resolve_formats(list(args.files), args.format)  # every file checked before the store is opened
    with _created_or_removed(args.store), Store(args.store) as store:
        ingest_paths(store, resolved, args.checkpoint, args.skip_bad, args.score)
        print_summary(store)
    return 0


@contextmanager
def _created_or_removed(path: str) -> Iterator[None]:
    """Remove the store (and its write-ahead log) when the command that created it fails."""
    existed = Path(path).exists()
    try:
        yield
    except BaseException:
        if not existed:
            for created in (Path(path), Path(path + ".wal")):
                created.unlink(missing_ok=True)
        raise


def ingest_paths(
    store: Store, resolved: Sequence[tuple[Path, str]], checkpoint: str, skip_bad: bool, score: str | None = None
) -> None:
    """Ingest files whose formats `engine.ingest.resolve_formats` checked."""
    from engine.ingest import ingest_file
    from engine.progress import for_terminal

    name = repr(safe_text.line(checkpoint))
    for path, detected in resolved:
        result = ingest_file(
            store, path, checkpoint, detected, skip_bad=skip_bad, progress=for_terminal(err), score=score
        )
        if result.already_ingested:
            err.print(f"{path}: already ingested into checkpoint {name} (same content); nothing to do", markup=False)
            continue
        err.print(
            f"{path}: {result.rollouts} rollouts, {result.segments} segments as {result.format} into {name}",
            markup=False,
        )
        err.print(reasoning_line(result), markup=False)
        if result.warnings:
            err.print(f"{len(result.warnings)} warnings, e.g. {safe_text.line(result.warnings[0], 300)}", markup=False)
        if result.skipped:
            err.print(f"{result.skipped} bad records skipped; see {result.quarantine}", markup=False)


def reasoning_line(result: IngestResult) -> str:
    """How many assistant turns of a file carried reasoning, so a format that kept none shows at once."""
    line = f"  reasoning on {result.reasoning_turns} of {result.assistant_turns} assistant turns"
    if result.reasoning_turns == 0:
        line += f" (none found: {result.format} input without reasoning, or in a shape rldiff does not read)"
    return line


def print_summary(store: Store) -> None:
    from engine.console import exploratory_table, summary_table
    from engine.store.queries import study_summary

    summary = study_summary(store.cursor())
    out.print(summary_table(summary, str(store.path)))
    ids = [r.get("feature_id") for r in summary.exploratory]
    labels = dict(
        store.execute(
            "SELECT feature_id, label FROM features WHERE feature_id IN (SELECT unnest(?::BIGINT[]))", [ids]
        ).fetchall()
    )
    if (table := exploratory_table(summary, labels, out.width)) is not None:
        out.print(table)


def cmd_info(args: argparse.Namespace) -> int:
    from engine.store import Store

    with Store(_existing(args.store), read_only=True) as store:
        if args.json:
            from engine.store.queries import study_summary

            print_json(study_summary(store.cursor()))
        else:
            print_summary(store)
    return 0


def print_json(value: object) -> None:
    """`value` (dataclasses, frames, lists) as JSON on stdout: ASCII-escaped, so rollout text cannot drive
    the terminal."""
    import dataclasses
    import json

    import polars as pl

    def plain(v: object) -> object:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return dataclasses.asdict(v)
        if isinstance(v, pl.DataFrame):
            return v.to_dicts()
        return str(v)

    sys.stdout.write(json.dumps(value, default=plain, indent=1))
    sys.stdout.write("\n")


def _analyze_config(args: argparse.Namespace) -> AnalyzeConfig:
    from engine.config import AnalyzeConfig

    llm = AnalyzeConfig.default_llm() if args.llm is None else (None if args.llm == "none" else args.llm)
    if not 0 < args.holdout < 1:
        raise InputError(f"--holdout: expected a fraction between 0 and 1, got {args.holdout}")
    sae_options = {"--sae-width": args.sae_width, "--sae-k": args.sae_k, "--sae-steps": args.sae_steps}
    given = [name for name, value in sae_options.items() if value is not None]
    if given and args.sae != "train":
        raise InputError(f"{', '.join(given)}: only with --sae train (the SAE given by --sae {args.sae} has its size)")
    if args.concept_sae and args.no_sentence_features:
        raise InputError("--concept-sae: not with --no-sentence-features (there are no concept features then)")
    if args.sae_width is not None and args.sae_k is not None and args.sae_k > args.sae_width:
        raise InputError(f"--sae-k {args.sae_k}: more active latents than the {args.sae_width} of --sae-width")
    return AnalyzeConfig(
        before=getattr(args, "before", None),
        after=getattr(args, "after", None),
        reader=args.reader,
        layer=args.layer,
        sae=args.sae,
        sae_width=args.sae_width,
        sae_k=args.sae_k,
        sae_steps=args.sae_steps,
        llm=llm,
        holdout=args.holdout,
        seed=args.seed,
        device=args.device,
        max_cost=args.max_cost,
        permutations=args.permutations,
        where=args.where,
        sentence_features=not args.no_sentence_features,
        concept_sae=args.concept_sae,
    )


def run_analysis(store: Store, args: argparse.Namespace) -> None:
    from engine.pipeline import analyze
    from engine.progress import for_terminal

    written = analyze(store, _analyze_config(args), for_terminal(err))
    err.print("analysis done: " + ", ".join(f"{stage} {n}" for stage, n in written.items()), markup=False)


def cmd_analyze(args: argparse.Namespace) -> int:
    from engine.store import Store

    with Store(_existing(args.store)) as store:
        run_analysis(store, args)
        print_summary(store)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from engine.ingest import resolve_formats
    from engine.store import Store

    before = args.before or "before"
    after = args.after or "after"
    if before == after:
        raise InputError("--before and --after name the same checkpoint")
    before_file, after_file = resolve_formats([args.before_file, args.after_file], args.format)
    with _created_or_removed(args.store), Store(args.store) as store:
        ingest_paths(store, [before_file], before, args.skip_bad, args.score)
        ingest_paths(store, [after_file], after, args.skip_bad, args.score)
    with Store(args.store) as store:  # an analysis that fails keeps the ingested store: fix and re-run analyze
        args.before, args.after = before, after
        run_analysis(store, args)
        print_summary(store)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    store_path = Path(args.store)
    for stale in (store_path, store_path.with_name(store_path.name + ".wal")):
        stale.unlink(missing_ok=True)
    args.before_file, args.after_file = (str(SAMPLE_DATA / p) for p in DEMO_PAIR)
    args.before, args.after, args.store, args.format, args.skip_bad, args.score = (
        "standard",
        "tighter",
        str(store_path),
        "auto",
        False,
        None,
    )
    cmd_compare(args)
    if args.no_tui:
        return 0
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        err.print(f"not a terminal, so no TUI; open it with `rldiff tui {store_path}`", markup=False)
        return 0
    return cmd_tui(args)


def cmd_deltas(args: argparse.Namespace) -> int:
    from engine.console import deltas_table
    from engine.deltas import family_summary, ranked_deltas, testing_summary
    from engine.store import Store

    with Store(_existing(args.store), read_only=True) as store:
        rows = ranked_deltas(store, args.kind, args.top)
        if rows.height == 0:
            raise InputError(f"{args.store}: no deltas yet; run `rldiff analyze {args.store}` first")
        if args.by == "reward":
            from engine.console import reward_strata_table
            from engine.store.queries import compared_checkpoints
            from engine.strata import deltas_by_reward

            strata = deltas_by_reward(store.cursor(), rows, *compared_checkpoints(store.cursor()))
            if args.json:
                print_json({"deltas": rows.to_dicts(), "by_reward": strata.to_dicts()})
            else:
                out.print(reward_strata_table(rows, strata, out.width))
        elif args.json:
            print_json({"deltas": rows.to_dicts(), "tested": testing_summary(store), "families": family_summary(store)})
        else:
            out.print(deltas_table(rows, testing_summary(store), out.width, family_summary(store)))
    return 0


def cmd_check_null(args: argparse.Namespace) -> int:
    import tempfile

    from engine.null_check import run_null_check
    from engine.progress import for_terminal

    work = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="rldiff-null-")) / "null.duckdb"
    result = run_null_check(
        args.input, work, _analyze_config(args), args.checkpoint, for_terminal(err), fmt=args.format, score=args.score
    )
    if args.json:
        print_json(result)
        return 0
    from engine.safe_text import clean

    def q(x: float | None) -> str:
        return "–" if x is None else f"{x:.3g}"

    out.print(
        f"A/A check of {clean(result.checkpoint)!r}: {result.n_rollouts} rollouts over {result.n_tasks} tasks "
        f"({result.n_shared_tasks} with rollouts on both sides) dealt into two pseudo-checkpoints.",
        markup=False,
    )
    out.print(
        f"validated: {len(result.validated)} of {result.n_hypotheses_tested} hypotheses tested (should be 0); "
        f"smallest hypothesis q {q(result.min_hypothesis_q)}; {result.n_deltas_tested} feature deltas tested, "
        f"smallest q {q(result.min_delta_q)} (p {q(result.min_delta_p)}), {result.n_significant_deltas} with "
        f"q < {result.fdr}",
        markup=False,
    )
    for statement in result.validated:
        out.print(f"  false finding: {' '.join(clean(statement).split())}", markup=False)
    verdict = "PASS: nothing validated" if result.passed else "FAIL: findings validated where none exist"
    out.print(f"{verdict}. Study store: {result.store}", markup=False)
    return 0


def cmd_hypothesis_list(args: argparse.Namespace) -> int:
    from engine.store import Store
    from engine.store.queries import hypotheses

    with Store(_existing(args.store), read_only=True) as store:
        rows = hypotheses(store.cursor(), status=args.status)
    if args.json:
        print_json(rows)
        return 0
    from rich.text import Text

    from engine.safe_text import clean

    for h in rows:  # one line each, cut at the terminal's width
        q = "–" if h.q_value is None else f"{h.q_value:.3g}"
        line = f"{h.hypothesis_id:>4} {h.status:<12} q {q:<8} {' '.join(clean(h.statement).split())}"
        out.print(Text(line, no_wrap=True, overflow="ellipsis"))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from engine.report import write_report
    from engine.store import Store

    if Path(args.output).suffix.lower() not in (".md", ".html", ".htm"):
        raise InputError(f"-o {args.output}: expected a .md or .html file")
    with Store(_existing(args.store), read_only=True) as store:
        write_report(store, Path(args.output))
    err.print(f"wrote {args.output}", markup=False)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from engine.mcp_server import serve

    serve(_existing(args.store))
    return 0


def cmd_hypothesis_add(args: argparse.Namespace) -> int:
    from engine.hypotheses.lifecycle import add_hypothesis
    from engine.progress import emit_result
    from engine.store import Store

    with Store(_existing(args.store)) as store:
        hypothesis_id = add_hypothesis(
            store,
            args.statement,
            pattern=args.pattern,
            kind=args.kind,
            judge=args.judge,
            like=args.like,
            min_similarity=args.min_similarity,
            direction=args.direction,
        )
    out.print(
        f"added hypothesis {hypothesis_id}; test it with `rldiff hypothesis test {args.store} {hypothesis_id}`",
        markup=False,
    )
    emit_result(hypothesis_id=hypothesis_id)
    return 0


def cmd_hypothesis_test(args: argparse.Namespace) -> int:
    from engine.console import validation_text
    from engine.hypotheses.lifecycle import test_hypothesis
    from engine.progress import for_terminal
    from engine.store import Store

    with Store(_existing(args.store)) as store:
        out.print(validation_text(test_hypothesis(store, args.id, llm=args.llm, progress=for_terminal(err))))
    return 0


def cmd_hypothesis_decide(args: argparse.Namespace) -> int:
    from engine.hypotheses.lifecycle import decide
    from engine.store import Store

    with Store(_existing(args.store)) as store:
        decide(store, args.id, None if args.decision == "undecided" else args.decision, args.note)
    return 0


def cmd_hypothesis_label(args: argparse.Namespace) -> int:
    from engine.hypotheses.lifecycle import add_user_label
    from engine.store import Store

    with Store(_existing(args.store)) as store:
        add_user_label(store, args.id, args.segment, args.label == "yes")
    return 0


def cmd_hypothesis_calibrate(args: argparse.Namespace) -> int:
    from engine.console import calibration_text
    from engine.hypotheses.calibration import calibrate
    from engine.store import Store

    with Store(_existing(args.store)) as store:
        out.print(calibration_text(args.id, calibrate(store, args.id, llm=args.llm)))
    return 0


def cmd_hypothesis_show(args: argparse.Namespace) -> int:
    from rich.text import Text

    from engine.hypotheses.calibration_record import calibration_lines, stored_calibration
    from engine.hypotheses.exposure import record_heldout_view
    from engine.safe_text import clean
    from engine.store import Store
    from engine.store.queries import hypothesis, hypothesis_examples

    with Store(_existing(args.store), read_only=not args.examples) as store:
        con = store.cursor()
        h = hypothesis(con, args.id)
        if h is None:
            raise InputError(f"no hypothesis with id {args.id}")
        examples = []
        if args.examples:
            record_heldout_view(con, "cli", args.id)
            examples = hypothesis_examples(con, args.id, args.examples)
        calibration = stored_calibration(con, args.id)
    q = "–" if h.q_value is None else f"{h.q_value:.3g}"
    out.print(Text(f"hypothesis {h.hypothesis_id}: {' '.join(clean(h.statement).split())}", style="bold"))
    out.print(Text(f"{h.status} (q {q}), expected {h.direction}, {h.labeler} ({h.origin})"))
    if h.reason:
        out.print(Text(clean(h.reason)))
    for line in calibration_lines(calibration) if calibration else []:
        out.print(Text("calibration: " + line))
    if not args.examples:
        err.print(
            "held-out examples not shown: --examples N shows them, and hypotheses you add afterwards are "
            "exploratory (never validated)",
            markup=False,
        )
    for e in examples:
        s = e.segment
        tag = "held-out" if e.split == "heldout" else (e.split or "?")
        out.print(Text(f"[{tag}] {clean(s.checkpoint)} {clean(s.rollout_id)[:24]} {s.kind}: ", style="dim"), end="")
        out.print(Text(" ".join(clean(s.text).split())[:300]))
    return 0


def cmd_bench_planted(args: argparse.Namespace) -> int:
    import tempfile

    from engine.planted import SAMPLE_PAIR
    from engine.planted_suites import report_lines, run_suites
    from engine.progress import for_terminal

    if (args.before_file is None) != (args.after_file is None):
        raise InputError("give both BEFORE and AFTER files, or neither (the gpt-4o sample pair)")
    pair = (args.before_file, args.after_file) if args.before_file else SAMPLE_PAIR
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="rldiff-planted-"))
    err.print(f"planting into {pair[1]} and {pair[0]}; stores and planted files in {work}", markup=False)
    report = run_suites(
        work, _analyze_config(args), suite=args.suite, quick=args.quick, pair=pair, progress=for_terminal(err)
    )
    for line in report_lines(report):
        out.print(safe_text.clean(line), markup=False, highlight=False)
    return 0


def cmd_tui(args: argparse.Namespace) -> int:
    from tui.app import run

    run(_existing(args.store))
    return 0


def _existing(path: str) -> str:
    if not Path(path).is_file():
        raise InputError(f"{path}: no such store (create one with `rldiff ingest` or `rldiff compare`)")
    return path


# -- parser -------------------------------------------------------------------------------------------------


def _positive(value: str) -> int:
    """An argparse type: a whole number above zero."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number above 0, got {value!r}")
    return number


def _analyze_options(parser: argparse.ArgumentParser, *, checkpoints: bool = True) -> None:
    from engine.config import DEFAULT_READER

    group = parser.add_argument_group("analysis")
    if checkpoints:
        group.add_argument("--before", help="checkpoint compared from (default: the first ingested)")
        group.add_argument("--after", help="checkpoint compared to (default: the second ingested)")
    group.add_argument(
        "--reader",
        default=DEFAULT_READER,
        help="transformers model id or local folder (default: embedded all-MiniLM-L6-v2)",
    )
    group.add_argument("--layer", type=int, help="hidden layer the SAE reads (default: per reader)")
    group.add_argument("--sae", default="train", help="'train' (default), a local sae-lens folder, or RELEASE/SAE_ID")
    group.add_argument(
        "--sae-width", type=_positive, metavar="N", help="--sae train: latents (default: sized from the data)"
    )
    group.add_argument(
        "--sae-k", type=_positive, metavar="K", help="--sae train: active latents per token (default 16)"
    )
    group.add_argument(
        "--sae-steps", type=_positive, metavar="N", help="--sae train: training steps (default: sized from the data)"
    )
    group.add_argument(
        "--llm",
        help="Claude model id, or 'none' for the offline path "
        "(default: a Claude model when ANTHROPIC_API_KEY is set, else none)",
    )
    group.add_argument("--holdout", type=float, default=0.5, help="share held out for validation (default 0.5)")
    group.add_argument("--seed", type=int, default=0)
    group.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    group.add_argument("--max-cost", type=float, default=5.0, help="USD cap on LLM spending (default 5)")
    group.add_argument("--permutations", type=int, default=2000, help="permutations per test (default 2000)")
    group.add_argument(
        "--where",
        metavar="EXPR",
        help="study only rollouts matching this DuckDB expression over rollout columns, e.g. 'NOT timed_out'",
    )
    group.add_argument(
        "--no-sentence-features",
        action="store_true",
        help="no concept or behaviour-group features (sentence embeddings); see docs/concepts.md",
    )
    group.add_argument("--concept-sae", metavar="PATH", help="concept SAE folder (sae-lens) instead of training one")


def build_parser() -> argparse.ArgumentParser:
    from engine.ingest import FORMATS
    from engine.kinds import DECISION_FILTERS, DELTA_KINDS, DIRECTIONS, HYPOTHESIS_STATUSES, SEGMENT_KINDS

    parser = argparse.ArgumentParser(
        prog="rldiff",
        description="What did this training step change in "
        "the model's behaviour? Differential analysis of agent rollouts.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv: debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler: Callable[[argparse.Namespace], int] | None, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(handler=handler)
        return p

    p = command("ingest", cmd_ingest, "ingest rollout files into a checkpoint of a study store")
    p.add_argument("store")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--checkpoint", required=True, help="checkpoint name, e.g. before or after")
    p.add_argument("--format", choices=FORMATS, default="auto")
    p.add_argument("--skip-bad", action="store_true", help="quarantine bad records and ingest the rest")
    p.add_argument("--score", metavar="NAME", help="Inspect logs: the scorer read as reward (default: the first)")

    p = command("analyze", cmd_analyze, "run features, deltas, clusters and hypotheses on a store")
    p.add_argument("store")
    _analyze_options(p)

    p = command("compare", cmd_compare, "ingest a before and an after file, then analyze")
    p.add_argument("before_file")
    p.add_argument("after_file")
    p.add_argument("--store", required=True)
    p.add_argument("--format", choices=FORMATS, default="auto")
    p.add_argument("--skip-bad", action="store_true")
    p.add_argument("--score", metavar="NAME", help="Inspect logs: the scorer read as reward (default: the first)")
    _analyze_options(p)

    p = command("info", cmd_info, "print the study summary")
    p.add_argument("store")
    p.add_argument("--json", action="store_true", help="as JSON, for scripts")

    p = command("deltas", cmd_deltas, "print the ranked deltas (most significant first)")
    p.add_argument("store")
    p.add_argument("--kind", choices=DELTA_KINDS, help="only this segment kind")
    p.add_argument("--top", type=int, default=20, help="rows to print (default 20)")
    p.add_argument("--by", choices=("reward",), help="reward: prevalence within successes and within failures")
    p.add_argument("--json", action="store_true", help="as JSON, for scripts")

    p = command("report", cmd_report, "write the findings as markdown or self-contained HTML")
    p.add_argument("store")
    p.add_argument("-o", "--output", default="report.md", help="report.md or report.html (default report.md)")

    p = command("mcp", cmd_mcp, "serve the study to MCP clients (Claude Code, ...) over stdio")
    p.add_argument("store")

    hyp = command("hypothesis", None, "add, test and triage hypotheses")  # each action sets its own handler
    hsub = hyp.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = hsub.add_parser("add", help="add your own hypothesis")
    p.set_defaults(handler=cmd_hypothesis_add)
    p.add_argument("store")
    p.add_argument("statement")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--pattern", help="regex verifier: a segment is positive when it matches")
    how.add_argument("--judge", help="yes/no question an LLM judge answers for each segment")
    how.add_argument(
        "--like",
        action="append",
        metavar="SENTENCE",
        help="exemplar verifier (repeatable): a segment is positive when one of its sentences is this similar",
    )
    p.add_argument("--kind", choices=SEGMENT_KINDS, help="only segments of this kind")
    p.add_argument("--min-similarity", type=float, help="cosine an exemplar match needs (with --like; default 0.7)")
    p.add_argument("--direction", choices=DIRECTIONS, default="increase")
    p = hsub.add_parser("list", help="list the hypotheses with their status and q")
    p.set_defaults(handler=cmd_hypothesis_list)
    p.add_argument("store")
    p.add_argument("--status", choices=HYPOTHESIS_STATUSES)
    p.add_argument("--json", action="store_true", help="as JSON, for scripts")
    p = hsub.add_parser("test", help="validate a hypothesis on the held-out split")
    p.set_defaults(handler=cmd_hypothesis_test)
    p.add_argument("store")
    p.add_argument("id", type=int)
    p.add_argument("--llm", help="judge model (judge hypotheses only)")
    p = hsub.add_parser("decide", help="record your triage decision and note")
    p.set_defaults(handler=cmd_hypothesis_decide)
    p.add_argument("store")
    p.add_argument("id", type=int)
    p.add_argument("decision", choices=DECISION_FILTERS)
    p.add_argument("--note")
    p = hsub.add_parser("label", help="label one segment yourself, to calibrate the labeler")
    p.set_defaults(handler=cmd_hypothesis_label)
    p.add_argument("store")
    p.add_argument("id", type=int)
    p.add_argument("segment", type=int)
    p.add_argument("label", choices=("yes", "no"))
    p = hsub.add_parser("calibrate", help="the labeler against your labels: confusion matrices, corrected delta")
    p.set_defaults(handler=cmd_hypothesis_calibrate)
    p.add_argument("store")
    p.add_argument("id", type=int)
    p.add_argument("--llm", help="judge model for segments the judge has not labelled (judge hypotheses only)")
    p = hsub.add_parser("show", help="one hypothesis: its test, calibration and (on request) held-out examples")
    p.set_defaults(handler=cmd_hypothesis_show)
    p.add_argument("store")
    p.add_argument("id", type=int)
    p.add_argument(
        "--examples",
        type=int,
        default=0,
        metavar="N",
        help="show N held-out positives per checkpoint; logged: hypotheses added afterwards are exploratory",
    )

    p = command("tui", cmd_tui, "triage the study in the terminal UI")
    p.add_argument("store")

    p = command(
        "bench-planted",
        cmd_bench_planted,
        "plant known behaviours into a same-model pair, run the whole analysis, and score what it recovers",
    )
    p.add_argument("before_file", nargs="?", help="rollouts of one model (default: the gpt-4o sample pair)")
    p.add_argument("after_file", nargs="?", help="more rollouts of the same model, on the same tasks")
    p.add_argument("--work", help="folder for the planted files and stores (default: a new temp folder)")
    p.add_argument(
        "--suite",
        choices=("all", "fixed", "paraphrased"),
        default="all",
        help="fixed phrases, paraphrased behaviours (with the rate sweep), or both (default), on seeds --seed and +1",
    )
    p.add_argument("--quick", action="store_true", help="one seed (--seed), paraphrased suite and its null only")
    _analyze_options(p, checkpoints=False)

    p = command(
        "check-null",
        cmd_check_null,
        "A/A check: split one checkpoint within each task into two pseudo-checkpoints, analyse, report what "
        "validated (should be nothing)",
    )
    p.add_argument("input", metavar="STORE|FILE", help="a study store, or a rollout file of one model")
    p.add_argument("--checkpoint", help="the store's checkpoint to split (default: the first ingested)")
    p.add_argument("--store", help="where to write the pseudo-study (default: a new temp folder)")
    p.add_argument("--format", choices=FORMATS, default="auto", help="FILE's format")
    p.add_argument("--score", metavar="NAME", help="Inspect logs: the scorer read as reward (default: the first)")
    p.add_argument("--json", action="store_true", help="the result as JSON, for scripts")
    _analyze_options(p, checkpoints=False)

    p = command("demo", cmd_demo, "sample pair -> fresh store -> analyze -> TUI")
    p.add_argument("--store", default="demo.duckdb", help="store to (re)create (default demo.duckdb)")
    p.add_argument("--no-tui", action="store_true", help="stop after the analysis")
    _analyze_options(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.handler(args)
    except RldiffError as exc:  # unwrapped: FILE:LINE: field: problem stays on one line; rollout text cleaned
        sys.stderr.write(f"rldiff: {safe_text.clean(str(exc))}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("rldiff: interrupted\n")
        return 130
    except Exception as exc:  # an internal error: say so, with the trace under -vv
        log.debug("internal error", exc_info=True)
        if isinstance(exc, OSError) and exc.filename is not None:  # a path that cannot be read or written
            sys.stderr.write(f"rldiff: {safe_text.clean(str(exc.filename))}: {exc.strerror or exc}\n")
            return 2
        sys.stderr.write(
            f"rldiff: internal error: {type(exc).__name__}: {safe_text.clean(str(exc))} (run with -vv for the trace)\n"
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
