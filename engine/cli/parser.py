"""The `rldiff` argument parser: every command, its options and help, and the handler it runs."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from engine.cli.checks import cmd_bench_planted, cmd_check_null
from engine.cli.hypothesis import (
    cmd_hypothesis_add,
    cmd_hypothesis_calibrate,
    cmd_hypothesis_decide,
    cmd_hypothesis_label,
    cmd_hypothesis_list,
    cmd_hypothesis_show,
    cmd_hypothesis_test,
)
from engine.cli.study import (
    cmd_analyze,
    cmd_compare,
    cmd_deltas,
    cmd_demo,
    cmd_info,
    cmd_ingest,
    cmd_mcp,
    cmd_report,
    cmd_tui,
)


def positive(value: str) -> int:
    """An argparse type: a whole number above zero."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number above 0, got {value!r}")
    return number


def analyze_options(parser: argparse.ArgumentParser, *, checkpoints: bool = True) -> None:
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
        "--sae-width", type=positive, metavar="N", help="--sae train: latents (default: sized from the data)"
    )
    group.add_argument("--sae-k", type=positive, metavar="K", help="--sae train: active latents per token (default 16)")
    group.add_argument(
        "--sae-steps", type=positive, metavar="N", help="--sae train: training steps (default: sized from the data)"
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
    analyze_options(p)

    p = command("compare", cmd_compare, "ingest a before and an after file, then analyze")
    p.add_argument("before_file")
    p.add_argument("after_file")
    p.add_argument("--store", required=True)
    p.add_argument("--format", choices=FORMATS, default="auto")
    p.add_argument("--skip-bad", action="store_true")
    p.add_argument("--score", metavar="NAME", help="Inspect logs: the scorer read as reward (default: the first)")
    analyze_options(p)

    p = command("info", cmd_info, "print the study summary")
    p.add_argument("store")
    p.add_argument("--json", action="store_true", help="as JSON, for scripts")
    p.add_argument(
        "--exploratory",
        action="store_true",
        help="a small study's whole-study ranking (it includes held-out rollouts: the showing is logged, and "
        "hypotheses you add afterwards are exploratory)",
    )

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
        choices=("all", "fixed", "paraphrased", "replies", "habits", "shifts"),
        default="all",
        help="fixed phrases, paraphrased behaviours in reasoning and tool calls (with the rate sweep), paraphrased "
        "behaviours in replies, habits rldiff was not developed on (every kind and direction, rates drawn by "
        "seed), shifts (behaviours both checkpoints say, at rates that move two- to fourfold), or all (default), "
        "on seeds --seed and +1",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="one seed (--seed), the paraphrased (or reply, habit or shift) suite and its null only",
    )
    analyze_options(p, checkpoints=False)

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
    analyze_options(p, checkpoints=False)

    p = command("demo", cmd_demo, "sample pair -> fresh store -> analyze -> TUI")
    p.add_argument("--store", default="demo.duckdb", help="store to (re)create (default demo.duckdb)")
    p.add_argument("--no-tui", action="store_true", help="stop after the analysis")
    analyze_options(p)
    return parser
