"""The equal-length caution by replication (bench/length_caution.py, fewer studies): under longer turns alone
few studies validate without a caution, and a planted sentence validates without one."""

from __future__ import annotations

import pytest
from scipy import stats

from bench.length_caution import SCENARIOS, run

STUDIES = 60
BY_NAME = {s.name: s for s in SCENARIOS}


@pytest.mark.slow
def test_longer_turns_alone_rarely_validate_uncautioned_and_planted_sentences_do() -> None:
    null = run(BY_NAME["length"], STUDIES, 0, 20, 4, 4)
    # At a true 5% rate, 8 or more of 60 happens with probability below 1%.
    assert null["face_value"] * STUDIES < stats.binom.ppf(0.99, STUDIES, 0.05) + 1
    assert null["validated"] > 0.5  # the raw test alone would have validated most of them
    planted = run(BY_NAME["planted_longer"], STUDIES, 0, 20, 4, 4)
    assert planted["face_value"] >= 0.9
