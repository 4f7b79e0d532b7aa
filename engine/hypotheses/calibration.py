"""Labeler calibration: the labeler against a person's hand labels, per checkpoint, and the held-out delta
corrected for the labeler's errors with a confidence interval that carries the uncertainty of both samples.

The estimand is the held-out test's (engine.stats.prevalence): each rollout's rate of labelled segments,
averaged within task. The hand sample is drawn within strata of (checkpoint, labeler verdict)
(`queries.label_candidates` takes them in turn); a_cv is the weighted share of the person's 'yes' among the
hand labels of checkpoint c where the labeler said v (the judge's sampling weights; 1 for a verifier). Within a
checkpoint a segment the labeler says v about is truly positive with probability a_cv, so a rollout's true rate
is, in expectation, a_c0 + (a_c1 - a_c0) y_r given its labeler rate y_r, and the corrected level is

    theta_c = a_c0 + (a_c1 - a_c0) L_c

with L_c the labeler's level (the held-out prevalence): the double-sampling estimator (Tenenbein 1970) on the
test's estimand, i.e. prediction-powered inference with the rectifier taken per verdict stratum (the labeler's
verdict is constant within one, so PPI++'s power-tuning weight drops out). The corrected delta is the held-out
effect of the corrected rollout rates; its variance adds that effect's robust variance (over tasks or rollouts,
as the test's interval; the hand shares held fixed) and the hand shares' (delta method:
L_c^2 var(a_c1) + (1 - L_c)^2 var(a_c0) per checkpoint; the samples are independent). Sensitivity and
specificity per checkpoint follow by Bayes' rule: L_c a_c1 / theta_c and (1 - L_c)(1 - a_c0) / (1 - theta_c).
Methods and assumptions: docs/statistics.md ("Labeler error").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import NamedTuple

import numpy as np
import polars as pl

from engine.errors import InputError
from engine.hypotheses.lifecycle import label, open_session
from engine.hypotheses.population import Population
from engine.hypotheses.provenance import SPLIT_NAMES, tested_on, tested_split
from engine.stats.intervals import CONFIDENCE, effect_interval
from engine.stats.prevalence import rate_effect
from engine.store import Store
from engine.store.queries import testing
from engine.study import last_config

# Hand labels needed in each (checkpoint, verdict) stratum the labeler uses: with one, a stratum's share has no
# variance estimate at all.
MIN_PER_STRATUM = 2


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
    labeler_rate: float | None  # L_c: the labeler's held-out prevalence (mean rollout rate within task)
    n_labeler: int  # segments the labeler labelled in this checkpoint
    corrected: float | None  # theta_c
    hand_se: float | None  # theta_c's standard error from the hand sample alone
    sensitivity: float | None  # of the labeler, estimated for this checkpoint's held-out segments
    specificity: float | None
    missing: str | None = None  # why `corrected` is None
    true_if_yes: float | None = None  # a_c1: the person's share of yes where the labeler said yes
    true_if_no: float | None = None  # a_c0


@dataclass(frozen=True)
class Calibration:
    hypothesis_id: int
    n: int  # segments the person labelled
    before: Checkpoint
    after: Checkpoint
    labeler_delta: float | None  # the labeler's own (uncorrected) held-out delta
    delta: float | None  # corrected
    ci_low: float | None
    ci_high: float | None
    computed_at: str = ""
    tested_on: str = "held-out"  # where the test's (and so the labeler's) levels come from (`provenance.tested_on`)

    def as_json(self) -> str:
        return json.dumps(asdict(self))


def weighted_share(y: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """(weighted share, its variance): Kish effective size; add-one smoothing in the variance only, so that
    0 of n or n of n does not claim zero uncertainty."""
    n_eff = w.sum() ** 2 / (w**2).sum()
    share = float(w @ y / w.sum())
    smoothed = (share * n_eff + 1) / (n_eff + 2)
    return share, smoothed * (1 - smoothed) / n_eff


def checkpoint_estimate(
    labeler_rate: float | None,
    n_labeler: int,
    hand_truth: np.ndarray,
    hand_verdict: np.ndarray,
    hand_weights: np.ndarray,
) -> Checkpoint:
    """One checkpoint: the labeler's held-out level L_c (None when it has none) over `n_labeler` segments, and
    the hand sample's truth, the labeler's verdict on it, and its weights (the same sampling weights)."""
    t, v = hand_truth.astype(bool), hand_verdict.astype(bool)
    counts = _Counts(int((t & v).sum()), int((~t & v).sum()), int((t & ~v).sum()), int((~t & ~v).sum()))
    if labeler_rate is None or n_labeler == 0:
        none = "the labeler labelled no segment here" if n_labeler == 0 else "no task has rollouts of both checkpoints"
        return Checkpoint(*counts, labeler_rate=None, n_labeler=n_labeler, corrected=None, hand_se=None,
                          sensitivity=None, specificity=None, missing=none)  # fmt: skip
    level = labeler_rate
    shares, variance = {True: 0.0, False: 0.0}, 0.0
    for verdict, mass in ((True, level), (False, 1 - level)):
        rows = v == verdict
        if mass == 0:
            continue  # the labeler never says this here: its stratum's share does not enter
        if rows.sum() < MIN_PER_STRATUM:
            why = f"needs {MIN_PER_STRATUM} hand labels where the labeler said {'yes' if verdict else 'no'}"
            return Checkpoint(*counts, labeler_rate=level, n_labeler=n_labeler, corrected=None, hand_se=None,
                              sensitivity=None, specificity=None, missing=f"{why} (has {int(rows.sum())})")  # fmt: skip
        shares[verdict], share_var = weighted_share(t[rows].astype(np.float64), hand_weights[rows])
        variance += mass**2 * share_var
    theta = level * shares[True] + (1 - level) * shares[False]
    sensitivity = level * shares[True] / theta if theta > 0 else None
    specificity = (1 - level) * (1 - shares[False]) / (1 - theta) if theta < 1 else None
    return Checkpoint(*counts, labeler_rate=level, n_labeler=n_labeler, corrected=theta,
                      hand_se=float(np.sqrt(variance)), sensitivity=sensitivity, specificity=specificity,
                      true_if_yes=shares[True], true_if_no=shares[False])  # fmt: skip


@dataclass(frozen=True)
class RolloutRates:
    """The labeler's held-out labels per rollout: weighted positives and weighted labelled segments, with
    each rollout's checkpoint and task."""

    counts: np.ndarray
    totals: np.ndarray
    is_after: np.ndarray
    task: np.ndarray

    def levels(self, corrections: tuple[Checkpoint, Checkpoint] | None = None) -> tuple[float, float, float, float]:
        """(before, after, standard error of after - before, its degrees of freedom): the labeler's levels, or,
        with each checkpoint's hand shares (`corrections`, both corrected), the corrected rates' (a_c0 +
        (a_c1 - a_c0) y_r). NaN without a shared task."""
        counts = self.counts
        if corrections is not None:
            a0, a1 = (np.where(self.is_after, getattr(corrections[1], f), getattr(corrections[0], f))
                      for f in ("true_if_no", "true_if_yes"))  # fmt: skip
            counts = a0 * self.totals + (a1 - a0) * self.counts
        # one claim's (n, 1) totals, as `validate` passes them: its rollouts with labelled segments
        fit = rate_effect(counts[:, None], self.totals[:, None], self.is_after, self.task)
        if fit is None:
            return (np.nan,) * 4
        before, after = fit.levels.standardised()
        return float(before[0]), float(after[0]), float(fit.effect.se[0]), fit.effect.df


def corrected_delta(
    hypothesis_id: int,
    n: int,
    before: Checkpoint,
    after: Checkpoint,
    rates: RolloutRates,
    confidence: float = CONFIDENCE,
) -> Calibration:
    """after - before of the corrected levels, with an interval adding the corrected rates' sampling variance
    (`rates`, as the held-out test's interval) and the hand shares' (independent samples)."""
    labeler_delta = (
        after.labeler_rate - before.labeler_rate
        if after.labeler_rate is not None and before.labeler_rate is not None
        else None
    )
    if before.corrected is None or after.corrected is None or before.hand_se is None or after.hand_se is None:
        return Calibration(hypothesis_id, n, before, after, labeler_delta, None, None, None)
    delta = after.corrected - before.corrected
    se_rates, df = rates.levels((before, after))[2:]
    se = float(np.sqrt(se_rates**2 + before.hand_se**2 + after.hand_se**2))
    low, high = (float(x[0]) for x in effect_interval(np.array([delta]), np.array([se]), df, confidence))
    finite = bool(np.isfinite(low) and np.isfinite(high))
    return Calibration(
        hypothesis_id, n, before, after, labeler_delta, delta, low if finite else None, high if finite else None
    )


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
    labelled = store.frame(  # the labeler's labels its held-out test counted
        "SELECT l.segment_id, l.label, l.weight, r.rollout_key, r.checkpoint, r.task_id FROM hypothesis_labels l "
        "JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key) WHERE l.hypothesis_id = ? "
        "AND r.split = ? AND r.checkpoint IN (?, ?)",
        [hypothesis_id, split, *config.checkpoints],
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
    rates = _rollout_rates(labelled, config.checkpoints[1])
    levels = rates.levels()[:2]
    estimates = []
    for checkpoint, level in zip(config.checkpoints, levels, strict=True):
        h = hand.filter(pl.col("checkpoint") == checkpoint)
        estimates.append(
            checkpoint_estimate(
                level if np.isfinite(level) else None,
                labelled.filter(pl.col("checkpoint") == checkpoint).height,
                h["user_label"].to_numpy().astype(bool),
                h["label"].to_numpy().astype(bool),
                h["weight"].to_numpy(),
            )
        )
    result = corrected_delta(hypothesis_id, hand.height, estimates[0], estimates[1], rates)
    now = datetime.now(UTC).replace(tzinfo=None).isoformat()
    result = replace(result, computed_at=now, tested_on=tested_on(row.provenance))
    with store.transaction():
        testing.replace_calibration(store, hypothesis_id, result.as_json(), datetime.fromisoformat(result.computed_at))
    return result


def _rollout_rates(labelled: pl.DataFrame, after: str) -> RolloutRates:
    """Per rollout of `labelled` (segment labels with weight, rollout_key, checkpoint and task_id): its
    weighted positives and labelled segments."""
    per = labelled.group_by("rollout_key", "checkpoint", "task_id").agg(
        counts=(pl.col("weight") * pl.col("label").cast(pl.Float64)).sum(), totals=pl.col("weight").sum()
    )
    task = np.unique(per["task_id"].to_numpy(), return_inverse=True)[1].ravel()
    return RolloutRates(
        per["counts"].to_numpy(), per["totals"].to_numpy(), (per["checkpoint"] == after).to_numpy(), task
    )


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
