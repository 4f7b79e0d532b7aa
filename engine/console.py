"""Rich renderings of engine results for the terminal (CLI output)."""

from __future__ import annotations

import math

from rich.table import Table
from rich.text import Text

from engine.summary import SEGMENT_KINDS, StudySummary


def _pct(x: float) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def summary_table(summary: StudySummary) -> Table:
    """Checkpoints with tasks, rollouts, segments by kind, and mean reward with its 95% CI."""
    table = Table(title=Text(f"Study {summary.path}"), title_justify="left", caption_justify="left")
    table.add_column("checkpoint")
    table.add_column("tasks", justify="right")
    table.add_column("rollouts", justify="right")
    for kind in SEGMENT_KINDS:
        table.add_column(kind, justify="right")
    table.add_column("reward (95% CI)", justify="right", no_wrap=True)
    for c in summary.checkpoints:
        reward = "–" if c.reward is None else f"{c.reward.mean:.2f} ({c.reward.low:.2f}–{c.reward.high:.2f})"
        table.add_row(
            Text(c.checkpoint),
            str(c.tasks),
            str(c.rollouts),
            *(str(c.segments[k]) for k in SEGMENT_KINDS),
            reward,
        )
    table.caption = (
        f"{summary.shared_tasks} tasks shared by all checkpoints. Reward CIs treat the rollouts of a task as "
        "correlated."
    )
    return table
