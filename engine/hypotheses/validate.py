"""Held-out validation: prevalence per checkpoint from the labels, the deltas' permutation design, BH across
hypotheses, CIs, the minimum detectable effect, and association with reward."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from engine.hypotheses.population import Population
from engine.stats.fdr import bh_qvalues
from engine.stats.power import minimum_detectable_effect
from engine.stats.prevalence import test_prevalence
from engine.stats.reward import reward_association


@dataclass(frozen=True)
class Claim:
    """What is tested: a hypothesis's direction, and the effect its drafting saw on discovery (if any)."""

    hypothesis_id: int
    direction: str  # 'increase' | 'decrease'
    discovery_delta: float | None = None


@dataclass(frozen=True)
class Validation:
    hypothesis_id: int
    status: str  # 'validated' | 'rejected' | 'inconclusive'
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


def _num(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def rollout_matrices(
    population: Population, labels: pl.DataFrame, ids: list[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(counts, totals, n_labeled) with counts/totals of shape (n_rollouts, n_hypotheses): weighted positive
    and weighted labelled segments per held-out rollout, in `population.rollout_arrays()` order."""
    keys = population.rollout_arrays()[0]
    index = {int(k): i for i, k in enumerate(keys)}
    column = {h: j for j, h in enumerate(ids)}
    counts = np.zeros((keys.size, len(ids)))
    totals = np.zeros((keys.size, len(ids)))
    n_labeled = np.zeros(len(ids), dtype=int)
    joined = labels.join(population.segments.select("segment_id", "rollout_key"), on="segment_id")
    if joined.height:
        r = np.array([index[int(k)] for k in joined["rollout_key"]])
        c = np.array([column[int(h)] for h in joined["hypothesis_id"]])
        w = joined["weight"].to_numpy()
        np.add.at(totals, (r, c), w)
        np.add.at(counts, (r, c), w * joined["label"].to_numpy())
        n_labeled = np.bincount(c, minlength=len(ids))
    return counts, totals, n_labeled


def validate(
    population: Population,
    labels: pl.DataFrame,
    claims: list[Claim],
    rng: np.random.Generator,
    *,
    fdr: float = 0.05,
    n_permutations: int = 2000,
) -> list[Validation]:
    """Test every claim on held-out labels (hypothesis_id, segment_id, label, weight), one family for BH.

    validated: q < fdr in the claimed direction. rejected: q < fdr the other way; or the labeler matched
    nothing; or the CI rules out half the effect seen on discovery. inconclusive otherwise, with the MDE.
    """
    if not claims:
        return []
    ids = [c.hypothesis_id for c in claims]
    counts, totals, n_labeled = rollout_matrices(population, labels, ids)
    _, is_after, task, reward = population.rollout_arrays()
    test = test_prevalence(counts, totals, is_after, task, rng, n_permutations=n_permutations)
    q = bh_qvalues(test.p_value)
    mde = minimum_detectable_effect(counts, totals, is_after, task, alpha=fdr)
    # Within checkpoint and task: each checkpoint's association, pooled.
    strata = np.unique(np.stack([task, is_after]), axis=1, return_inverse=True)[1].ravel()
    fires = np.where(totals > 0, counts > 0, 0.0)
    assoc = reward_association(fires, reward, strata)
    out = []
    for j, claim in enumerate(claims):
        before, after, delta = test.prevalence_before[j], test.prevalence_after[j], test.delta[j]
        sign = 1.0 if claim.direction == "increase" else -1.0
        status, reason = _decide(
            claim, n_labeled[j], before, after, delta, test.ci_low[j], test.ci_high[j], q[j], mde[j], sign, fdr
        )
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
            )
        )
    return out


def _decide(
    claim: Claim,
    n: int,
    before: float,
    after: float,
    delta: float,
    lo: float,
    hi: float,
    q: float,
    mde: float,
    sign: float,
    fdr: float,
) -> tuple[str, str]:
    if n == 0:
        return "inconclusive", "no held-out segment of the kinds this labeler reads"
    if not np.isfinite(delta) or not np.isfinite(q):
        return "inconclusive", "held-out tasks lack rollouts of both checkpoints"
    change = f"{before:.1%} -> {after:.1%} on held-out (delta {delta * 100:+.1f} pts, q={q:.3g})"
    if before == 0 and after == 0:
        return "rejected", "the labeler matched no held-out segment"
    if q < fdr and sign * delta > 0:
        return "validated", change
    if q < fdr:
        return "rejected", f"changed the other way: {change}"
    if claim.discovery_delta is not None and max(sign * lo, sign * hi) < abs(claim.discovery_delta) / 2:
        bound = hi if sign > 0 else lo
        return "rejected", (
            f"not replicated: {change}; the CI bound {bound * 100:+.1f} pts rules out half the discovery "
            f"effect ({claim.discovery_delta * 100:+.1f} pts)"
        )
    detectable = f"+/-{mde * 100:.1f} pts" if np.isfinite(mde) else "unknown"
    return "inconclusive", f"no significant change: {change}; the test could detect changes of {detectable}"
