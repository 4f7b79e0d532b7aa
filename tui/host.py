"""What screens and the command palette need of the app: a small protocol, so that they never import it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tui.hypothesis_runner import NewHypothesis
    from tui.jobs import HypothesisTestState
    from tui.session import StoreSession, StoreStatus


class StudyHost(Protocol):
    """The running app as screens see it: the store session, the study's checkpoints, navigation and jobs."""

    session: StoreSession
    compared: tuple[str | None, str | None]  # (before, after) of the last analysis
    checkpoints: list[str]  # every checkpoint, in ingest order
    keymap_overrides: dict[str, str]
    store_status: StoreStatus
    hypothesis_test: HypothesisTestState | None

    def open_feature(self, feature_id: int, kind: str | None = None) -> None: ...

    def open_rollout(self, rollout_key: int, *, segment_id: int | None = None) -> None: ...

    def jump(self, category: str, item_id: int) -> None: ...

    def start_hypothesis_test(self, hypothesis_id: int, command: list[str] | None = None) -> bool: ...

    def add_hypothesis(self, new: NewHypothesis) -> bool: ...

    def action_check_null(self) -> None: ...
