"""Held-out validation: each rollout's labelled rate per checkpoint, a task-level sign-flip test when held-out
tasks are new tasks (the within-task test, "these tasks", when the split is within task), BH across every
hypothesis ever tested on the split but the current claims whose floor is above the level (Tarone), intervals
on the same estimand, each claim's floor or the minimum detectable effect at the BH level, and association
with reward. Methods: docs/statistics.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol, TypeVar

import numpy as np
import polars as pl

from engine.hypotheses.equal_length import EqualLength
from engine.hypotheses.length import equal_length_strata, words_per_turn
from engine.hypotheses.population import Population
from engine.hypotheses.reasons import (
    NO_CHANGE,
    NO_MATCH,
    NO_TASK,
    NOT_REPLICATED,
    NOTHING_LABELLED,
    OTHER_WAY,
    TOO_SMALL,
)
from engine.hypotheses.task_spread import TaskSpread
from engine.hypotheses.turn_count import TurnCount
from engine.kinds import DISCOVERY, HELDOUT, Status
from engine.stats.design import CheckpointDesign
from engine.stats.fdr import bh_qvalues
from engine.stats.intervals import CONFIDENCE, effect_interval
from engine.stats.power import minimum_detectable_effect, normal_mde
from engine.stats.prevalence import PrevalenceTest, test_prevalence
from engine.stats.rates import Contrast, effects
from engine.stats.reward import reward_association
from engine.stats.strata import feature_strata, stratified_levels, stratified_rates

# The smallest change worth claiming, in proportion: a hypothesis whose interval rules out a change this large
# in its direction is rejected as not replicated. Declared here rather than taken from the discovery delta,
# which selection inflates (the winner's curse), so a real but smaller effect is not rejected for being smaller.
MIN_EFFECT = 0.02
# How a reason names the split a hypothesis was tested on (discovery: a cross-fitted hypothesis drafted on the
# held-out fold of a small study).
TESTED_ON: dict[str, str] = {HELDOUT: "held-out", DISCOVERY: "discovery-fold"}
# Refinement budget: p-values at the Monte Carlo floor are re-drawn up to this many times n_permutations.
MAX_PERMUTATION_FACTOR = 100


@dataclass(frozen=True)
class Claim:
    """What is tested: a hypothesis and its direction. (The discovery delta is not part of it: selection
    inflates it, so no decision compares with it.)"""

    hypothesis_id: int
    direction: str  # 'increase' | 'decrease'
    about_length: bool = False  # a claim about turn length itself is not standardised over length


@dataclass(frozen=True)
class Validation:
    hypothesis_id: int
    status: Status  # 'validated' | 'rejected' | 'inconclusive' (or 'exploratory', set by the lifecycle)
    reason: str
    prevalence_before: float | None
    prevalence_after: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    q_value: float | None
    mde: float | None
    n_labeled: int
    reward_assoc: float | None
    scope: str = "these tasks"  # what the test speaks for: 'these tasks' or 'new tasks'
    floor: float | None = None  # smallest p-value the held-out design allows
    equal_length: EqualLength | None = None  # the test within turn-length strata, where it applies
    turn_count: TurnCount | None = None  # the test of turns like it a rollout
    task_spread: TaskSpread | None = None  # which tasks the change comes from


def _num(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def labelled_segments(population: Population, labels: pl.DataFrame, ids: list[int]) -> pl.DataFrame:
    """Each label of the claims `ids` with row (its rollout's index in `population.rollout_arrays()` order),
    column (its claim's index in `ids`), kind, words, weight and label."""
    keys = population.rollout_arrays()[0]
    segments = population.segments.select(
        "segment_id", "rollout_key", "kind", words=pl.col("text").fill_null("").str.count_matches(r"\S+")
    )
    joined = labels.filter(pl.col("hypothesis_id").is_in(ids)).join(segments, on="segment_id")
    row = pl.DataFrame({"rollout_key": keys, "row": np.arange(keys.size)})
    column = pl.DataFrame({"hypothesis_id": ids, "column": np.arange(len(ids))})
    return joined.join(row, on="rollout_key").join(column, on="hypothesis_id")


def rollout_matrices(labelled: pl.DataFrame, n_rollouts: int, n_claims: int) -> tuple[np.ndarray, ...]:
    """(counts, totals, n_labeled) with counts/totals of shape (n_rollouts, n_claims): weighted positive and
    weighted labelled segments per rollout, from `labelled_segments`."""
    counts = np.zeros((n_rollouts, n_claims))
    totals = np.zeros((n_rollouts, n_claims))
    r, c = labelled["row"].to_numpy(), labelled["column"].to_numpy()
    w = labelled["weight"].to_numpy()
    np.add.at(totals, (r, c), w)
    np.add.at(counts, (r, c), w * labelled["label"].to_numpy())
    return counts, totals, np.bincount(c, minlength=n_claims)


def validate(
    population: Population,
    labels: pl.DataFrame,
    claims: list[Claim],
    rng: np.random.Generator,
    *,
    fdr: float = 0.05,
    n_permutations: int = 2000,
    new_tasks: bool = False,
    previous_p: list[float] | None = None,
) -> list[Validation]:
    """Test every claim on held-out labels (hypothesis_id, segment_id, label, weight), one family for BH (less
    the claims whose floor is above `fdr`: they cannot be validated, have no q and are not counted).

    new_tasks: held-out tasks are not discovery tasks (split by task or environment): sign-flip over tasks.
    previous_p: p-values of hypotheses tested on this split before and no longer among the claims; they stay
    in the BH count. validated: q < fdr in the claimed direction. rejected: q < fdr the other way; or the
    labeler matched nothing; or the interval rules out MIN_EFFECT in the claimed direction. inconclusive
    otherwise, saying what the design could detect (or that it cannot reach the level at all).
    """
    if not claims:
        return []
    ids = [c.hypothesis_id for c in claims]
    keys, is_after, task, reward = population.rollout_arrays()
    labelled = labelled_segments(population, labels, ids)
    counts, totals, n_labeled = rollout_matrices(labelled, keys.size, len(ids))
    run_test = partial(
        test_prevalence,
        rng=rng,
        n_permutations=n_permutations,
        new_tasks=new_tasks,
        fdr=fdr,
        max_permutations=MAX_PERMUTATION_FACTOR * n_permutations,
    )
    test = run_test(counts, totals, is_after, task)
    equal = _equal_length(labelled, claims, totals, is_after, task, run_test)
    # its own stream (spawning leaves `rng`'s draws as they were), and no refinement: its p only decides a
    # caution at the FDR level, and the turns' columns need their means only
    turn_test = partial(run_test, rng=rng.spawn(1)[0], max_permutations=None)
    per_rollout = _turn_count(counts, totals, is_after, task, turn_test)
    signs = [1.0 if claim.direction == "increase" else -1.0 for claim in claims]
    spreads = _task_spread(test, population.task_ids(), signs)
    earlier = np.asarray(previous_p or [], dtype=np.float64)
    # Tarone: a claim whose floor is above the level cannot be validated and is not counted in BH's m (its
    # floor does not depend on the checkpoint labels: the test conditions on it); earlier tests all stay counted
    reachable = test.floor <= fdr
    q = np.full(len(claims), np.nan)
    q[reachable] = bh_qvalues(np.concatenate([test.p_value[reachable], earlier]))[: int(reachable.sum())]
    m = int(np.isfinite(test.p_value[reachable]).sum() + np.isfinite(earlier).sum())
    mde = _mde(counts, totals, is_after, task, new_tasks, alpha=fdr / max(m, 1))
    # Within checkpoint and task: each checkpoint's association, pooled.
    strata = np.unique(np.stack([task, is_after]), axis=1, return_inverse=True)[1].ravel()
    fires = np.where(totals > 0, counts > 0, 0.0)
    assoc = reward_association(fires, reward, strata)
    where = TESTED_ON.get(population.split, population.split)
    decided = [
        _decide(
            n_labeled[j], test.prevalence_before[j], test.prevalence_after[j], test.delta[j], test.ci_low[j],
            test.ci_high[j], test.p_value[j], q[j], m, mde[j], test.floor[j], signs[j], fdr, test.scope, where,
        )
        for j in range(len(claims))
    ]  # fmt: skip
    validated = [status == "validated" for status, _ in decided]
    equal = _caution_q(equal, validated, signs)
    per_rollout = _caution_q(per_rollout, validated, signs)
    out = []
    for j, claim in enumerate(claims):
        before, after, delta = test.prevalence_before[j], test.prevalence_after[j], test.delta[j]
        sign = signs[j]
        status, reason = decided[j]
        at_length, reason = _with_caution(equal[j], status == "validated", sign, fdr, reason)
        turns, reason = _with_caution(per_rollout[j], status == "validated", sign, fdr, reason)
        spread = spreads[j]
        if spread is not None and status == "validated" and spread.rests_on_one_task(sign):
            spread = replace(spread, caution=True)
            reason = f"caution, {spread.caution_text(sign)}; {reason}"
        out.append(
            Validation(
                claim.hypothesis_id,
                status,
                reason,
                _num(before),
                _num(after),
                _num(delta),
                _num(test.ci_low[j]),
                _num(test.ci_high[j]),
                _num(test.p_value[j]),
                _num(q[j]),
                _num(mde[j]),
                int(n_labeled[j]),
                _num(assoc[j]),
                test.scope,
                _num(test.floor[j]),
                at_length,
                turns,
                spread,
            )
        )
    return out


def _task_spread(test: PrevalenceTest, task_ids: np.ndarray, signs: list[float]) -> list[TaskSpread | None]:
    """Each claim's `TaskSpread` from the main test's per-task levels: a task's part of the delta is its
    weighted change, weight (after - before), over the total weight; the top task is the one whose part is
    largest in the claim's direction, and the rest delta is the other tasks' weighted mean change."""
    if test.levels is None or test.tasks is None:
        return [None] * len(signs)
    parts, weights = test.levels.contributions(), test.levels.weight
    out: list[TaskSpread | None] = []
    for j, sign in enumerate(signs):
        has = weights[:, j] > 0
        part, weight, tasks = parts[has, j], weights[has, j], task_ids[test.tasks[has]]
        if part.size == 0 or not np.isfinite(test.delta[j]):
            out.append(None)
            continue
        moved = sign * part
        top = int(np.argmax(moved))
        rest = weight.sum() - weight[top]
        rest_delta = float((part.sum() - part[top]) / rest) if rest > 0 else None
        toward, against = int((moved > 0).sum()), int((moved < 0).sum())
        out.append(TaskSpread(part.size, toward, against, str(tasks[top]), float(test.delta[j]), rest_delta))
    return out


def _equal_length(
    labelled: pl.DataFrame,
    claims: list[Claim],
    totals: np.ndarray,
    is_after: np.ndarray,
    task: np.ndarray,
    run_test: Callable[..., PrevalenceTest],
) -> list[EqualLength | None]:
    """Each claim's equal-length test (`engine.hypotheses.length`), None where it does not apply, on the
    rollouts and design of the main test."""
    has = np.flatnonzero((totals > 0).any(axis=1))
    design = CheckpointDesign.from_labels(is_after[has], task[has])
    out: list[EqualLength | None] = [None] * len(claims)
    if design.n_tasks == 0:
        return out
    rows = has[design.keep]
    by_claim = labelled.partition_by("column", as_dict=True)
    columns, strata = [], []
    for j, claim in enumerate(claims):
        mine = by_claim.get((j,))
        parts = None if claim.about_length or mine is None else equal_length_strata(mine, rows)
        if parts is not None:
            columns.append(j)
            strata.append(parts)
    if not columns:
        return out
    rates = np.column_stack([stratified_rates(*parts, design)[:, 0] for parts in strata])
    test = run_test(rates, np.ones(rows.size), is_after[rows], task[rows])
    contrast = Contrast(design)
    for i, j in enumerate(columns):
        # the delta over each stratum's rollouts with turns of its length (`stratified_levels`), not x'y / x'x
        scale = stratified_levels(*strata[i], design).effect_scale(contrast.xx)
        effect = effects(contrast, rates[:, [i]], by_task=not design.few_tasks, scale=scale)
        low, high = effect_interval(effect.estimate, effect.se, effect.df, CONFIDENCE)
        words = words_per_turn(by_claim[(j,)], is_after)
        if np.isfinite(effect.estimate[0]) and np.isfinite(test.p_value[i]):
            out[j] = EqualLength(float(effect.estimate[0]), _num(low[0]), _num(high[0]), float(test.p_value[i]), *words)
    return out


def _turn_count(
    counts: np.ndarray,
    totals: np.ndarray,
    is_after: np.ndarray,
    task: np.ndarray,
    run_test: Callable[..., PrevalenceTest],
) -> list[TurnCount | None]:
    """Each claim's change in turns like it a rollout (`TurnCount`), on the rollouts and design of the main
    test: each rollout with labelled turns contributes its count (and its turns, for the turns a rollout each
    checkpoint has); as in the main test, the means are over the rollouts with labelled turns."""
    labelled = (totals > 0).astype(np.float64)
    test = run_test(np.hstack([counts, totals]), np.hstack([labelled, labelled]), is_after, task)
    n = counts.shape[1]
    out: list[TurnCount | None] = [None] * n
    for j in range(n):
        values = (test.delta[j], test.p_value[j], test.prevalence_before[n + j], test.prevalence_after[n + j])
        if all(np.isfinite(v) for v in values):
            delta, p, before, after = (float(v) for v in values)
            out[j] = TurnCount(delta, _num(test.ci_low[j]), _num(test.ci_high[j]), p, before, after)
    return out


class _FaceValueTest(Protocol):
    @property
    def p_value(self) -> float: ...

    def moved(self, sign: float) -> bool: ...

    def needs_caution(self, sign: float, fdr: float) -> bool: ...

    def caution_text(self, sign: float) -> str: ...


T = TypeVar("T", bound=_FaceValueTest)


def _with_caution(test: T | None, validated: bool, sign: float, fdr: float, reason: str) -> tuple[T | None, str]:
    """A validated claim's test (equal length, turns a rollout) marked as its caution where it `needs_caution`,
    and the reason with the caution in words before it; else both as they were."""
    if not validated or test is None or not test.needs_caution(sign, fdr):
        return test, reason
    cautioned = replace(test, caution=True)  # type: ignore[type-var]  # T is a frozen dataclass
    return cautioned, f"caution, {test.caution_text(sign)}; {reason}"


def _caution_q(tests: list[T | None], validated: list[bool], signs: list[float]) -> list[T | None]:
    """`tests` (equal length, turns a rollout) with a BH q over the validated claims whose turns changed their
    way (`moved`): each of them is taken at face value only if it holds under that test, so that is a claim of
    its own, one per finding, and a study with many findings the change moves (a checkpoint whose turns are half
    as long again) would otherwise pass one in twenty of them."""
    family = [(j, t) for j, t in enumerate(tests) if t is not None and validated[j] and t.moved(signs[j])]
    q = bh_qvalues(np.array([t.p_value for _, t in family], dtype=np.float64))
    out = list(tests)
    for (j, t), qj in zip(family, q, strict=True):
        out[j] = replace(t, q_value=float(qj))  # type: ignore[type-var]  # T is a frozen dataclass
    return out


def _mde(
    counts: np.ndarray, totals: np.ndarray, is_after: np.ndarray, task: np.ndarray, new_tasks: bool, *, alpha: float
) -> np.ndarray:
    """Minimum detectable effect per hypothesis at level `alpha`, for the test that is run, on the scale of the
    reported delta (each claim's rollouts with labelled segments, `engine.stats.strata.feature_strata`)."""
    has = (totals > 0).any(axis=1)
    design = CheckpointDesign.from_labels(is_after[has], task[has])
    counts, totals = counts[has][design.keep], totals[has][design.keep]
    if not new_tasks:
        return minimum_detectable_effect(counts, totals, design, alpha=alpha)
    levels = stratified_levels(*feature_strata(counts, totals), design)
    before, after = levels.standardised()
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(levels.weight > 0, levels.contributions() - levels.weight * (after - before), 0.0)
        se = np.sqrt((spread**2).sum(axis=0)) / levels.weight.sum(axis=0)
    return normal_mde(se, alpha=alpha)


def _decide(
    n: int,
    before: float,
    after: float,
    delta: float,
    lo: float,
    hi: float,
    p: float,
    q: float,
    m: int,
    mde: float,
    floor: float,
    sign: float,
    fdr: float,
    scope: str,
    where: str,
) -> tuple[Status, str]:
    if n == 0:
        return "inconclusive", f"{NOTHING_LABELLED}: no {where} segment of the kinds this labeler reads"
    too_small = bool(np.isfinite(floor) and floor > fdr)  # not counted in BH (Tarone): it has no q
    if not np.isfinite(delta) or not (np.isfinite(q) or too_small):
        return "inconclusive", f"{NO_TASK} of both checkpoints"
    interval = f"CI {lo * 100:+.1f} to {hi * 100:+.1f} pts" if np.isfinite(lo) else "no CI: too few rollouts"
    # p beside q: a 95% interval clear of 0 with q above the level is the correction over the family's m tests
    tests = f"p={p:.2g}" if too_small else f"p={p:.2g}, q={q:.3g} over {m} tests" if m > 1 else f"q={q:.3g}"
    change = f"{before:.1%} -> {after:.1%} on {where} ({scope}; delta {delta * 100:+.1f} pts, {interval}, {tests})"
    if before == 0 and after == 0:
        return "rejected", f"{NO_MATCH} {where} segment"
    if too_small:
        return "inconclusive", (
            f"{TOO_SMALL}: the held-out design's smallest attainable p is {floor:.2g} > {fdr:g}; {change}"
        )
    if q < fdr and sign * delta > 0:
        return "validated", change
    if q < fdr:
        return "rejected", f"{OTHER_WAY}: {change}"
    if np.isfinite(lo) and max(sign * lo, sign * hi) < MIN_EFFECT:
        claimed = "rise" if sign > 0 else "fall"  # the interval may hold a change the other way
        ruled_out = f"the CI rules out a {claimed} of {MIN_EFFECT * 100:.0f} pts or more"
        return "rejected", f"{NOT_REPLICATED}: {change}; {ruled_out}"
    detectable = f"+/-{mde * 100:.1f} pts" if np.isfinite(mde) else "unknown"
    could = f"among {m} tests it could detect changes of" if m > 1 else "the test could detect changes of"
    return "inconclusive", f"{NO_CHANGE}: {change}; {could} {detectable}"
