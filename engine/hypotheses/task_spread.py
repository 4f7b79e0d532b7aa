"""Which tasks a held-out claim's change comes from (computed in `engine.hypotheses.validate`), in words for
provenance. The tested delta is a weighted mean of per-task changes, so one task can carry it: on the real tau2
policy pair "More text turns opening with 'hello mia'" validated, a greeting with one task's passenger's name.
That is a true change in these tasks, not a habit of the model's, and a reader should know before acting on
it. Free of numpy and polars: the TUI imports it."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from engine import safe_text

# A finding rests on one task when, without it, the other tasks' change in its direction is less than this share
# of the whole: a change spread over tasks keeps most of itself without any one of them.
REST_SHARE = 0.25
TASK_CHARS = 40  # a task id is untrusted text: one line, cut to this


@dataclass(frozen=True)
class TaskSpread:
    """The tasks of the test with a change in the claim's direction and against it, and the task that moves the
    delta most (`top_task`) with the delta over the other tasks (`rest_delta`, None with one task)."""

    n_tasks: int
    toward: int
    against: int
    top_task: str
    delta: float
    rest_delta: float | None
    caution: bool = False  # set on a validated claim that `rests_on_one_task`

    def rests_on_one_task(self, sign: float) -> bool:
        """Whether the other tasks keep less than REST_SHARE of the change in direction `sign` (+1 more, -1
        fewer): without its top task, the finding is mostly gone."""
        if self.rest_delta is None:
            return False
        return sign * self.rest_delta < REST_SHARE * sign * self.delta

    def caution_text(self, sign: float) -> str:
        return f"it may be one task's: {self.phrase()}"

    def phrase(self) -> str:
        """E.g. "in 1 of 4 tasks its way, 0 against; without task 'airline_11' +0.4 pts (of +15.3)"."""
        ways = f"in {self.toward} of {self.n_tasks} tasks its way, {self.against} against"
        if self.rest_delta is None:
            return ways
        task = safe_text.line(self.top_task, TASK_CHARS)
        return f"{ways}; without task '{task}' {100 * self.rest_delta:+.1f} pts (of {100 * self.delta:+.1f})"

    def as_json(self) -> dict[str, float | int | str | bool | None]:
        return asdict(self)
