"""Labeler calibration: the labeler's precision and recall against a person's labels, its confusion matrix per
checkpoint, the held-out prevalence corrected for its errors (Rogan-Gladen, a point estimate), and the
corrected delta with a confidence interval that carries the hand sample's uncertainty (prediction-powered
inference with power tuning, PPI++; Angelopoulos et al. 2023). Methods: docs/statistics.md."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np
import polars as pl
from scipy import stats

from engine.errors import InputError
from engine.hypotheses.ledger import label, open_session, study_config
from engine.hypotheses.population import Population
from engine.store import Store


@dataclass(frozen=True)
class Calibration:
    n: int  # segments the user labelled
    true_positive: int
    false_positive: int
    false_negative: int
    true_negative: int
    precision: float | None
    recall: float | None
    specificity: float | None
    corrected_before: float | None  # held-out prevalence corrected for labeler error
    corrected_after: float | None
    by_checkpoint: dict[str, dict[str, int]] | None = None  # 'before'/'after' -> tp, fp, fn, tn
    ppi: PPIDelta | None = None


@dataclass(frozen=True)
class PPIMean:
    """A checkpoint's prevalence: prediction-powered estimate, its standard error and the tuning weight."""

    estimate: float
    se: float
    weight: float  # lambda: 0 ignores the labeler (hand labels only), 1 is plain PPI
    n_labelled: int  # labeler verdicts (weighted by the sampling weights)
    n_hand: int


@dataclass(frozen=True)
class PPIDelta:
    before: PPIMean
    after: PPIMean
    delta: float
    ci_low: float
    ci_high: float


def ppi_mean(
    predicted: np.ndarray, weights: np.ndarray, hand_true: np.ndarray, hand_predicted: np.ndarray
) -> PPIMean | None:
    """PPI++ mean of a 0/1 label: lambda * weighted mean of the labeler over its sample, plus the hand sample's
    mean of (truth - lambda * labeler), lambda chosen to minimise the variance (clipped to [0, 1]).

    predicted, weights: the labeler's verdicts on its (weighted) sample of the checkpoint's held-out segments;
    hand_true, hand_predicted: a person's labels and the labeler's verdicts on a random hand sample of the same
    segments. None with fewer than 2 hand labels. Segments are treated as independent draws (see the docs)."""
    n = hand_true.size
    if n < 2 or predicted.size == 0:
        return None
    w = weights / weights.sum()
    n_eff = 1.0 / float((w**2).sum())  # Kish effective size of the weighted labeler sample
    f_mean = float(w @ predicted)
    f_var = float(w @ (predicted - f_mean) ** 2)
    y, f = hand_true.astype(np.float64), hand_predicted.astype(np.float64)
    cov = float(np.cov(y, f)[0, 1]) if n > 1 else 0.0
    denominator = (1 + n / n_eff) * float(np.var(f, ddof=1))
    weight = float(np.clip(cov / denominator, 0.0, 1.0)) if denominator > 0 else 0.0
    rectifier = y - weight * f
    estimate = weight * f_mean + float(rectifier.mean())
    variance = weight**2 * f_var / n_eff + float(np.var(rectifier, ddof=1)) / n
    return PPIMean(estimate, float(np.sqrt(variance)), weight, int(predicted.size), n)


def ppi_delta(before: PPIMean | None, after: PPIMean | None, confidence: float = 0.95) -> PPIDelta | None:
    """after - before with a normal interval (the checkpoints' samples are independent)."""
    if before is None or after is None:
        return None
    delta = after.estimate - before.estimate
    half = float(stats.norm.ppf(0.5 + confidence / 2)) * float(np.hypot(before.se, after.se))
    return PPIDelta(before, after, delta, delta - half, delta + half)


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def corrected_prevalence(observed: float | None, recall: float | None, specificity: float | None) -> float | None:
    """Rogan-Gladen: (observed + specificity - 1) / (recall + specificity - 1), clipped to [0, 1]; None when
    the labeler is no better than chance on the user's labels."""
    if observed is None or recall is None or specificity is None or recall + specificity - 1 <= 0:
        return None
    return float(np.clip((observed + specificity - 1) / (recall + specificity - 1), 0.0, 1.0))


def calibrate(store: Store, hypothesis_id: int, *, llm: str | None = None) -> Calibration:
    """Compare the labeler with the user's labels of this hypothesis (labelling any segments the labeler has
    not seen: verifiers always, judges through the LLM when configured)."""
    row = store.frame(
        "SELECT labeler, spec, prevalence_before, prevalence_after FROM hypotheses WHERE hypothesis_id = ?",
        [hypothesis_id],
    )
    if row.height == 0:
        raise InputError(f"no hypothesis with id {hypothesis_id}")
    user = store.frame(
        "SELECT segment_id, label AS user_label FROM user_labels WHERE hypothesis_id = ?", [hypothesis_id]
    )
    if user.height == 0:
        raise InputError(f"hypothesis {hypothesis_id} has no hand labels yet: label some segments first")
    known = store.frame(
        "SELECT segment_id, label FROM hypothesis_labels WHERE hypothesis_id = ?", [hypothesis_id]
    ).filter(pl.col("segment_id").is_in(user["segment_id"].to_list()))
    missing = user.filter(~pl.col("segment_id").is_in(known["segment_id"].to_list()))
    if missing.height:
        config = study_config(store)
        if llm:
            config = replace(config, llm=llm)
        segments = store.frame(
            "SELECT s.segment_id, s.rollout_key, s.kind, s.text, s.tool_name, s.tool_args, r.checkpoint, r.task_id "
            "FROM segments s JOIN rollouts r USING (rollout_key) WHERE s.segment_id IN (SELECT unnest(?::BIGINT[]))",
            [missing["segment_id"].to_list()],
        )
        population = Population("user", config.before, config.after, pl.DataFrame(), segments)
        spec = json.loads(row["spec"][0])
        session = open_session(store, config) if row["labeler"][0] == "judge" else None
        fresh = label(
            population,
            row["labeler"][0],
            {**spec, "kinds": None} if "question" in spec else spec,
            session,
            np.random.default_rng(0),
        )
        known = pl.concat([known, fresh.select("segment_id", "label")])
    both = user.join(known, on="segment_id")
    by_checkpoint, ppi = _per_checkpoint(store, hypothesis_id, both)
    u, m = both["user_label"].to_numpy(), both["label"].to_numpy()
    tp, fp = int((u & m).sum()), int((~u & m).sum())
    fn, tn = int((u & ~m).sum()), int((~u & ~m).sum())
    recall, specificity = _ratio(tp, tp + fn), _ratio(tn, tn + fp)
    before, after = row["prevalence_before"][0], row["prevalence_after"][0]
    return Calibration(
        both.height,
        tp,
        fp,
        fn,
        tn,
        _ratio(tp, tp + fp),
        recall,
        specificity,
        corrected_prevalence(before, recall, specificity),
        corrected_prevalence(after, recall, specificity),
        by_checkpoint,
        ppi,
    )


def _per_checkpoint(
    store: Store, hypothesis_id: int, both: pl.DataFrame
) -> tuple[dict[str, dict[str, int]], PPIDelta | None]:
    """Confusion matrix per checkpoint ('before'/'after') of the hand sample, and the PPI++ corrected delta."""
    config = study_config(store)
    labelled = store.frame(
        "SELECT l.segment_id, l.label, l.weight, r.checkpoint FROM hypothesis_labels l JOIN segments s "
        "USING (segment_id) JOIN rollouts r USING (rollout_key) WHERE l.hypothesis_id = ?",
        [hypothesis_id],
    )
    sides = store.frame(
        "SELECT s.segment_id, r.checkpoint FROM segments s JOIN rollouts r USING (rollout_key) "
        "WHERE s.segment_id IN (SELECT unnest(?::BIGINT[]))",
        [both["segment_id"].to_list()],
    )
    hand = both.join(sides, on="segment_id")
    matrices, means = {}, {}
    for side, checkpoint in (("before", config.before), ("after", config.after)):
        h = hand.filter(pl.col("checkpoint") == checkpoint)
        u, m = h["user_label"].to_numpy(), h["label"].to_numpy()
        matrices[side] = {"tp": int((u & m).sum()), "fp": int((~u & m).sum()),
                          "fn": int((u & ~m).sum()), "tn": int((~u & ~m).sum())}  # fmt: skip
        big = labelled.filter(pl.col("checkpoint") == checkpoint)
        means[side] = ppi_mean(big["label"].to_numpy().astype(np.float64), big["weight"].to_numpy(), u, m)
    return matrices, ppi_delta(means["before"], means["after"])
