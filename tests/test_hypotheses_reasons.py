"""Why a hypothesis was not validated, in a few words: every reason the held-out test writes has a known head, and
a study's hypotheses are tallied by status and by why."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from engine.hypotheses.budget import Budget, LabelerTooSlow
from engine.hypotheses.reasons import counted, tally, why
from engine.hypotheses.validate import _decide

NAN = math.nan


@pytest.mark.parametrize(
    ("n", "before", "after", "lo", "hi", "q", "floor", "sign", "status", "named"),
    [
        (0, NAN, NAN, NAN, NAN, NAN, NAN, 1.0, "inconclusive", "nothing to label"),
        (50, NAN, NAN, NAN, NAN, NAN, NAN, 1.0, "inconclusive", "nothing to compare"),
        (50, 0.0, 0.0, 0.0, 0.0, 1.0, 0.001, 1.0, "rejected", "the labeler matched nothing"),
        (50, 0.1, 0.3, 0.1, 0.3, 0.001, 0.001, 1.0, "validated", None),
        (50, 0.1, 0.3, 0.1, 0.3, 0.001, 0.001, -1.0, "rejected", "changed the other way"),
        (50, 0.1, 0.3, -0.1, 0.5, 0.4, 0.125, 1.0, "inconclusive", "too few rollouts to detect"),
        (50, 0.1, 0.1, -0.01, 0.01, 0.9, 0.001, 1.0, "rejected", "not replicated"),
        (50, 0.1, 0.15, -0.02, 0.12, 0.3, 0.001, 1.0, "inconclusive", "no significant change"),
    ],
)
def test_every_reason_the_held_out_test_writes_has_a_name(n, before, after, lo, hi, q, floor, sign, status, named):
    """Each branch of the held-out decision writes a reason whose head `why` knows (none reads 'other')."""
    decided, reason = _decide(n, before, after, after - before, lo, hi, q, q, 4, 0.1, floor, sign, 0.05, "", "held-out")
    assert decided == status
    assert why(decided, reason) == named


def test_a_labeler_past_its_budget_and_the_rest_are_named_too() -> None:
    with pytest.raises(LabelerTooSlow) as slow:
        Budget(seconds=-1.0).check()
    assert why("inconclusive", str(slow.value)) == "labeler too slow"
    assert why("exploratory", "exploratory: written after held-out evidence was shown. The test said...") == (
        "exploratory"
    )
    assert why("proposed", None) is None
    assert why("rejected", "a reason of no known head") == "other"


def test_the_tally_counts_by_status_then_by_why_most_common_first() -> None:
    def row(status: str, reason: str | None = None) -> SimpleNamespace:
        return SimpleNamespace(status=status, reason=reason)

    rows = [
        row("inconclusive", "no significant change: 1% -> 2%"),
        row("rejected", "the labeler matched no held-out segment"),
        *[row("rejected", "not replicated: 1% -> 1%") for _ in range(3)],
        row("validated", "1% -> 9%"),
        row("exploratory", "exploratory: written after held-out evidence was shown. The test said validated"),
        row("validated", "2% -> 8%"),
        row("inconclusive", "no significant change: 3% -> 2%"),
    ]
    assert tally(rows) == (
        "2 validated; 4 rejected (3 not replicated, 1 the labeler matched nothing); 2 inconclusive (no significant "
        "change); 1 exploratory"
    )
    assert tally([]) == ""


def test_counted_names_how_many_in_the_right_number() -> None:
    one = [SimpleNamespace(status="validated", reason="1% -> 9%")]
    assert counted(one) == "1 hypothesis: 1 validated"
    assert counted(one * 2) == "2 hypotheses: 2 validated"
    assert counted([]) == "no hypotheses"
