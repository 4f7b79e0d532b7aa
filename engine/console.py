"""Rich renderings of engine results for the terminal (CLI output)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import polars as pl
from rich import box
from rich.table import Table
from rich.text import Text

from engine.kinds import SEGMENT_KINDS
from engine.store.queries import StudySummary

if TYPE_CHECKING:
    from engine.hypotheses.calibration import Calibration
    from engine.hypotheses.validate import Validation


def _pct(x: float) -> str:
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
            Text(c.checkpoint),
            str(c.n_tasks),
            str(c.n_rollouts),
            *(str(c.segments_by_kind.get(k, 0)) for k in SEGMENT_KINDS),
            reward,
        )
    table.caption = (
        f"{summary.n_shared_tasks} tasks shared by all checkpoints. Reward CIs treat the rollouts of a task as "
        "correlated."
    )
    return table


def _pts(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:+.1f}"


def deltas_table(
    rows: pl.DataFrame, tested: dict[str, int], width: int, families: dict[str, object] | None = None
) -> Table:
    """Ranked deltas: label, kind, testing family, prevalence before/after, delta in points with its CI, q
    (within the family); `families` (engine.deltas.family_summary) adds tests per family and the length change."""
    table = Table(
        title="Deltas (discovery split), most significant first",
        title_justify="left",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    numbers = (("kind", 9), ("family", 10), ("before", 6), ("after", 6), ("Δ pts (95% CI)", 19), ("q", 7))
    # the label takes what the numbers leave (each column has 2 cells of padding)
    label_width = max(16, width - sum(w + 2 for _, w in numbers) - 10)
    table.add_column("feature", no_wrap=True, overflow="ellipsis", max_width=label_width)
    for name, cells in numbers:
        table.add_column(name, justify="left" if name in ("kind", "family") else "right", no_wrap=True, min_width=cells)
    for r in rows.iter_rows(named=True):
        ci = f"{_pts(r['ci_low'])}…{_pts(r['ci_high'])}"
        table.add_row(
            Text(" ".join(r["label"].split())),  # one line: labels can hold newlines from the rollouts
            r["kind"],
            r.get("family") or "–",
            _pct(r["prevalence_before"]),
            _pct(r["prevalence_after"]),
            f"{_pts(r['delta'])} ({ci})",
            "–" if r["q_value"] is None else f"{r['q_value']:.3g}",
        )
    skipped = ", ".join(f"{n} {what}" for what, n in tested.items() if what not in ("tested", "significant"))
    table.caption = (
        f"{tested.get('tested', 0)} (feature, kind) pairs tested, {tested.get('significant', 0)} significant; "
        f"not tested: {skipped or 'none'}"
    )
    if families:
        per_family = ", ".join(
            f"{name} {n} ({families['significant_by_family'].get(name, 0)} significant)"
            for name, n in families["tested_by_family"].items()
        )
        table.caption += (
            f"\nBH within each family: {per_family}. Rollouts are {families['length_ratio']:.2f}x as long after "
            "('any' rows are adjusted for log-length; prevalence is each rollout's own rate)."
        )
    return table


def validation_text(v: Validation) -> Text:
    """One line for a hypothesis test: status, held-out prevalence before -> after, q, and why."""
    line = Text(f"hypothesis {v.hypothesis_id}: ", style="bold")
    line.append(v.status, style={"validated": "green", "rejected": "red"}.get(v.status, "yellow"))
    line.append(
        f"  held-out {_pct(v.prevalence_before)} -> {_pct(v.prevalence_after)} "
        f"(Δ {_pts(v.delta)} pts, 95% CI {_pts(v.ci_low)}…{_pts(v.ci_high)}), "
        f"q {'–' if v.q_value is None else f'{v.q_value:.3g}'}, {v.n_labeled} segments labelled\n"
    )
    line.append(v.reason)
    return line


def calibration_text(hypothesis_id: int, c: Calibration) -> Text:
    """The labeler against the user's hand labels: confusion matrix per checkpoint and the PPI++ delta."""
    line = Text(f"hypothesis {hypothesis_id}: labeler against {c.n} hand labels\n", style="bold")
    for side, m in (c.by_checkpoint or {}).items():
        sens = m["tp"] / (m["tp"] + m["fn"]) if m["tp"] + m["fn"] else math.nan
        spec = m["tn"] / (m["tn"] + m["fp"]) if m["tn"] + m["fp"] else math.nan
        line.append(
            f"  {side}: TP {m['tp']}  FP {m['fp']}  FN {m['fn']}  TN {m['tn']}  "
            f"sensitivity {_pct(sens)}  specificity {_pct(spec)}\n"
        )
    if c.ppi is None:
        line.append("corrected delta: needs at least 2 hand labels in each checkpoint")
        return line
    p = c.ppi
    line.append(
        f"corrected (PPI++): {_pct(p.before.estimate)} -> {_pct(p.after.estimate)}, "
        f"Δ {_pts(p.delta)} pts, 95% CI {_pts(p.ci_low)}…{_pts(p.ci_high)} "
        f"(labeler weight {p.before.weight:.2f} / {p.after.weight:.2f}; "
        f"{p.before.n_hand} + {p.after.n_hand} hand labels)"
    )
    return line
