"""The LLM judge: a yes/no question about one segment, blind to the checkpoint, on a budgeted sample.

When a hypothesis has more held-out segments than the budget, a sample stratified by checkpoint and task is
judged, each labelled segment weighted by the inverse of its stratum's sampling fraction, so the prevalence
estimate (and the permutation test on weighted counts) stays unbiased for the whole held-out split.
"""

from __future__ import annotations

import logging

import numpy as np
import polars as pl

from engine.hypotheses.ngrams import two_proportion_z
from engine.hypotheses.population import Population
from engine.llm.client import LLMFailure, LLMRequest
from engine.llm.fence import fence
from engine.llm.session import LLMSession
from engine.llm.templates import render

log = logging.getLogger(__name__)

JUDGE_BUDGET = 400  # segments judged per hypothesis at most
JUDGE_SCHEMA = {
    "type": "object",
    "required": ["answer", "evidence"],
    "properties": {
        "answer": {"type": "boolean", "description": "yes (true) or no (false)"},
        "evidence": {"type": "string", "description": "the shortest span of the segment that decided it"},
    },
}


def stratified_sample(segments: pl.DataFrame, budget: int, rng: np.random.Generator) -> pl.DataFrame:
    """At most `budget` segments, allocated to (checkpoint, task) strata in proportion to their size (at
    least one each while the budget allows); adds `weight` = stratum size / stratum sample size."""
    if segments.height <= budget:
        return segments.with_columns(weight=pl.lit(1.0))
    strata = segments.group_by("checkpoint", "task_id").agg(pl.len().alias("size")).sort("checkpoint", "task_id")
    sizes = strata["size"].to_numpy()
    share = sizes / sizes.sum() * budget
    take = np.minimum(sizes, np.maximum(1, np.floor(share))).astype(int)
    # Hand out what flooring left, to the strata with the largest remainders; trim if the 1-minimum overshot.
    order = np.argsort(-(share - np.floor(share)), kind="stable")
    for i in order:
        if take.sum() >= budget:
            break
        if take[i] < sizes[i]:
            take[i] += 1
    for i in order[::-1]:
        if take.sum() <= budget:
            break
        if take[i] > 1:
            take[i] -= 1
    picked = []
    for (checkpoint, task_id, size), n in zip(strata.iter_rows(), take, strict=True):
        members = segments.filter((pl.col("checkpoint") == checkpoint) & (pl.col("task_id") == task_id))
        rows = rng.choice(size, size=int(n), replace=False)
        picked.append(members[np.sort(rows)].with_columns(weight=pl.lit(size / n)))
    return pl.concat(picked).sort("segment_id")


def judge_requests(question: str, population: pl.DataFrame) -> list[LLMRequest]:
    """One request per segment: the question in the shared (cached) system prefix, the fenced segment after."""
    system = render("judge_system", question=question)
    return [
        LLMRequest(
            system=system,
            user=render("judge_user", kind=v.kind, segment=fence(v.text, "segment")),
            schema=JUDGE_SCHEMA,
            max_tokens=300,
        )
        for v in Population.views(population)
    ]


def judge_labels(
    session: LLMSession,
    question: str,
    segments: pl.DataFrame,
    rng: np.random.Generator,
    budget: int = JUDGE_BUDGET,
) -> pl.DataFrame:
    """segment_id, label, evidence, weight for a stratified sample of `segments` (see module doc).

    Segments whose answer failed are dropped and their stratum's weights re-spread over the rest.
    """
    sample = stratified_sample(segments, budget, rng)
    sample = sample[rng.permutation(sample.height)]  # no checkpoint order for the judge to pick up
    answers = session.ask_many(judge_requests(question, sample))
    results = [None if isinstance(a, LLMFailure) else a for a in answers]
    ok = [r is not None for r in results]
    failed = len(ok) - sum(ok)
    if failed:
        log.warning("judge: %d of %d segments got no usable answer", failed, len(ok))
    labelled = sample.with_columns(
        label=pl.Series([bool(r.data["answer"]) if r is not None else False for r in results]),
        evidence=pl.Series([str(r.data["evidence"]) or None if r is not None else None for r in results]),
        ok=pl.Series(ok),
    )
    stratum = ["checkpoint", "task_id"]
    sizes = segments.group_by(stratum).agg(pl.len().alias("stratum_size"))
    return (
        labelled.filter(pl.col("ok"))
        .join(sizes, on=stratum)
        .with_columns(weight=pl.col("stratum_size") / pl.len().over(stratum))
        .select("segment_id", "label", "evidence", pl.col("weight").cast(pl.Float64))
        .sort("segment_id")
    )


def weighted_z(labels: pl.DataFrame, segments: pl.DataFrame, after: str) -> tuple[float, float]:
    """(delta, z) of after- minus before-checkpoint share of yes over judge `labels` (segment_id, label,
    weight) of `segments` (segment_id, checkpoint): weighted shares, the pooled two-proportion z on Kish
    effective sizes (the sample's weights make it less informative than its size says)."""
    joined = labels.join(segments.select("segment_id", "checkpoint"), on="segment_id")
    share, size = {}, {}
    for side, rows in (("after", joined.filter(pl.col("checkpoint") == after)),
                       ("before", joined.filter(pl.col("checkpoint") != after))):  # fmt: skip
        w, y = rows["weight"].to_numpy(), rows["label"].to_numpy().astype(np.float64)
        share[side] = float(w @ y / w.sum()) if w.size else 0.0
        size[side] = float(w.sum() ** 2 / (w**2).sum()) if w.size else 0.0
    z = two_proportion_z(
        share["after"] * size["after"], size["after"], share["before"] * size["before"], size["before"]
    )
    return share["after"] - share["before"], z
