"""Commands that build and read a study: ingest, analyze, compare, demo, info, deltas, report, mcp, tui."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from engine import safe_text
from engine.cli import output
from engine.errors import InputError

if TYPE_CHECKING:  # the CLI imports what a command needs when it runs, so `rldiff tui` starts fast
    from engine.config import AnalyzeConfig
    from engine.ingest import IngestResult
    from engine.store import Store
    from engine.store.queries import StudySummary

SAMPLE_DATA = Path(__file__).resolve().parent.parent.parent / "sample_data"
DEMO_PAIR = ("tau2-grok3/standard.jsonl.gz", "tau2-grok3/tighter.jsonl.gz")


def cmd_ingest(args: argparse.Namespace) -> int:
    from engine.ingest import resolve_formats
    from engine.store import Store

    resolved = resolve_formats(list(args.files), args.format)  # every file checked before the store is opened
    with output.created_or_removed(args.store), Store(args.store) as store:
        ingest_paths(store, resolved, args.checkpoint, args.skip_bad, args.score)
        print_summary(store)
    return 0


def ingest_paths(
    store: Store, resolved: Sequence[tuple[Path, str]], checkpoint: str, skip_bad: bool, score: str | None = None
) -> None:
    """Ingest files whose formats `engine.ingest.resolve_formats` checked."""
    from engine.ingest import ingest_file
    from engine.progress import for_terminal

    name = repr(safe_text.line(checkpoint))
    for path, detected in resolved:
        result = ingest_file(
            store, path, checkpoint, detected, skip_bad=skip_bad, progress=for_terminal(output.err), score=score
        )
        if result.already_ingested:
            output.err.print(
                f"{path}: already ingested into checkpoint {name} (same content); nothing to do", markup=False
            )
            continue
        output.err.print(
            f"{path}: {result.rollouts} rollouts, {result.segments} segments as {result.format} into {name}",
            markup=False,
        )
        output.err.print(reasoning_line(result), markup=False)
        if result.warnings:
            output.err.print(
                f"{len(result.warnings)} warnings, e.g. {safe_text.line(result.warnings[0], 300)}", markup=False
            )
        if result.skipped:
            output.err.print(f"{result.skipped} bad records skipped; see {result.quarantine}", markup=False)


def reasoning_line(result: IngestResult) -> str:
    """How many assistant turns of a file carried reasoning, so a format that kept none shows at once."""
    line = f"  reasoning on {result.reasoning_turns} of {result.assistant_turns} assistant turns"
    if result.reasoning_turns == 0:
        line += f" (none found: {result.format} input without reasoning, or in a shape rldiff does not read)"
    return line


def print_summary(store: Store, summary: StudySummary | None = None, *, pointer: bool = True) -> None:
    """The study table (of `summary`, read from `store` when None); (`pointer`) in a small study, where its
    whole-study ranking is: it is shown only on request; and once there are hypotheses, what they found."""
    from rich.text import Text

    from engine.console import findings_text, summary_table
    from engine.store.queries import hypotheses, study_summary, top_findings

    summary = summary or study_summary(store.cursor())
    output.out.print(summary_table(summary, str(store.path)))
    where = summary.exploratory_pointer(f"`rldiff info {store.path} --exploratory` shows it")
    if pointer and where:
        output.out.print(Text(safe_text.clean(where) + "."))
    rows = hypotheses(store.cursor())
    if rows or any(s.stage == "hypotheses" for s in summary.stages):  # none yet, unless the stage said why
        found = top_findings(store.cursor(), limit=None)
        output.out.print(findings_text(rows, found, summary.metrics_of("hypotheses").get("skipped"), str(store.path)))


def cmd_info(args: argparse.Namespace) -> int:
    from engine.store import Store
    from engine.store.queries import study_summary

    # --exploratory shows held-out evidence and logs it, so the store is opened for writing then only
    with Store(output.existing(args.store), read_only=not args.exploratory) as store:
        summary = study_summary(store.cursor())
        rows = exploratory_rows(store, summary) if args.exploratory else []
        if args.json:
            for stage in summary.stages:  # the ranking is held-out evidence: in the JSON only when asked for
                stage.metrics.pop("exploratory", None)
            output.print_json({**dataclasses.asdict(summary), "exploratory": rows} if args.exploratory else summary)
        else:
            print_summary(store, summary, pointer=not rows)
            if rows:
                from engine.console import exploratory_table

                output.out.print(exploratory_table(rows, output.out.width))
    return 0


def exploratory_rows(store: Store, summary: StudySummary) -> list[dict[str, object]]:
    """The small study's whole-study ranking, its showing logged (`show_exploratory`); an error if there is none."""
    from engine.hypotheses.exposure import show_exploratory

    rows = show_exploratory(store.cursor(), "cli", summary)
    if not rows:
        raise InputError(
            f"{store.path}: no exploratory ranking: it is made for small studies (split within task) by the "
            f"deltas stage; `rldiff deltas {store.path}` ranks the discovery deltas"
        )
    return rows


def analyze_config(args: argparse.Namespace) -> AnalyzeConfig:
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

    written = analyze(store, analyze_config(args), for_terminal(output.err))
    output.err.print("analysis done: " + ", ".join(f"{stage} {n}" for stage, n in written.items()), markup=False)


def cmd_analyze(args: argparse.Namespace) -> int:
    from engine.store import Store

    with Store(output.existing(args.store)) as store:
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
    with output.created_or_removed(args.store), Store(args.store) as store:
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
        output.err.print(f"not a terminal, so no TUI; open it with `rldiff tui {store_path}`", markup=False)
        return 0
    return cmd_tui(args)


def cmd_deltas(args: argparse.Namespace) -> int:
    from engine.console import deltas_table
    from engine.deltas import ranked_deltas, testing_summary
    from engine.store import Store
    from engine.store.queries.deltas import families_line, family_summary

    with Store(output.existing(args.store), read_only=True) as store:
        rows = ranked_deltas(store, args.kind, args.top)
        if rows.height == 0:
            raise InputError(f"{args.store}: no deltas yet; run `rldiff analyze {args.store}` first")
        if args.by == "reward":
            from engine.console import reward_strata_table
            from engine.store.queries import compared_checkpoints
            from engine.strata import deltas_by_reward

            before, after = compared_checkpoints(store.cursor())
            if before is None or after is None:  # deltas exist, so two checkpoints were; a store edited by hand
                raise InputError(f"{args.store}: the deltas' two checkpoints are missing")
            strata = deltas_by_reward(store.cursor(), rows, before, after)
            if args.json:
                output.print_json({"deltas": rows.to_dicts(), "by_reward": strata.to_dicts()})
            else:
                output.out.print(reward_strata_table(rows, strata, output.out.width))
        elif args.json:
            output.print_json(
                {
                    "deltas": rows.to_dicts(),
                    "tested": testing_summary(store),
                    "families": family_summary(store.cursor()),
                }
            )
        else:
            families = families_line(family_summary(store.cursor()))
            output.out.print(deltas_table(rows, testing_summary(store), output.out.width, families))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from engine.report import write_report
    from engine.store import Store

    if Path(args.output).suffix.lower() not in (".md", ".html", ".htm"):
        raise InputError(f"-o {args.output}: expected a .md or .html file")
    with Store(output.existing(args.store)) as store:  # writable: a report with held-out evidence logs the view
        write_report(store, Path(args.output))
    output.err.print(f"wrote {args.output}", markup=False)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from engine.mcp_server import serve

    serve(output.existing(args.store))
    return 0


def cmd_tui(args: argparse.Namespace) -> int:
    from tui.app import run

    run(output.existing(args.store))
    return 0
