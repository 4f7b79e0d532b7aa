"""Labeler calibration: the labeler against a person's hand labels, per checkpoint, and the held-out delta
corrected for the labeler's errors with a confidence interval that carries the uncertainty of both samples.

The hand sample is drawn within strata of (checkpoint, labeler verdict) (`queries.label_candidates` takes them
in turn). Per checkpoint c, with P_c the labeler's weighted share of 'yes' over its held-out sample (the
judge's sampling weights; 1 for a verifier) and a_cv the weighted share of the person's 'yes' among hand
labels of verdict v, the corrected prevalence is

    theta_c = P_c a_c1 + (1 - P_c) a_c0

the double-sampling estimator (Tenenbein 1970). It is prediction-powered inference (PPI; Angelopoulos et
al. 2023) with the rectifier weighted by stratum: the labeler's verdict is constant within a stratum, so PPI++'s
power-tuning weight drops out. Its variance (delta method) is
(a_c1 - a_c0)^2 P_c (1 - P_c) / N_c + P_c^2 var(a_c1) + (1 - P_c)^2 var(a_c0), N_c the labeler sample's Kish
effective size; the checkpoints' samples are independent, so the delta's variances add. Sensitivity and
specificity per checkpoint follow by Bayes' rule: P_c a_c1 / theta_c and (1 - P_c)(1 - a_c0) / (1 - theta_c).
Methods and assumptions: docs/statistics.md ("Labeler error").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import NamedTuple

import numpy as np
import polars as pl
from scipy import stats

from engine.errors import InputError
from engine.hypotheses.lifecycle import label, open_session
from engine.hypotheses.population import Population
from engine.hypotheses.provenance import SPLIT_NAMES, tested_split
from engine.store import Store
from engine.store.queries import testing
from engine.study import last_config

# Hand labels needed in each (checkpoint, verdict) stratum the labeler uses: with one, a stratum's share has no
# variance estimate at all.
MIN_PER_STRATUM = 2
CONFIDENCE = 0.95


class _Counts(NamedTuple):
    """A hand sample against the labeler: person yes & labeler yes, person no & labeler yes, and so on."""

    tp: int
    fp: int
    fn: int
    tn: int


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint's hand sample against the labeler, and its corrected prevalence."""

    tp: int  # hand-sample counts: person yes & labeler yes, ...
    fp: int
    fn: int
    tn: int
    labeler_rate: float | None  # P_c: the labeler's weighted share of yes over the whole held-out sample
    n_labeler: int  # segments the labeler labelled in this checkpoint
    corrected: float | None  # theta_c
    se: float | None
    sensitivity: float | None  # of the labeler, estimated for this checkpoint's held-out segments
    specificity: float | None
    missing: str | None = None  # why `corrected` is None


@dataclass(frozen=True)
class Calibration:
    hypothesis_id: int
    n: int  # segments the person labelled
    before: Checkpoint
    after: Checkpoint
    labeler_delta: float | None  # the labeler's own (uncorrected) delta: after - before of P_c
    delta: float | None  # corrected
    ci_low: float | None
    ci_high: float | None
    computed_at: str = ""

    def as_json(self) -> str:
        return json.dumps(asdict(self))


def _share(y: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """(weighted share, its variance): Kish effective size; add-one smoothing in the variance only, so that
    0 of n or n of n does not claim zero uncertainty."""
    n_eff = w.sum() ** 2 / (w**2).sum()
    share = float(w @ y / w.sum())
    smoothed = (share * n_eff + 1) / (n_eff + 2)
    return share, smoothed * (1 - smoothed) / n_eff


def checkpoint_estimate(
    verdicts: np.ndarray,
    weights: np.ndarray,
    hand_truth: np.ndarray,
    hand_verdict: np.ndarray,
    hand_weights: np.ndarray,
) -> Checkpoint:
    """One checkpoint: the labeler's verdicts and weights over its held-out sample, and the hand sample's
    truth, the labeler's verdict on it, and its weights (the same sampling weights)."""
    t, v = hand_truth.astype(bool), hand_verdict.astype(bool)
    counts = _Counts(int((t & v).sum()), int((~t & v).sum()), int((t & ~v).sum()), int((~t & ~v).sum()))
    n_labeler = int(verdicts.size)
    if n_labeler == 0:
        none = "the labeler labelled no segment here"
        return Checkpoint(*counts, labeler_rate=None, n_labeler=0, corrected=None, se=None,
                          sensitivity=None, specificity=None, missing=none)  # fmt: skip
    p = float(weights @ verdicts / weights.sum())
    var_p = p * (1 - p) * (weights**2).sum() / weights.sum() ** 2  # Kish: p(1 - p) / N_eff
    theta, var, shares = 0.0, 0.0, {True: 0.0, False: 0.0}
    for verdict, mass in ((True, p), (False, 1 - p)):
        rows = v == verdict
        if mass == 0:
            continue
        if rows.sum() < MIN_PER_STRATUM:
            why = f"needs {MIN_PER_STRATUM} hand labels where the labeler said {'yes' if verdict else 'no'}"
            return Checkpoint(*counts, labeler_rate=p, n_labeler=n_labeler, corrected=None, se=None,
                              sensitivity=None, specificity=None, missing=f"{why} (has {int(rows.sum())})")  # fmt: skip
        shares[verdict], share_var = _share(t[rows].astype(np.float64), hand_weights[rows])
        theta += mass * shares[verdict]
        var += mass**2 * share_var
    var += (shares[True] - shares[False]) ** 2 * var_p
    sensitivity = p * shares[True] / theta if theta > 0 else None
    specificity = (1 - p) * (1 - shares[False]) / (1 - theta) if theta < 1 else None
    return Checkpoint(*counts, labeler_rate=p, n_labeler=n_labeler, corrected=theta, se=float(np.sqrt(var)),
                      sensitivity=sensitivity, specificity=specificity)  # fmt: skip


def corrected_delta(
    hypothesis_id: int, n: int, before: Checkpoint, after: Checkpoint, confidence: float = CONFIDENCE
) -> Calibration:
    """after - before of the corrected prevalences, with a normal interval (independent checkpoints)."""
    labeler_delta = (
        after.labeler_rate - before.labeler_rate
        if after.labeler_rate is not None and before.labeler_rate is not None
        else None
    )
    if before.corrected is None or after.corrected is None or before.se is None or after.se is None:
        return Calibration(hypothesis_id, n, before, after, labeler_delta, None, None, None)
    delta = after.corrected - before.corrected
    half = float(stats.norm.ppf(0.5 + confidence / 2)) * float(np.hypot(before.se, after.se))
    return Calibration(hypothesis_id, n, before, after, labeler_delta, delta, delta - half, delta + half)


def calibrate(store: Store, hypothesis_id: int, *, llm: str | None = None) -> Calibration:
    """Compare the labeler with the person's labels of this hypothesis (labelling any hand-labelled segment
    the labeler has not seen: verifiers always, judges through the LLM when configured) and store the result
    (`hypothesis_calibrations`) for the TUI, MCP and report."""
    row = testing.hypothesis_spec(store, hypothesis_id)
    split = tested_split(row.provenance)
    user = store.frame(  # hand labels of the split the labeler's verdicts are tested on
        "SELECT u.segment_id, u.label AS user_label FROM user_labels u JOIN segments s USING (segment_id) "
        "JOIN rollouts r USING (rollout_key) WHERE u.hypothesis_id = ? AND r.split = ?",
        [hypothesis_id, split],
    )
    if user.height == 0:
        raise InputError(
            f"hypothesis {hypothesis_id} has no hand labels of {SPLIT_NAMES[split]} segments yet: label some first"
        )
    config = last_config(store)
    labelled = store.frame(
        "SELECT l.segment_id, l.label, l.weight, r.checkpoint, r.task_id FROM hypothesis_labels l JOIN segments s "
        "USING (segment_id) JOIN rollouts r USING (rollout_key) WHERE l.hypothesis_id = ?",
        [hypothesis_id],
    )
    known = labelled.select("segment_id", "label", "weight")
    missing = user.filter(~pl.col("segment_id").is_in(known["segment_id"].to_list()))
    if missing.height:
        fresh = _label_missing(store, row, missing, *config.checkpoints, llm)
        # A segment outside the judge's sample stands for its (checkpoint, task) stratum like those inside it.
        strata = labelled.group_by("checkpoint", "task_id").agg(pl.col("weight").first())
        fresh = fresh.join(strata, on=["checkpoint", "task_id"], how="left").with_columns(
            pl.col("weight").fill_null(1.0)
        )
        known = pl.concat([known, fresh.select("segment_id", "label", "weight")])
    sides = store.frame(
        "SELECT s.segment_id, r.checkpoint FROM segments s JOIN rollouts r USING (rollout_key) "
        "WHERE s.segment_id IN (SELECT unnest(?::BIGINT[]))",
        [user["segment_id"].to_list()],
    )
    hand = user.join(known, on="segment_id").join(sides, on="segment_id")
    estimates = []
    for checkpoint in (config.before, config.after):
        h = hand.filter(pl.col("checkpoint") == checkpoint)
        big = labelled.filter(pl.col("checkpoint") == checkpoint)
        estimates.append(
            checkpoint_estimate(
                big["label"].to_numpy().astype(bool),
                big["weight"].to_numpy(),
                h["user_label"].to_numpy().astype(bool),
                h["label"].to_numpy().astype(bool),
                h["weight"].to_numpy(),
            )
        )
    result = corrected_delta(hypothesis_id, hand.height, estimates[0], estimates[1])
    result = replace(result, computed_at=datetime.now(UTC).replace(tzinfo=None).isoformat())
    with store.transaction():
        testing.replace_calibration(store, hypothesis_id, result.as_json(), datetime.fromisoformat(result.computed_at))
    return result


def _label_missing(
    store: Store, row: testing.HypothesisSpec, missing: pl.DataFrame, before: str, after: str, llm: str | None
) -> pl.DataFrame:
    """The labeler's verdicts on hand-labelled segments it did not label, with their checkpoint and task."""
    config = last_config(store)
    if llm:
        config = replace(config, llm=llm)
    segments = store.frame(
        "SELECT s.segment_id, s.rollout_key, s.kind, s.text, s.tool_name, s.tool_args, r.checkpoint, r.task_id "
        "FROM segments s JOIN rollouts r USING (rollout_key) WHERE s.segment_id IN (SELECT unnest(?::BIGINT[]))",
        [missing["segment_id"].to_list()],
    )
    population = Population("user", before, after, pl.DataFrame(), segments)
    spec = row.spec
    session = open_session(store, config) if row.labeler == "judge" else None
    fresh = label(
        population,
        row.labeler,
        {**spec, "kinds": None} if "question" in spec else spec,
        session,
        np.random.default_rng(0),
    )
    return fresh.join(segments.select("segment_id", "checkpoint", "task_id"), on="segment_id").select(
        "segment_id", "label", "checkpoint", "task_id"
    )
