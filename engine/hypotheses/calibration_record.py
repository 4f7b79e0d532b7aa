"""A stored labeler calibration (`hypothesis_calibrations`), read and described for the CLI, TUI, MCP and report.

Kept apart from `calibration.py` (which labels and computes) so that displays load only json and the store."""

from __future__ import annotations

import json
import math
from typing import Any

from engine.store.queries.base import Executor
from engine.store.queries.testing import calibration


def stored_calibration(con: Executor, hypothesis_id: int) -> dict[str, Any] | None:
    """The last calibration of a hypothesis as a dict (fields of `calibration.Calibration`), with `stale`: the
    hypothesis was re-tested (its labels replaced) since; None when never calibrated."""
    row = calibration(con, hypothesis_id)
    if row is None:
        return None
    result, stale = row
    return dict(json.loads(result)) | {"stale": stale}


def _pct(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _pts(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f}"


def calibration_lines(c: dict[str, Any]) -> list[str]:
    """Plain lines: per checkpoint the hand sample's confusion matrix and the labeler's estimated sensitivity
    and specificity, then the corrected delta and its CI beside the labeler's own delta."""
    lines = [
        f"labeler against {c['n']} hand labels"
        + (" (stale: re-tested since; calibrate again)" if c.get("stale") else "")
    ]
    for side in ("before", "after"):
        m = c[side]
        line = (
            f"{side}: TP {m['tp']}  FP {m['fp']}  FN {m['fn']}  TN {m['tn']}  labeler {_pct(m['labeler_rate'])}"
            f" (prevalence on {c.get('tested_on', 'held-out')}, {m['n_labeler']} segments)"
        )
        if m["corrected"] is None:
            line += f"; no correction: {m['missing']}"
        else:
            line += (
                f"; sensitivity {_pct(m['sensitivity'])}  specificity {_pct(m['specificity'])}; corrected "
                f"{_pct(m['corrected'])}"
            )
        lines.append(line)
    if c["delta"] is None:
        lines.append(f"corrected delta: not available (labeler's own delta {_pts(c['labeler_delta'])} pts)")
    else:
        interval = (
            f"95% CI {_pts(c['ci_low'])} to {_pts(c['ci_high'])}"
            if c["ci_low"] is not None and c["ci_high"] is not None
            else "no interval at this size"
        )
        lines.append(
            f"corrected delta {_pts(c['delta'])} pts, {interval} (labeler's own delta {_pts(c['labeler_delta'])} pts)"
        )
    return lines
