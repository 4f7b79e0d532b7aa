"""Dialogs of the hypotheses screen: a note, a new hypothesis, and labelling segments by hand."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Select, Static

from engine.kinds import SEGMENT_KINDS
from engine.safe_text import one_line, safe
from tui import keymap
from tui.hypothesis_runner import NewHypothesis
from tui.messages import LabelCandidatesLoaded, UserLabelSaved
from tui.screens.base import StoreWork

if TYPE_CHECKING:
    from engine.store.queries import HypothesisRow, LabelCandidate

KINDS = SEGMENT_KINDS


class NoteScreen(ModalScreen[str | None]):
    """Edit the note on a hypothesis. Enter saves, Escape cancels."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, statement: str, note: str) -> None:
        super().__init__()
        self.statement, self.note = statement, note

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text("Note on: ", style="bold").append_text(one_line(self.statement, 200)))
            yield Input(self.note, placeholder="your note (Enter saves, Esc cancels)", id="note")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)


class HypothesisForm(ModalScreen[NewHypothesis | None]):
    """Write your own hypothesis: a statement, its direction, and how to label one segment."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel"), Binding("ctrl+s", "save", "Save")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog"):
            yield Static(Text("New hypothesis", style="bold"))
            yield Input(placeholder="statement, e.g. the agent hands off to a human less often", id="statement")
            with Horizontal(classes="row"):
                yield Select(
                    [("more in after", "increase"), ("less in after", "decrease")],
                    value="increase",
                    allow_blank=False,
                    id="direction",
                )
                yield Select(
                    [("regex verifier", "verifier"), ("similar sentences", "like"), ("LLM judge question", "judge")],
                    value="verifier",
                    allow_blank=False,
                    id="labeler",
                )
            with Horizontal(classes="row", id="verifier-row"):
                yield Input(placeholder="regex on segment text", id="pattern")
                yield Select([(k, k) for k in KINDS], prompt="any kind", id="kind")
            with Horizontal(classes="row", id="like-row"):
                yield Input(placeholder="sentences like the behaviour, separated by ' | '", id="like")
                yield Input(placeholder="min cosine (0.7)", id="min-similarity")
            yield Input(placeholder="yes/no question the judge answers for one segment", id="question")
            yield Checkbox("test it now on the held-out split", value=True, id="test-now")
            yield Static(id="form-error")
            with Horizontal(classes="row buttons"):
                yield Button("Save (ctrl+s)", variant="primary", id="save")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#question").display = False
        self.query_one("#like-row").display = False
        self.query_one("#statement").focus()

    @on(Select.Changed, "#labeler")
    def _labeler_changed(self, event: Select.Changed) -> None:
        self.query_one("#verifier-row").display = event.value in ("verifier", "like")
        self.query_one("#pattern").display = event.value == "verifier"
        self.query_one("#like-row").display = event.value == "like"
        self.query_one("#question").display = event.value == "judge"

    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        statement = self.query_one("#statement", Input).value.strip()
        labeler = str(self.query_one("#labeler", Select).value)
        pattern = self.query_one("#pattern", Input).value
        kind_value = self.query_one("#kind", Select).value
        kind = kind_value if isinstance(kind_value, str) else None
        question = self.query_one("#question", Input).value
        like = tuple(t.strip() for t in self.query_one("#like", Input).value.split(" | ") if t.strip())
        raw_similarity = self.query_one("#min-similarity", Input).value.strip()
        min_similarity = _cosine(raw_similarity) if labeler == "like" and raw_similarity else None
        problem = None
        if not statement:
            problem = "write a statement"
        elif labeler == "verifier":
            try:
                re.compile(pattern)
            except re.error as exc:
                problem = f"the regex does not compile: {exc}"
            if not pattern:
                problem = "give a regex the verifier looks for"
        elif labeler == "like":
            if not like:
                problem = "give at least one sentence like the behaviour"
            elif raw_similarity and min_similarity is None:
                problem = "the min cosine must be a number in (0, 1]"
        elif not question.strip():
            problem = "give the judge a yes/no question"
        if problem:
            self.query_one("#form-error", Static).update(Text(problem, style="bold"))
            return
        self.dismiss(
            NewHypothesis(
                statement=statement,
                direction=str(self.query_one("#direction", Select).value),
                pattern=pattern if labeler == "verifier" else None,
                kind=kind,
                judge=question.strip() if labeler == "judge" else None,
                test=self.query_one("#test-now", Checkbox).value,
                like=like if labeler == "like" else (),
                min_similarity=min_similarity,
            )
        )

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)


def _cosine(raw: str) -> float | None:
    """A min cosine typed in the form, or None when it is not a number in (0, 1]."""
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if 0.0 < value <= 1.0 else None


class LabelScreen(StoreWork, ModalScreen[int]):
    """Label held-out segments yourself, blind to checkpoint and to the labeler's verdict, to calibrate it.

    Each answer is written at once; dismissed with the number of labels given.
    """

    BINDINGS: ClassVar[list[BindingType]] = [*keymap.LABEL]

    def __init__(self, hypothesis: HypothesisRow) -> None:
        super().__init__()
        self.hypothesis = hypothesis
        self.candidates: list[LabelCandidate] = []
        self.index = 0
        self.given = 0
        self._stale = False

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog tall"):
            yield Static(id="label-question")
            yield Static(id="label-progress")
            with VerticalScroll(id="label-scroll"):
                yield Static(Text("loading segments…", style="dim"), id="label-text")
            yield Static(Text("y yes · n no · s skip · esc done", style="dim"))

    def on_mount(self) -> None:
        h = self.hypothesis
        question = h.spec.get("question") if isinstance(h.spec, dict) else None
        head = Text(f"Label segments for #{h.hypothesis_id}: ", style="bold")
        head.append_text(safe(question or f"does this segment show: {h.statement}?", max_chars=300))
        self.query_one("#label-question", Static).update(head)
        from engine.hypotheses.exposure import record_heldout_view
        from engine.store import queries

        hid = h.hypothesis_id

        def load(cur):  # noqa: ANN001, ANN202
            record_heldout_view(cur, "tui", hid)  # the candidates are the labeler's held-out verdicts
            return queries.label_candidates(cur, hid, 30)

        self.run_query("label-candidates", load, LabelCandidatesLoaded, write=True)

    def on_label_candidates_loaded(self, message: LabelCandidatesLoaded) -> None:
        self.candidates = message.candidates
        self._show()

    def _show(self) -> None:
        text = self.query_one("#label-text", Static)
        progress = self.query_one("#label-progress", Static)
        progress.update(
            Text(f"{self.given} labelled now · {max(0, len(self.candidates) - self.index)} to go", style="dim")
        )
        if self.index >= len(self.candidates):
            text.update(
                Text(
                    "nothing (more) to label for this hypothesis: the labeler has not looked at other "
                    "segments. Esc to go back.",
                    style="italic",
                )
            )
            return
        c = self.candidates[self.index]
        body = Text(f"{c.kind} segment\n", style="dim")
        body.append_text(safe(c.text))
        text.update(body)
        self.query_one("#label-scroll", VerticalScroll).scroll_home(animate=False)

    def action_label(self, label: bool) -> None:
        if self.index >= len(self.candidates):
            return
        from engine.store import writes

        hid, sid = self.hypothesis.hypothesis_id, self.candidates[self.index].segment_id

        def save(cur):  # noqa: ANN001, ANN202
            writes.set_user_label(cur, hid, sid, label)
            return UserLabelSaved(sid, label)

        self.run_query(f"save-label-{sid}", save, lambda saved: saved, write=True)

    def on_user_label_saved(self, message: UserLabelSaved) -> None:
        if self.index < len(self.candidates) and self.candidates[self.index].segment_id == message.segment_id:
            self.given += 1
            self.index += 1
            self._show()

    def action_skip(self) -> None:
        self.index += 1
        self._show()

    def action_done(self) -> None:
        self.dismiss(self.given)
