"""Screen 1: the study at a glance: checkpoints, success rates, pipeline stages and the top findings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine.kinds import SEGMENT_KINDS
from engine.safe_text import one_line, safe
from tui import keymap
from tui.messages import ExploratoryLoaded, OverviewLoaded
from tui.numbers import pct, pp, pvalue
from tui.screens.base import RldiffScreen
from tui.widgets.row_table import RowTable
from tui.widgets.statement import statement_cell
from tui.widgets.text_table import text_table

if TYPE_CHECKING:
    from engine.store.queries import HypothesisRow, StudySummary

STAGES = ("split", "features", "deltas", "clusters", "hypotheses")
FINDING_COLUMNS = (("id", 4), ("statement", None), ("Δ pp", 7), ("q", 6), ("decision", 8))
EXPLORATORY_COLUMNS = (
    ("label", None),
    ("kind", 9),
    ("family", 10),
    ("before", 6),
    ("after", 6),
    ("Δ pp", 6),
    ("p", 6),
)
EXPLORATORY_KEY = "overview.exploratory"  # the keymap id of the key that shows the ranking


def _summary_table(summary: StudySummary, before_style: str, after_style: str) -> Text:
    columns = ("checkpoint", "tasks", "rollouts", "segments r/t/c", "success [95% CI]")
    rows = []
    for c in summary.checkpoints:
        role, style = "", ""
        if c.checkpoint == summary.before:
            role, style = " (before)", before_style
        elif c.checkpoint == summary.after:
            role, style = " (after)", after_style
        kinds = "/".join(str(c.segments_by_kind.get(k, 0)) for k in SEGMENT_KINDS)
        success = "—" if c.mean_reward is None else pct(c.mean_reward)
        if c.reward_ci:
            success += f" [{pct(c.reward_ci[0], 0)}, {pct(c.reward_ci[1], 0)}]"
        name = safe(c.checkpoint, style, max_chars=24)
        name.append(role)
        rows.append((name, str(c.n_tasks), str(c.n_rollouts), kinds, success))
    return text_table([(c, "left" if c == "checkpoint" else "right") for c in columns], rows)


def _stages_text(summary: StudySummary) -> Text:
    by_stage = {s.stage: s for s in summary.stages}
    text = Text("pipeline  ", style="bold", end="")
    for name in STAGES:
        stage = by_stage.get(name)
        mark, style = {
            "done": ("✓", "green"),
            "running": ("…", "yellow"),
            "failed": ("✗", "red"),
            "stale": ("!", "yellow"),
        }.get(stage.status if stage else "", ("·", "dim"))
        text.append(f"{mark} {name}  ", style=style)
    if not by_stage.get("deltas"):
        text.append("\nno analysis yet: run `rldiff analyze STORE`", style="italic")
    elif summary.stale:
        text.append(f"\n{summary.stale_notice()}", style="italic")
    return text


class OverviewScreen(RldiffScreen):
    NAV = "overview"
    AUTO_FOCUS = "#findings"
    BINDINGS: ClassVar[list[BindingType]] = [*keymap.OVERVIEW]

    def __init__(self) -> None:
        super().__init__()
        self._exploratory: list[dict[str, Any]] | None = None  # loaded (and logged) on request only

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="overview-body"):
            yield Static(id="study")
            yield Static(id="stages")
            yield Static(Text("Top validated findings", style="bold"), id="findings-title")
        yield RowTable(id="findings")
        # A small study's whole-study ranking: it includes held-out rollouts, so it is hidden until asked for
        # (EXPLORATORY_KEY) and the showing is logged (docs/statistics.md, "No leaks").
        yield Static(id="exploratory-title")
        yield RowTable(id="exploratory")

    def on_mount(self) -> None:
        self.query_one("#findings", RowTable).set_columns(FINDING_COLUMNS, self.app.size.width)
        self._show_exploratory(False)
        super().on_mount()

    def reload(self) -> None:
        from engine.hypotheses.reasons import counted
        from engine.store import queries

        self.run_query(
            "overview",
            lambda cur: (
                queries.study_summary(cur),
                queries.top_findings(cur, limit=20),
                counted(queries.hypotheses(cur)),
            ),
            lambda result: OverviewLoaded(*result),
        )

    def on_overview_loaded(self, message: OverviewLoaded) -> None:
        self._summary, self._findings, self._tally = message.summary, message.findings, message.tally
        self.restyle()
        self.refresh_bindings()  # the exploratory key shows once the summary says there is a ranking

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The exploratory key is live, and in the key bar, only where there is a ranking to show."""
        if action == "exploratory":
            return hasattr(self, "_summary") and bool(self._exploratory_pointer())
        return True

    def restyle(self) -> None:
        if not hasattr(self, "_summary"):
            return
        self._fill_header()
        self.query_one("#stages", Static).update(_stages_text(self._summary))
        self._fill_findings(self._findings)
        self._fill_exploratory()

    def _fill_header(self) -> None:
        palette = self.palette
        summary = self._summary
        header = Text("Study  ", style="bold", end="")
        header.append(f"{summary.n_tasks} tasks · {summary.n_features} features · {summary.n_hypotheses} hypotheses")
        if summary.before and summary.after:
            header.append("\ncomparing ")
            header.append(safe(summary.before, palette.before, max_chars=30))
            header.append(" → ")
            header.append(safe(summary.after, palette.after, max_chars=30))
        if summary.small_study_notice():
            header.append(f"\n{summary.small_study_notice()}.", style="bold yellow")
        if not self.query_one("#exploratory", RowTable).display and (pointer := self._exploratory_pointer()):
            header.append(f"\n{pointer}.", style="yellow")
        header.append("\n")
        header.append_text(_summary_table(summary, palette.before, palette.after))
        self.query_one("#study", Static).update(header)

    def _fill_findings(self, findings: list[HypothesisRow]) -> None:
        table = self.query_one("#findings", RowTable)
        statement_width = table.set_columns(FINDING_COLUMNS, self.app.size.width)
        for h in findings:
            table.add_row(
                Text(str(h.hypothesis_id)),
                statement_cell(h, statement_width),
                Text(pp(h.delta), style=self.palette.more if (h.delta or 0) > 0 else self.palette.less),
                Text(pvalue(h.q_value)),
                Text(h.decision or ""),
                key=str(h.hypothesis_id),
            )
        title = Text("Top validated findings" if findings else "Top validated findings: none yet", style="bold")
        title.append(f"\n{self._tally}", style="italic")  # why the others were not validated, beside the findings
        self.query_one("#findings-title", Static).update(title)

    def _exploratory_pointer(self) -> str:
        key = keymap.keys_for_id(EXPLORATORY_KEY, self.rldiff.keymap_overrides)
        return self._summary.exploratory_pointer(f"press {key}")

    def action_exploratory(self) -> None:
        """Show (or hide again) a small study's whole-study ranking; loading it logs a held-out view (a write):
        hypotheses written afterwards are exploratory."""
        if self._exploratory is not None:
            self._show_exploratory(not self.query_one("#exploratory", RowTable).display)
            return
        from engine.hypotheses.exposure import show_exploratory

        summary = self._summary  # the one the header's pointer was drawn from
        self.run_query(
            "save-exploratory-view", lambda cur: show_exploratory(cur, "tui", summary), ExploratoryLoaded, write=True
        )

    def on_exploratory_loaded(self, message: ExploratoryLoaded) -> None:
        self._exploratory = message.rows
        self._fill_exploratory()
        self._show_exploratory(True)

    def _show_exploratory(self, shown: bool) -> None:
        table = self.query_one("#exploratory", RowTable)
        self.query_one("#exploratory-title", Static).display = table.display = shown
        self.set_class(shown, "-exploratory")
        if hasattr(self, "_summary"):
            self._fill_header()  # its pointer to the ranking shows while the ranking does not
        (table if shown else self.query_one("#findings", RowTable)).focus()

    def _fill_exploratory(self) -> None:
        if self._exploratory is None:
            return
        from engine.store.queries.overview import EXPLORATORY_RULE, EXPLORATORY_TITLE

        title = Text(EXPLORATORY_TITLE, style="bold")
        title.append(f"\n{EXPLORATORY_RULE}", style="italic")
        self.query_one("#exploratory-title", Static).update(title)
        table = self.query_one("#exploratory", RowTable)
        label_width = table.set_columns(EXPLORATORY_COLUMNS, self.app.size.width)
        for i, r in enumerate(self._exploratory):
            delta = r.get("delta")
            table.add_row(
                one_line(r.get("label"), label_width),
                one_line(r.get("kind"), 9),
                one_line(r.get("family"), 10),
                Text(pct(r.get("prevalence_before"), 0), justify="right"),
                Text(pct(r.get("prevalence_after"), 0), justify="right"),
                Text(pp(delta), style=self.palette.more if (delta or 0) > 0 else self.palette.less, justify="right"),
                Text(pvalue(r.get("p_value")), justify="right"),
                key=str(i),
            )

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        if event.table.id == "exploratory":
            row = (self._exploratory or [])[int(event.row_key)]
            self.rldiff.open_feature(int(row["feature_id"]), row.get("kind"))
            return
        self._open(event.row_key)

    def action_open_finding(self) -> None:
        table = self.query_one("#findings", RowTable)
        if table.row_count:
            self._open(table.row_keys[table.cursor_row])

    def action_reload(self) -> None:
        self.reload()

    def _open(self, key: str | None) -> None:
        if key is not None:
            self.rldiff.jump("hypothesis", int(key))
