"""`rldiff hypothesis ACTION`: list, add, test, decide, label, calibrate and show hypotheses."""

from __future__ import annotations

import argparse

from engine.cli import output
from engine.errors import InputError
from engine.kinds import HELDOUT


def cmd_hypothesis_list(args: argparse.Namespace) -> int:
    from engine.store import Store
    from engine.store.queries import hypotheses

    with Store(output.existing(args.store), read_only=True) as store:
        rows = hypotheses(store.cursor(), status=args.status)
    if args.json:
        output.print_json(rows)
        return 0
    from engine.console import NO_HYPOTHESES, hypothesis_line
    from engine.hypotheses.reasons import counted

    if not rows:  # said on stderr: the listing itself stays empty for scripts
        output.err.print(
            f"no hypotheses with status {args.status}" if args.status else f"no hypotheses: {NO_HYPOTHESES}",
            markup=False,
        )
    for h in rows:  # one line each, cut at the terminal's width
        output.out.print(hypothesis_line(h))
    if rows and not args.status:  # on stderr too: stdout stays one line per hypothesis
        output.err.print(counted(rows), markup=False, highlight=False)
    return 0


def cmd_hypothesis_add(args: argparse.Namespace) -> int:
    from engine.hypotheses.lifecycle import add_hypothesis
    from engine.progress import emit_result
    from engine.store import Store

    with Store(output.existing(args.store)) as store:
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
    output.out.print(
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

    with Store(output.existing(args.store)) as store:
        output.out.print(
            validation_text(test_hypothesis(store, args.id, llm=args.llm, progress=for_terminal(output.err)))
        )
    return 0


def cmd_hypothesis_decide(args: argparse.Namespace) -> int:
    from engine.hypotheses.lifecycle import decide
    from engine.store import Store

    with Store(output.existing(args.store)) as store:
        decide(store, args.id, None if args.decision == "undecided" else args.decision, args.note)
    return 0


def cmd_hypothesis_label(args: argparse.Namespace) -> int:
    from engine.hypotheses.lifecycle import add_user_label
    from engine.store import Store

    with Store(output.existing(args.store)) as store:
        add_user_label(store, args.id, args.segment, args.label == "yes")
    return 0


def cmd_hypothesis_calibrate(args: argparse.Namespace) -> int:
    from engine.console import calibration_text
    from engine.hypotheses.calibration import calibrate
    from engine.store import Store

    with Store(output.existing(args.store)) as store:
        output.out.print(calibration_text(args.id, calibrate(store, args.id, llm=args.llm)))
    return 0


def cmd_hypothesis_show(args: argparse.Namespace) -> int:
    from rich.text import Text

    from engine.hypotheses.calibration_record import calibration_lines, stored_calibration
    from engine.hypotheses.exposure import record_heldout_view
    from engine.hypotheses.provenance import other_fold_wordings, provenance_text, tested_on
    from engine.safe_text import clean, line
    from engine.store import Store
    from engine.store.queries import hypothesis, hypothesis_examples

    with Store(output.existing(args.store), read_only=not args.examples) as store:
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
    output.out.print(Text(f"hypothesis {h.hypothesis_id}: {' '.join(clean(h.statement).split())}", style="bold"))
    output.out.print(Text(f"{h.status} (q {q}), expected {h.direction}, {h.labeler} ({h.origin})"))
    if h.reason:
        output.out.print(Text(clean(h.reason)))
    if h.same_evidence:
        output.out.print(Text(h.same_evidence.phrase()))
    output.out.print(Text("provenance: " + line(provenance_text(h), 600), style="dim"))
    for wording in other_fold_wordings(h):
        output.out.print(Text("also drafted on the other fold as: " + line(wording, 300), style="dim"))
    for fact in calibration_lines(calibration) if calibration else []:
        output.out.print(Text("calibration: " + fact))
    if not args.examples:
        output.err.print(
            f"examples ({tested_on(h.provenance)}) not shown: --examples N shows them, and hypotheses you add "
            "afterwards are exploratory (never validated)",
            markup=False,
        )
    for e in examples:
        s = e.segment
        tag = "held-out" if e.split == HELDOUT else (e.split or "?")
        output.out.print(
            Text(f"[{tag}] {clean(s.checkpoint)} {clean(s.rollout_id)[:24]} {s.kind}: ", style="dim"), end=""
        )
        output.out.print(Text(" ".join(clean(s.text).split())[:300]))
    return 0
