"""Labeler calibration: the labeler's precision and recall against a person's labels, and the held-out
prevalence corrected for the labeler's errors (Rogan-Gladen)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

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
    )
