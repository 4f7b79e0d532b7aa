"""False discovery rate control: Benjamini-Hochberg over a set of tests, or within each pre-declared family."""

from __future__ import annotations

import numpy as np


def bh_qvalues(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg q-values (adjusted p-values) of `p`, any shape.

    NaN p-values stay NaN and do not count towards the number of tests m.
    q_i = min over j with p_j >= p_i of (m * p_j / rank_j), capped at 1.
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.full(p.shape, np.nan)
    flat = p.ravel()
    valid = np.flatnonzero(~np.isnan(flat))
    m = valid.size
    if m == 0:
        return q
    order = valid[np.argsort(flat[valid], kind="stable")]
    scaled = flat[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    out = q.ravel()
    out[order] = np.minimum(adjusted, 1.0)
    return out.reshape(p.shape)


def family_qvalues(p: np.ndarray, family: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg q-values computed separately within each family (1-d `p`, `family` labels alike)."""
    p = np.asarray(p, dtype=np.float64)
    family = np.asarray(family)
    q = np.full(p.shape, np.nan)
    for name in np.unique(family):
        members = family == name
        q[members] = bh_qvalues(p[members])
    return q
