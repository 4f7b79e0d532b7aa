"""Confidence intervals for means over clustered data (rollouts within tasks)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtrit  # the t quantile, without importing all of scipy.stats

CONFIDENCE = 0.95  # the level of the effects' intervals (deltas, held-out tests)


@dataclass(frozen=True)
class MeanCI:
    mean: float
    low: float
    high: float
    n: int


def clustered_mean_ci(values: np.ndarray, clusters: np.ndarray, confidence: float = 0.95) -> MeanCI:
    """Mean with a CI whose standard error treats the values of one cluster as correlated (cluster-robust,
    with the G/(G-1) small-sample factor and a t quantile on G-1 degrees of freedom). NaN bounds for G < 2.

    When every value lies in [0, 1] (a success rate, a score on that scale) the bounds are clipped to it: with
    few clusters the interval would otherwise reach below 0% or above 100%, where such a mean cannot be."""
    n = len(values)
    mean = float(values.mean())
    _, codes = np.unique(clusters, return_inverse=True)
    groups = int(codes.max()) + 1
    if groups < 2:
        return MeanCI(mean, math.nan, math.nan, n)
    resid = np.bincount(codes, weights=values - mean)
    se = math.sqrt(float((resid**2).sum()) * groups / (groups - 1)) / n
    half = float(stdtrit(groups - 1, 0.5 + confidence / 2)) * se
    low, high = mean - half, mean + half
    if values.min() >= 0 and values.max() <= 1:
        low, high = max(low, 0.0), min(high, 1.0)
    return MeanCI(mean, low, high, n)


def effect_interval(
    estimate: np.ndarray, se: np.ndarray, df: float, confidence: float
) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) = estimate -/+ t_{df} * se; NaN where the standard error is (NaN: no zero-width intervals)."""
    half = float(stdtrit(max(df, 1.0), 0.5 + confidence / 2)) * np.asarray(se, dtype=np.float64)
    return estimate - half, estimate + half
