"""Rich renderings of engine results for the terminal (CLI output)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import polars as pl
from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from engine.kinds import DISCOVERY, SEGMENT_KINDS
from engine.safe_text import clean, line
from engine.store.queries import HypothesisRow, StudySummary
from engine.store.queries.deltas import LEVELS_READING
from engine.store.queries.overview import EXPLORATORY_RULE, EXPLORATORY_TITLE

if TYPE_CHECKING:
    from engine.hypotheses.calibration import Calibration
    from engine.hypotheses.validate import Validation


def _pct(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def summary_table(summary: StudySummary, path: str) -> Table:
    """Checkpoints with tasks, rollouts, segments by kind, and mean reward with its 95% CI."""
    table = Table(title=Text(f"Study {path}"), title_justify="left", caption_justify="left")
    table.add_column("checkpoint")
    table.add_column("tasks", justify="right")
    table.add_column("rollouts", justify="right")
    for kind in SEGMENT_KINDS:
        table.add_column(kind, justify="right")
    table.add_column("reward (95% CI)", justify="right", no_wrap=True)
    for c in summary.checkpoints:
        reward = "–" if c.mean_reward is None else f"{c.mean_reward:.2f}"
        if c.reward_ci is not None:
            reward += f" ({c.reward_ci[0]:.2f}–{c.reward_ci[1]:.2f})"
        table.add_row(
            Text(line(c.checkpoint)),
            str(c.n_tasks),
            str(c.n_rollouts),
            *(str(c.segments_by_kind.get(k, 0)) for k in SEGMENT_KINDS),
            reward,
        )
    table.caption = (
        f"{summary.n_shared_tasks} tasks shared by all checkpoints. Reward CIs treat the rollouts of a task as "
        "correlated."
    )
    if summary.stale:
        table.caption += f"\nStale: {summary.stale_notice(path)}."
    if summary.small_study_notice():
        table.caption += f"\n{summary.small_study_notice()}."
    return table


def exploratory_table(rows: list[dict[str, Any]], width: int, top: int = 10) -> Table:
    """The first `top` rows of a small study's whole-study ranking (`engine.hypotheses.exposure.show_exploratory`),
    titled exploratory (never validated) and captioned with how they are ordered."""
    table = Table(title=EXPLORATORY_TITLE, title_justify="left", caption=EXPLORATORY_RULE + ".", box=box.SIMPLE_HEAD)
    table.caption_justify = "left"
    numbers = (("kind", 9), ("family", 10), ("before", 6), ("after", 6), ("Δ pts", 6), ("p", 7))
    label_width = _label_column(table, numbers, width)
    for r in rows[:top]:
        p = "–" if r.get("p_value") is None else f"{r['p_value']:.2g}"
        table.add_row(
            label_text(str(r.get("label")), label_width),
            str(r.get("kind")),
            str(r.get("family")),
            _pct(r.get("prevalence_before")),
            _pct(r.get("prevalence_after")),
            _pts(r.get("delta")),
            p,
        )
    return table


def _pts(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:+.1f}"


# A label wraps over at most this many lines; a longer one loses its middle (its start and end both name it).
LABEL_LINES = 4
MIN_LABEL = 12  # below this a label column is unreadable: the table then grows past the terminal instead


def elide_middle(text: str, limit: int) -> str:
    """`text` cut to `limit` characters by dropping its middle: whole words (a label's quoted phrases stay
    readable), or characters when not even its first and last words fit."""
    if len(text) <= limit:
        return text
    words = text.split(" ")
    head, tail, used = 0, len(words), 1  # words[:head] and words[tail:] are kept; `used` counts the "…"
    while head < tail:
        side = head if head <= len(words) - tail else tail - 1
        if used + len(words[side]) + 1 > limit:
            break
        used += len(words[side]) + 1
        head, tail = (head + 1, tail) if side == head else (head, tail - 1)
    if head and tail < len(words):
        return " ".join([*words[:head], "…", *words[tail:]])
    cut = (limit - 1) // 2
    return f"{text[:cut]}…{text[len(text) - (limit - 1 - cut) :]}"


def label_text(label: str | None, width: int) -> Text:
    """A feature label for a wrapping column: cleaned, on one line, elided past LABEL_LINES lines."""
    # word wrapping leaves some cells of each line empty: allow for a few per line
    return Text(elide_middle(" ".join(clean(label).split()), (width - 4) * LABEL_LINES))


def _label_column(table: Table, numbers: tuple[tuple[str, int], ...], width: int) -> int:
    """Add the label column (all the width the numbers leave, wrapping) and the number columns; the label
    column's width, for eliding."""
    table.expand, table.show_edge, table.pad_edge = True, False, False
    # each column but the first has 1 cell of padding either side and a 1-cell separator
    label_width = max(MIN_LABEL, width - sum(cells + 3 for _, cells in numbers) - 1)
    table.add_column("feature", ratio=1, min_width=MIN_LABEL, overflow="fold")
    for name, cells in numbers:
        table.add_column(name, justify="left" if name == "kind" else "right", no_wrap=True, min_width=cells)
    return label_width


def deltas_table(rows: pl.DataFrame, tested: dict[str, int], width: int, families: str = "") -> Table:
    """Ranked deltas: label, kind, testing family, prevalence before/after, delta in points with its CI, q
    (within the family); `families` (engine.store.queries.deltas.families_line) says tests per family and the
    length change."""
    table = Table(
        title="Deltas (discovery split), most significant first",
        title_justify="left",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    # the family goes under the kind (its q is within the family) so the label keeps the width at 80 columns
    numbers = (("kind", 10), ("before", 6), ("after", 6), ("Δ pts (95% CI)", 19), ("q", 7))
    label_width = _label_column(table, numbers, width)
    for r in rows.iter_rows(named=True):
        ci = f"{_pts(r['ci_low'])}…{_pts(r['ci_high'])}"
        kind = Text(line(r["kind"]))
        if r.get("family"):
            kind.append(f"\n{r['family']}", style="dim")
        table.add_row(
            label_text(r["label"], label_width),
            kind,
            *(_with_pooled(r[f"prevalence_{side}"], r.get(f"pooled_{side}")) for side in ("before", "after")),
            f"{_pts(r['delta'])} ({ci})",
            "–" if r["q_value"] is None else f"{r['q_value']:.3g}",
        )
    skipped = ", ".join(f"{n} {what}" for what, n in tested.items() if what not in ("tested", "significant"))
    table.caption = (
        f"{tested.get('tested', 0)} (feature, kind) pairs tested, {tested.get('significant', 0)} significant; "
        f"not tested: {skipped or 'none'}"
    )
    if families:
        table.caption += f"\n{families}"
    table.caption += f"\n{LEVELS_READING} Pooled is dim, beneath."
    return table


def _with_pooled(level: float | None, pooled: float | None) -> Text:
    """A prevalence with the pooled share beneath it, dim."""
    text = Text(_pct(level))
    if pooled is not None:
        text.append(f"\n{_pct(pooled)}", style="dim")
    return text


# Validated findings shown beneath the study table after an analysis (`rldiff hypothesis list` shows them all).
FINDINGS_SHOWN = 5
NO_HYPOTHESES = "`rldiff analyze` drafts them only from changes it finds; `rldiff hypothesis add` tests one of yours"


def _flags(h: HypothesisRow) -> str:
    """What a one-line listing says before a statement: its cautions, and whether it likely restates a broader
    finding (`queries.shared_evidence`)."""
    from engine.hypotheses.cautions import caution_flag

    restates = f"(same behaviour as {h.same_evidence.hypothesis_id}?) " if h.same_evidence else ""
    return caution_flag(h.provenance) + restates


def hypothesis_line(h: HypothesisRow) -> Text:
    """One hypothesis on one line, cut at the terminal's width: id, status, q, flags, the statement."""
    q = "–" if h.q_value is None else f"{h.q_value:.3g}"
    text = f"{h.hypothesis_id:>4} {h.status:<12} q {q:<8} {_flags(h)}{line(h.statement, None)}"
    return Text(text, no_wrap=True, overflow="ellipsis")


def findings_text(rows: list[HypothesisRow], found: list[HypothesisRow], skipped: str | None, store: str) -> Group:
    """Beneath the study table once hypotheses were tested: the hypotheses (`rows`) by status and why the others
    were not validated (`engine.hypotheses.reasons`), the first findings (`found`: `queries.top_findings`), and
    where the rest are. `skipped`: why the stage tested nothing, if it did not."""
    from engine.hypotheses.provenance import tested_split
    from engine.hypotheses.reasons import counted

    if not rows:
        return Group(Text(f"Findings: no hypotheses: {skipped or NO_HYPOTHESES}."))
    head = Text("Findings: ", style="bold")
    head.append(f"{counted(rows)}.")
    first = found[:FINDINGS_SHOWN]
    # a small study's finding drafted on the held-out fold is tested on the discovery one: both are "the other fold"
    tested_on = "other fold" if any(tested_split(h.provenance) == DISCOVERY for h in first) else "held-out"
    shown = Table(box=None, padding=(0, 1, 0, 0))
    for column in ("id", tested_on, "q"):
        shown.add_column(column, justify="right" if column == "id" else "left", no_wrap=True)
    shown.add_column("finding", ratio=1)
    for h in first:
        tested = f"{_pct(h.prevalence_before)} -> {_pct(h.prevalence_after)}"
        q = "–" if h.q_value is None else f"{h.q_value:.2g}"
        shown.add_row(str(h.hypothesis_id), tested, q, Text(_flags(h) + line(h.statement, None)))
    more = f", {len(found) - FINDINGS_SHOWN} more validated findings among them" if len(found) > FINDINGS_SHOWN else ""
    failed = any(h.status != "validated" for h in rows)
    report = {
        (True, True): "each finding's evidence and why the others were not validated",
        (True, False): "each finding's evidence",
        (False, True): "why each was not validated",
    }.get((bool(found), failed), "them")
    where = Text(
        f"`rldiff hypothesis list {line(store, None)}` lists all {len(rows)}{more}; `rldiff report "
        f"{line(store, None)} -o report.html` shows {report}."
    )
    return Group(head, shown, where) if found else Group(head, where)


def validation_text(v: Validation) -> Text:
    """One line for a hypothesis test: status, held-out prevalence before -> after, q, and why."""
    text = Text(f"hypothesis {v.hypothesis_id}: ", style="bold")
    text.append(v.status, style={"validated": "green", "rejected": "red"}.get(v.status, "yellow"))
    text.append(
        f"  held-out {_pct(v.prevalence_before)} -> {_pct(v.prevalence_after)} "
        f"(Δ {_pts(v.delta)} pts, 95% CI {_pts(v.ci_low)}…{_pts(v.ci_high)}), "
        f"q {'–' if v.q_value is None else f'{v.q_value:.3g}'}, {v.n_labeled} segments labelled\n"
    )
    text.append(clean(v.reason))
    return text


def reward_strata_table(rows: pl.DataFrame, strata: pl.DataFrame, width: int) -> Table:
    """The ranked deltas with their prevalence before -> after within successes and within failures."""
    table = Table(
        title="Deltas within successes and failures (discovery split; descriptive, not tested)",
        title_justify="left",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    numbers = (("kind", 9), ("Δ pts", 6), ("success", 13), ("failure", 13))
    label_width = _label_column(table, numbers, width)
    cells = {(r["feature_id"], r["kind"], r["stratum"]): r for r in strata.iter_rows(named=True)}

    def change(feature_id: int, kind: str, stratum: str) -> str:
        cell = cells.get((feature_id, kind, stratum))
        if cell is None:
            return "–"
        return f"{_pct(cell['prevalence_before'])}→{_pct(cell['prevalence_after'])}"

    for r in rows.iter_rows(named=True):
        table.add_row(
            label_text(r["label"], label_width),
            Text(line(r["kind"])),
            _pts(r["delta"]),
            change(r["feature_id"], r["kind"], "success"),
            change(r["feature_id"], r["kind"], "failure"),
        )
    table.caption = "success: reward >= 0.5; prevalence before→after among those rollouts' segments."
    return table


def calibration_text(hypothesis_id: int, c: Calibration) -> Text:
    """The labeler against the user's hand labels: confusion matrix per checkpoint and the corrected delta."""
    from dataclasses import asdict

    from engine.hypotheses.calibration_record import calibration_lines

    first, *rest = calibration_lines(asdict(c))
    text = Text(f"hypothesis {hypothesis_id}: {first}\n", style="bold")
    text.append("\n".join("  " + line for line in rest))
    return text
