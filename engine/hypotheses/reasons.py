"""Why a hypothesis was not validated: the heads of the reasons its held-out test writes
(`engine.hypotheses.validate`, `engine.hypotheses.budget`), and a tally of a study's hypotheses by them, which the
CLI, the report and the TUI print so that a reader of a long list sees at once why most claims failed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Protocol

# Each reason starts with one of these heads; the value is how a tally names it.
NOT_REPLICATED = "not replicated"
OTHER_WAY = "changed the other way"
NO_MATCH = "the labeler matched no"
TOO_SMALL = "cannot detect at this size"
NO_CHANGE = "no significant change"
NOTHING_LABELLED = "nothing to label"
NO_TASK = "no held-out task has labelled rollouts"
TOO_SLOW = "labeler too slow"
HEADS: dict[str, str] = {
    NOT_REPLICATED: "not replicated",
    OTHER_WAY: "changed the other way",
    NO_MATCH: "the labeler matched nothing",
    TOO_SMALL: "too few rollouts to detect",
    NO_CHANGE: "no significant change",
    NOTHING_LABELLED: "nothing to label",
    NO_TASK: "nothing to compare",
    TOO_SLOW: "labeler too slow",
}
# The order a tally lists statuses in (validated first, as every list of hypotheses is ordered).
STATUS_ORDER = ("validated", "rejected", "inconclusive", "exploratory", "proposed")


class Tested(Protocol):
    """What a tally reads of a hypothesis (`queries.HypothesisRow`)."""

    @property
    def status(self) -> str: ...

    @property
    def reason(self) -> str | None: ...


def why(status: str, reason: str | None) -> str | None:
    """The short name of why a hypothesis of `status` was not validated (None for validated and untested ones,
    'exploratory' for those written after held-out evidence was shown, 'other' for a reason of no known head)."""
    if status in ("validated", "proposed"):
        return None
    if status == "exploratory":
        return "exploratory"
    return next((name for head, name in HEADS.items() if (reason or "").startswith(head)), "other")


def tally(rows: Iterable[Tested]) -> str:
    """'7 validated; 6 rejected (5 not replicated, 1 the labeler matched nothing); 2 inconclusive (no significant
    change)': the hypotheses by status, and those not validated by why, most common first ('' for none)."""
    rows = list(rows)
    parts = []
    for status in STATUS_ORDER:
        of_status = [r for r in rows if r.status == status]
        if not of_status:
            continue
        reasons = Counter(w for r in of_status if (w := why(status, r.reason)) and w != status)
        named = [name if len(reasons) == 1 else f"{n} {name}" for name, n in reasons.most_common()]
        parts.append(f"{len(of_status)} {status}" + (f" ({', '.join(named)})" if named else ""))
    return "; ".join(parts)


def counted(rows: Iterable[Tested]) -> str:
    """'15 hypotheses: 7 validated; ...': how many, in the right number, then their `tally`; 'no hypotheses'
    for none."""
    rows = list(rows)
    noun = "hypothesis" if len(rows) == 1 else "hypotheses"
    return f"{len(rows)} {noun}: {tally(rows)}" if rows else "no hypotheses"
