"""Benjamini-Hochberg q-values."""

from __future__ import annotations

import numpy as np
from scipy import stats

from engine.stats.fdr import bh_qvalues


def test_matches_scipy_and_a_hand_computed_case():
    p = np.array([0.01, 0.04, 0.03, 0.2])
    # sorted 0.01, 0.03, 0.04, 0.2 -> 0.04, 0.06, 0.0533, 0.2 -> running minimum from the top.
    np.testing.assert_allclose(bh_qvalues(p), [0.04, 0.05333333, 0.05333333, 0.2])
    rng = np.random.default_rng(0)
    many = rng.uniform(size=500) ** 3
    np.testing.assert_allclose(bh_qvalues(many), stats.false_discovery_control(many, method="bh"))


def test_nan_stays_nan_and_is_not_counted():
    p = np.array([[0.01, np.nan], [0.02, 0.5]])
    q = bh_qvalues(p)
    assert q.shape == p.shape
    assert np.isnan(q[0, 1])
    np.testing.assert_allclose(q[~np.isnan(p)], bh_qvalues(np.array([0.01, 0.02, 0.5])))


def test_empty_and_all_nan():
    assert bh_qvalues(np.array([])).shape == (0,)
    assert np.isnan(bh_qvalues(np.array([np.nan, np.nan]))).all()
    assert bh_qvalues(np.array([1.0, 1.0])).max() == 1.0
