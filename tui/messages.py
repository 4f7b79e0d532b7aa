"""Messages that worker threads post back to the UI thread. Small dataclasses; widgets are touched only by
their handlers, on the UI thread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from engine.store.queries import (
        ClusterMember,
        ClusterRow,
        DeltaFilter,
        DeltaPage,
        FeatureDetail,
        HypothesisExample,
        HypothesisRow,
        LabelCandidate,
        RolloutPage,
        RolloutRow,
        StudySummary,
        Transcript,
    )
    from tui.session import StoreStatus


@dataclass
class StoreStatusChanged(Message):
    status: StoreStatus


@dataclass
class QueryFailed(Message):
    """A query or write did not complete; `unavailable` when the store could not be used at all."""

    what: str
    error: str
    unavailable: bool


@dataclass
class OverviewLoaded(Message):
    summary: StudySummary
    findings: list[HypothesisRow]
    tally: str  # every hypothesis by status and why (engine.hypotheses.reasons.counted)


@dataclass
class ExploratoryLoaded(Message):
    """A small study's whole-study ranking, shown on request and logged as a held-out view
    (engine.hypotheses.exposure.show_exploratory: rows with their feature's `label`). The key that loads it is
    live only where the summary has one (OverviewScreen.check_action)."""

    rows: list[dict[str, Any]]


@dataclass
class DeltaPageLoaded(Message):
    page: DeltaPage
    filter: DeltaFilter
    length: str | None = None  # the rollouts' length change (first page only)


@dataclass
class FeatureLoaded(Message):
    feature_id: int
    detail: FeatureDetail | None


@dataclass
class FeatureRewardLoaded(Message):
    """A feature's prevalence before/after within successes and failures (engine.strata.deltas_by_reward)."""

    feature_id: int
    rows: list[dict]


@dataclass
class ClustersLoaded(Message):
    clusters: list[ClusterRow]


@dataclass
class ClusterMembersLoaded(Message):
    cluster_id: int
    members: list[ClusterMember]


@dataclass
class HypothesesLoaded(Message):
    hypotheses: list[HypothesisRow]
    select: int | None  # keep the cursor on this hypothesis when it is still listed


@dataclass
class HypothesisExamplesLoaded(Message):
    hypothesis_id: int
    examples: list[HypothesisExample]


@dataclass
class HypothesisCalibrationLoaded(Message):
    hypothesis_id: int
    calibration: dict[str, Any] | None  # engine.hypotheses.calibration_record.stored_calibration


@dataclass
class HypothesisSaved(Message):
    """A decision, note or new hypothesis was written; `row` is the hypothesis as stored now."""

    row: HypothesisRow


@dataclass
class HypothesisTestProgress(Message):
    hypothesis_id: int | None  # None while it is being added
    completed: float | None
    total: float | None
    status: str

    def can_replace(self, message: Message) -> bool:
        """A newer report of the same job supersedes this one unless it drops this one's count (a status line
        after the last step must not hide that the steps completed)."""
        return (
            isinstance(message, HypothesisTestProgress)
            and message.hypothesis_id == self.hypothesis_id
            and (message.completed is not None or self.completed is None)
        )


@dataclass
class HypothesisTestFinished(Message):
    hypothesis_id: int | None  # None when adding it failed
    ok: bool
    message: str


@dataclass
class LabelCandidatesLoaded(Message):
    candidates: list[LabelCandidate]


@dataclass
class UserLabelSaved(Message):
    segment_id: int
    label: bool


@dataclass
class RolloutPageLoaded(Message):
    page: RolloutPage
    checkpoint: str | None
    search: str


@dataclass
class TranscriptLoaded(Message):
    transcript: Transcript | None
    counterparts: list[RolloutRow]
    other: Transcript | None = None


@dataclass
class HeldoutViewLogged(Message):
    """A held-out rollout was shown and the view logged: hypotheses written from now on are exploratory."""
