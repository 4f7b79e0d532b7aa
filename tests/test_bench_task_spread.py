"""The one-task caution by replication (bench/task_spread.py, fewer studies): a change one task carries is
cautioned whenever it validates, a change every task shares almost never is."""

from __future__ import annotations

import pytest
from scipy import stats

from bench.task_spread import SCENARIOS, run

STUDIES = 100
BY_NAME = {s.name: s for s in SCENARIOS}


@pytest.mark.slow
def test_one_tasks_change_is_cautioned_and_a_habit_is_not() -> None:
    one = run(BY_NAME["one_task"], STUDIES, 0, 4, 8)
    assert one["validated"] > 0.9 and one["cautioned"] == 1.0
    for name in ("every_task", "one_heavy_task"):
        habit = run(BY_NAME[name], STUDIES, 0, 4, 8)
        assert habit["validated"] > 0.8, name
        # At a true 3% rate, more than 8 of ~100 validated studies happens with probability below 1%.
        assert habit["cautioned"] * habit["validated"] * STUDIES <= stats.binom.ppf(0.99, STUDIES, 0.03), name
