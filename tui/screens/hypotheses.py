"""Screen 4: the hypothesis triage queue. Decisions and notes are written to the store at once."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Label, ProgressBar, Static

from engine.hypotheses.cautions import has_caution
from engine.hypotheses.provenance import other_fold_wordings, provenance_text, tested_on
from engine.kinds import DECISIONS, EXPLORATORY, HELDOUT, UNDECIDED, DecisionFilter, Status
from engine.safe_text import one_line, safe
from tui import keymap
from tui.hypothesis_runner import NewHypothesis
from tui.messages import HypothesesLoaded, HypothesisCalibrationLoaded, HypothesisExamplesLoaded, HypothesisSaved
from tui.numbers import interval, pct, pp, pvalue, signed
from tui.screens.base import RldiffScreen
from tui.screens.hypothesis_forms import HypothesisForm, LabelScreen, NoteScreen
from tui.widgets.row_table import RowTable
from tui.widgets.statement import statement_cell

if TYPE_CHECKING:
    from engine.store.queries import HypothesisExample, HypothesisRow
    from tui.jobs import HypothesisTestState

STATUS_MARK = {"validated": "✓", "rejected": "✗", "inconclusive": "?", "proposed": "·", "exploratory": "~"}
CAUTION_MARK = "*"  # validated with a caution: it may be turn length or count (engine.hypotheses.cautions)
DECISION_MARK = {"accepted": "acc", "rejected": "rej"}
# What the f and d keys cycle through, in this order.
STATUSES: tuple[Status | None, ...] = (None, "validated", "inconclusive", "rejected", "proposed", EXPLORATORY)
DECISION_FILTERS: tuple[DecisionFilter | None, ...] = (None, UNDECIDED, *DECISIONS)
COLUMNS = (("id", 4), ("", 2), ("dec", 3), ("statement", None), ("Δ pp", 7), ("q", 6))


class HypothesesScreen(RldiffScreen):
    NAV = "hypotheses"
    AUTO_FOCUS = "#hypotheses"
    BINDINGS: ClassVar[list[BindingType]] = [*keymap.HYPOTHESES]

    def __init__(self) -> None:
        super().__init__()
        self.status_filter: Status | None = None
        self.decision_filter: DecisionFilter | None = None
        self.rows: list[HypothesisRow] = []
        self._examples: dict[int, list[HypothesisExample]] = {}  # shown only on request (x): it is logged
        self._calibrations: dict[int, dict[str, Any] | None] = {}
        self._select: int | None = None

    def compose_body(self) -> ComposeResult:
        yield Static(id="hyp-filters")
        yield RowTable(id="hypotheses")
        with VerticalScroll(id="hyp-detail"):
            yield Static(id="hyp-text")
        with Horizontal(id="hyp-progress"):
            yield Label(id="hyp-progress-label")
            yield ProgressBar(id="hyp-progress-bar", show_eta=False)

    def on_mount(self) -> None:
        self._fill()
        self.query_one("#hyp-progress").display = False
        self.watch(self.app, "hypothesis_test", self._test_changed)
        super().on_mount()

    # -- loading -----------------------------------------------------------------------------------------

    def reload(self) -> None:
        from engine.store import queries

        status, decision = self.status_filter, self.decision_filter
        keep = self.current.hypothesis_id if self.current else None
        self.run_query(
            "hypotheses",
            lambda cur: queries.hypotheses(cur, status, decision),
            lambda rows: HypothesesLoaded(rows, keep),
        )

    def on_hypotheses_loaded(self, message: HypothesesLoaded) -> None:
        self.rows = message.hypotheses
        self._examples.clear()
        self._calibrations.clear()
        self._fill()
        table = self.query_one("#hypotheses", RowTable)
        if self._select is not None:  # a jump to this hypothesis is pending
            self.select(self._select)
        elif message.select is not None and table.has_row(str(message.select)):
            table.move_cursor(row=table.get_row_index(str(message.select)))
        self._show_filters()
        self._show_detail()

    def _fill(self) -> None:
        table = self.query_one("#hypotheses", RowTable)
        cursor = table.cursor_row
        self._statement_width = table.set_columns(COLUMNS, self.app.size.width)
        table.add_rows((str(h.hypothesis_id), self._cells(h)) for h in self.rows)
        if self.rows:
            table.move_cursor(row=min(cursor, len(self.rows) - 1))

    def _cells(self, h: HypothesisRow) -> list[Text]:
        palette = self.palette
        return [
            Text(str(h.hypothesis_id)),
            Text(STATUS_MARK.get(h.status, " ") + (CAUTION_MARK if has_caution(h.provenance) else ""), style="bold"),
            Text(DECISION_MARK.get(h.decision or "", ""), style="bold"),
            statement_cell(h, self._statement_width),
            Text(pp(h.delta), style=palette.more if (h.delta or 0) > 0 else palette.less, justify="right"),
            Text(pvalue(h.q_value), justify="right"),
        ]

    @property
    def current(self) -> HypothesisRow | None:
        table = self.query_one("#hypotheses", RowTable)
        if not self.rows or not 0 <= table.cursor_row < len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def select(self, hypothesis_id: int) -> None:
        """Put the cursor on a hypothesis; clear the filters if they hide it."""
        table = self.query_one("#hypotheses", RowTable)
        try:
            table.move_cursor(row=table.get_row_index(str(hypothesis_id)))
            self._select = None
        except KeyError:
            self._select = hypothesis_id
            if self.status_filter or self.decision_filter:
                self.status_filter = self.decision_filter = None
                self.reload()
        table.focus()

    def _show_filters(self) -> None:
        text = Text(" ", end="", no_wrap=True, overflow="ellipsis")
        for key, name, value in (
            ("f", "status", self.status_filter or "all"),
            ("d", "decision", self.decision_filter or "all"),
        ):
            text.append(key, style="bold underline")
            text.append(f" {name}:{value}  ")
        decided = sum(1 for h in self.rows if h.decision)
        text.append(f"{len(self.rows)} hypotheses, {decided} decided  ", style="dim")
        if not self.rldiff.store_status.writable:
            text.append("read-only", style="bold")
        self.query_one("#hyp-filters", Static).update(text)

    # -- the detail pane ---------------------------------------------------------------------------------

    def on_row_table_row_highlighted(self, event: RowTable.RowHighlighted) -> None:
        self._show_detail()
        h = self.current
        if h is not None and h.hypothesis_id not in self._calibrations:
            from engine.hypotheses.calibration_record import stored_calibration

            hid = h.hypothesis_id
            self.run_query(
                "hypothesis-calibration",
                lambda cur: stored_calibration(cur, hid),
                lambda calibration: HypothesisCalibrationLoaded(hid, calibration),
            )

    def on_hypothesis_calibration_loaded(self, message: HypothesisCalibrationLoaded) -> None:
        self._calibrations[message.hypothesis_id] = message.calibration
        self._show_detail()

    def action_examples(self) -> None:
        """Show the held-out positives of the highlighted hypothesis, logging the view (a write): hypotheses
        written afterwards are exploratory."""
        h = self.current
        if h is None or h.hypothesis_id in self._examples:
            return
        from engine.hypotheses.exposure import record_heldout_view
        from engine.store import queries

        hid = h.hypothesis_id

        def show(cur):  # noqa: ANN001, ANN202
            record_heldout_view(cur, "tui", hid)
            return queries.hypothesis_examples(cur, hid)

        self.run_query("save-heldout-view", show, lambda examples: HypothesisExamplesLoaded(hid, examples), write=True)

    def on_hypothesis_examples_loaded(self, message: HypothesisExamplesLoaded) -> None:
        self._examples[message.hypothesis_id] = message.examples
        self._show_detail()

    def _show_detail(self) -> None:
        h = self.current
        target = self.query_one("#hyp-text", Static)
        if h is None:
            target.update(
                Text(
                    "no hypotheses"
                    + (" match the filters" if self.status_filter or self.decision_filter else " in the store yet"),
                    style="italic",
                )
            )
            return
        palette = self.palette
        before, after = self.rldiff.compared
        text = Text(f"#{h.hypothesis_id} ", style="bold", end="")
        text.append_text(safe(h.statement, "bold"))
        text.append(f"\n{h.status}", style="bold")
        text.append(f" · expected {h.direction} · {h.labeler} ({h.origin})")
        if h.origin == "extractive":
            text.append(" · drafted offline", style="italic")
        if h.prevalence_before is not None or h.prevalence_after is not None:
            text.append(f"\n{tested_on(h.provenance)}: ")
            text.append_text(safe(before or "before", palette.before, max_chars=24))
            text.append(f" {pct(h.prevalence_before)} → ")
            text.append_text(safe(after or "after", palette.after, max_chars=24))
            text.append(f" {pct(h.prevalence_after)}  ")
            text.append(
                f"Δ {pp(h.delta)} pp {interval(h.ci_low, h.ci_high)}",
                style=palette.more if (h.delta or 0) > 0 else palette.less,
            )
            text.append(f"  p {pvalue(h.p_value)}  q {pvalue(h.q_value)}")
        facts = [f"{h.n_labeled} segments labelled" if h.n_labeled else "not tested yet"]
        if h.n_user_labels:
            facts.append(f"{h.n_user_labels} labelled by you")
        if h.mde is not None:
            facts.append(f"minimum detectable effect {pp(h.mde)} pp")
        if h.reward_assoc is not None:
            facts.append(f"reward association {signed(h.reward_assoc)}")
        text.append("\n" + " · ".join(facts), style="dim")
        if h.reason:
            text.append("\nwhy: ", style="dim")
            text.append_text(safe(h.reason))
        if h.same_evidence:
            text.append("\n" + h.same_evidence.phrase())
        text.append("\ndecision: ", style="dim")
        text.append(h.decision or "none (a accept · r reject)", style="bold" if h.decision else "italic")
        if h.note:
            text.append("\nnote: ", style="dim")
            text.append_text(safe(h.note))
        text.append("\nlabeler: ", style="dim")
        text.append_text(one_line(json.dumps(h.spec, ensure_ascii=False) if h.spec is not None else "—", 300))
        text.append("\nprovenance: ", style="dim")
        text.append_text(one_line(provenance_text(h), 600))
        for wording in other_fold_wordings(h):
            text.append("\nalso drafted on the other fold as: ", style="dim")
            text.append_text(one_line(wording, 240))
        calibration = self._calibrations.get(h.hypothesis_id)
        if calibration is not None:
            from engine.hypotheses.calibration_record import calibration_lines

            text.append("\n\nlabeler calibration", style="bold")
            for line in calibration_lines(calibration):
                text.append("\n" + line)
        examples = self._examples.get(h.hypothesis_id)
        text.append(f"\n\npositive examples ({tested_on(h.provenance)})", style="bold")
        if examples is None:
            text.append(" hidden: e shows them; hypotheses you write after seeing them are exploratory", style="dim")
        elif not examples:
            text.append(": none", style="dim")
        for e in examples or []:
            s = e.segment
            style = palette.after if s.checkpoint == after else palette.before
            text.append("\n")
            text.append("held-out " if e.split == HELDOUT else f"{e.split} ", style="italic")
            text.append_text(safe(s.checkpoint, f"bold {style}", max_chars=20))
            text.append(f" {s.rollout_id[:20]} {s.kind}: ", style="dim")
            text.append_text(one_line(s.text, 240))
        target.update(text)

    # -- actions -----------------------------------------------------------------------------------------

    def action_move(self, step: int) -> None:
        table = self.query_one("#hypotheses", RowTable)
        if self.rows:
            table.move_cursor(row=max(0, min(len(self.rows) - 1, table.cursor_row + step)))

    def action_decide(self, decision: str | None) -> None:
        h = self.current
        if h is None:
            return
        from engine.store import queries, writes

        hid = h.hypothesis_id

        def save(cur):  # noqa: ANN001, ANN202
            writes.set_decision(cur, hid, decision)
            return queries.hypothesis(cur, hid)

        self.run_query(f"save-decision-{hid}", save, HypothesisSaved, write=True)

    def on_hypothesis_saved(self, message: HypothesisSaved) -> None:
        row = message.row
        if row is None:
            return
        for i, h in enumerate(self.rows):
            if h.hypothesis_id == row.hypothesis_id:
                self.rows[i] = row
                self.query_one("#hypotheses", RowTable).update_row(str(row.hypothesis_id), self._cells(row))
                break
        else:  # not listed (filtered out): show it
            self._select = row.hypothesis_id
            self.reload()
        self._show_filters()
        self._show_detail()

    def action_note(self) -> None:
        h = self.current
        if h is None:
            return
        hid = h.hypothesis_id

        def saved(note: str | None) -> None:
            if note is None:
                return
            from engine.store import queries, writes

            def save(cur):  # noqa: ANN001, ANN202
                writes.set_note(cur, hid, note)
                return queries.hypothesis(cur, hid)

            self.run_query(f"save-note-{hid}", save, HypothesisSaved, write=True)

        self.app.push_screen(NoteScreen(h.statement, h.note or ""), saved)

    def action_cycle_status(self) -> None:
        self.status_filter = STATUSES[(STATUSES.index(self.status_filter) + 1) % len(STATUSES)]
        self.reload()

    def action_cycle_decision(self) -> None:
        i = DECISION_FILTERS.index(self.decision_filter)
        self.decision_filter = DECISION_FILTERS[(i + 1) % len(DECISION_FILTERS)]
        self.reload()

    def action_add(self) -> None:
        self.app.push_screen(HypothesisForm(), self._add)

    def _add(self, new: NewHypothesis | None) -> None:
        if new is not None:
            self.rldiff.add_hypothesis(new)

    def action_test(self) -> None:
        h = self.current
        if h is not None:
            self.rldiff.start_hypothesis_test(h.hypothesis_id)

    def action_label(self) -> None:
        h = self.current
        if h is not None:
            self.app.push_screen(LabelScreen(h), lambda _: self.reload())

    # -- adding or testing in the background ----------------------------------------------------------------

    def _test_changed(self, state: HypothesisTestState | None) -> None:
        box = self.query_one("#hyp-progress")
        box.display = state is not None and not state.finished
        if state is None:
            return
        doing = "adding a hypothesis" if state.hypothesis_id is None else f"testing #{state.hypothesis_id}"
        label = Text(f" {doing}: ", style="bold", end="")
        label.append_text(one_line(state.status, 60))
        self.query_one("#hyp-progress-label", Label).update(label)
        self.query_one("#hyp-progress-bar", ProgressBar).update(total=state.total, progress=state.completed or 0)
        if state.finished:
            self._select = state.hypothesis_id
            self.reload()

    def restyle(self) -> None:
        if self.rows:
            self._fill()
            self._show_detail()
