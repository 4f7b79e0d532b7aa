"""The feature screen: what a feature is, how it changed (overall and per task), and where it fires."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.widgets import ContentSwitcher, Static

from engine.kinds import SENTENCE_SOURCES
from engine.safe_text import one_line, safe
from tui import keymap
from tui.messages import FeatureLoaded, FeatureRewardLoaded
from tui.numbers import interval, pct, pp, pvalue, signed
from tui.screens.base import RldiffScreen
from tui.widgets.example_list import ExampleItem, ExampleList
from tui.widgets.text_table import text_table
from tui.widgets.token_text import highlighted_tokens

if TYPE_CHECKING:
    import duckdb

    from engine.store.queries import FeatureDetail, TaskDelta
    from tui.themes import Palette


def _tab_line(current: str) -> Text:
    text = Text(end="", no_wrap=True)
    for key, tab, title in (("e", "examples", "Examples"), ("t", "tasks", "By task"), ("w", "reward", "By reward")):
        text.append(f" {key} {title} ", style="bold reverse" if tab == current else "dim")
    return text


_ONE_LINE = str.maketrans("\n\r\t", "   ")


def _bar(value: float | None, width: int, style: str) -> Text:
    cells = 0 if value is None else round(max(0.0, min(1.0, value)) * width)
    return Text("█" * cells + "·" * (width - cells), style=style, end="")


def stats_table(detail: FeatureDetail, palette: Palette) -> Text:
    columns = ("kind", "before", "after", "Δ pp", "95% CI", "q", "pooled", "rollouts", "reward b/a")
    rows = []
    for d in detail.deltas:
        r = d.row
        style = palette.more if (r.delta or 0) > 0 else palette.less
        rows.append(
            (
                r.kind,
                pct(r.prevalence_before),
                pct(r.prevalence_after),
                Text(pp(r.delta), style=style),
                interval(r.ci_low, r.ci_high, 0),
                pvalue(r.q_value) if r.tested else Text("untst", style="dim"),
                Text(f"{pct(r.pooled_before, 0)}→{pct(r.pooled_after, 0)}", style="dim"),
                f"{pct(d.rollout_rate_before, 0)}→{pct(d.rollout_rate_after, 0)}",
                f"{signed(d.reward_assoc_before)}/{signed(d.reward_assoc_after)}",
            )
        )
    return text_table([(c, "left" if c == "kind" else "right") for c in columns], rows)


def task_chart(rows: list[TaskDelta], palette: Palette, width: int = 10) -> Text:
    columns = ("task", "before", "", "after", "", "Δ pp")
    cells = []
    for t in rows:
        if t.prevalence_before is None and t.prevalence_after is None:
            continue  # no contrast in this task (for a tool call: no tool of the feature both checkpoints call)
        delta = (
            None
            if t.prevalence_before is None or t.prevalence_after is None
            else (t.prevalence_after - t.prevalence_before)
        )
        cells.append(
            (
                one_line(t.task_id, 16),
                _bar(t.prevalence_before, width, palette.before),
                pct(t.prevalence_before, 0),
                _bar(t.prevalence_after, width, palette.after),
                pct(t.prevalence_after, 0),
                Text(pp(delta), style=palette.more if (delta or 0) > 0 else palette.less),
            )
        )
    return text_table([(c, "right" if c in ("", "Δ pp") else "left") for c in columns], cells)


def load_reward(feature_id: int, kinds: list[str], before: str, after: str) -> Callable[..., FeatureRewardLoaded]:
    def load(cur: duckdb.DuckDBPyConnection) -> FeatureRewardLoaded:
        import polars as pl

        from engine.strata import deltas_by_reward

        pairs = pl.DataFrame({"feature_id": [feature_id] * len(kinds), "kind": kinds})
        return FeatureRewardLoaded(feature_id, deltas_by_reward(cur, pairs, before, after).to_dicts())

    return load


def reward_table(rows: list[dict]) -> Text:
    """Per kind: prevalence before -> after within successes and within failures."""
    cells = [
        [
            r["kind"],
            r["stratum"],
            pct(r["prevalence_before"]),
            pct(r["prevalence_after"]),
            str(r["n_before"] or 0),
            str(r["n_after"] or 0),
        ]
        for r in rows
    ]
    columns = ("kind", "rollouts", "before", "after", "n before", "n after")
    return text_table([(c, "left" if c in ("kind", "rollouts") else "right") for c in columns], cells)


def load_feature(feature_id: int) -> Callable[[duckdb.DuckDBPyConnection], FeatureLoaded]:
    def load(cur: duckdb.DuckDBPyConnection) -> FeatureLoaded:
        from engine.store import queries

        return FeatureLoaded(feature_id, queries.feature_detail(cur, feature_id))

    return load


class FeatureScreen(RldiffScreen):
    BINDINGS: ClassVar[list[BindingType]] = [*keymap.FEATURE]
    NAV = "deltas"
    AUTO_FOCUS = "#examples"

    def __init__(self, feature_id: int, kind: str | None = None, loaded: FeatureLoaded | None = None) -> None:
        """`loaded`: the feature's data when the opener already has it (then the screen opens complete)."""
        super().__init__()
        self.feature_id = feature_id
        self.kind = kind
        self.detail: FeatureDetail | None = None
        self._loaded = loaded
        self._stale = loaded is None

    def on_mount(self) -> None:
        super().on_mount()
        if self._loaded is not None:
            self.on_feature_loaded(self._loaded)

    def show(self, feature_id: int, kind: str | None, loaded: FeatureLoaded) -> None:
        """Show another feature in this screen (the app reuses it), from the examples tab."""
        self.feature_id, self.kind = feature_id, kind
        self.action_show_tab("examples")
        self.query_one(ExampleList).current = 0
        self.on_feature_loaded(loaded)

    def compose_body(self) -> ComposeResult:
        yield Static(Text(f"feature {self.feature_id}: loading…"), id="feature-head")
        yield Static(id="feature-stats")
        yield Static(_tab_line("examples"), id="feature-tab-line")
        with ContentSwitcher(initial="examples", id="feature-tabs"):
            yield ExampleList(id="examples")
            with VerticalScroll(id="tasks"):
                yield Static(id="feature-tasks")
            with VerticalScroll(id="reward"):
                yield Static(id="feature-reward")

    def reload(self) -> None:
        self.run_query("feature", load_feature(self.feature_id), lambda loaded: loaded)

    def on_feature_loaded(self, message: FeatureLoaded) -> None:
        self.detail = message.detail
        self.restyle()
        self.query_one(ExampleList).focus()

    def restyle(self) -> None:
        detail = self.detail
        head = self.query_one("#feature-head", Static)
        if detail is None:
            if hasattr(self, "_loaded_once"):
                head.update(Text(f"no feature with id {self.feature_id}", style="bold"))
            return
        self._loaded_once = True
        palette = self.palette
        # opened from a row of one kind: the label drawn from that kind's examples, the feature's own beside it
        called = next((d.row.label for d in detail.deltas if d.row.kind == self.kind), detail.label)
        title = safe(called, "bold", max_chars=200)
        if called != detail.label:
            title.append("\nall kinds: ", style="dim")
            title.append_text(safe(detail.label, max_chars=200))
        title.append(f"\n{detail.name} · {detail.source} · fires above {detail.threshold:.3g}", style="dim")
        if detail.clusters:
            title.append(" · cluster " + ", ".join(str(c) for c, _ in detail.clusters), style="dim")
        if detail.explanation:
            title.append("\n")
            title.append_text(safe(detail.explanation, max_chars=300))
        if detail.top_ngrams:  # concept and group features: distinctive words of their sentences
            title.append("\nwords: " if detail.source in SENTENCE_SOURCES else "\nn-grams: ", style="dim")
            title.append_text(one_line(" · ".join(detail.top_ngrams[:8]), 160))
        head.update(title)
        self.query_one("#feature-stats", Static).update(stats_table(detail, palette))
        self._show_tasks()
        examples = self.query_one(ExampleList)
        window = max(40, self.app.size.width - 6) * 2
        shown: list[ExampleItem] = []
        for e in detail.examples:
            s = e.segment
            style = palette.after if s.checkpoint == self.rldiff.compared[1] else palette.before
            line = safe(s.checkpoint, f"bold {style}", max_chars=20)
            line.append(
                f" · {s.rollout_id[:24]} · task {s.task_id[:16]} · {s.kind} · act {e.activation:.2f}\n", style="dim"
            )
            flat = s.text.translate(_ONE_LINE)  # same length, so token offsets still hold
            line.append_text(highlighted_tokens(flat, e.tokens, palette, window=window))
            shown.append(ExampleItem(str(s.segment_id), line, Style.parse(style)))
        examples.show(shown, empty="no stored examples for this feature", current=examples.current)

    def _show_tasks(self) -> None:
        """Fill the per-task tab, when it is the one shown (a study can have thousands of tasks)."""
        detail = self.detail
        if detail is None or self.query_one("#feature-tabs", ContentSwitcher).current != "tasks":
            return
        kind = self.kind or (detail.deltas[0].row.kind if detail.deltas else None)
        tasks = [t for t in detail.task_deltas if t.kind == kind]
        chart = Text(f"prevalence per task, {kind} segments\n", style="bold")
        self.query_one("#feature-tasks", Static).update(
            chart.append_text(task_chart(tasks, self.palette))
            if tasks
            else Text("no per-task breakdown in the store", style="italic")
        )

    def _show_reward(self) -> None:
        """Load the success/failure breakdown, when its tab is the one shown."""
        detail, (before, after) = self.detail, self.rldiff.compared
        if detail is None or self.query_one("#feature-tabs", ContentSwitcher).current != "reward":
            return
        if before is None or after is None:
            self.query_one("#feature-reward", Static).update(Text("no analysis in the store yet", style="italic"))
            return
        kinds = list(dict.fromkeys(d.row.kind for d in detail.deltas))
        self.run_query("feature-reward", load_reward(self.feature_id, kinds, before, after), lambda loaded: loaded)

    def on_feature_reward_loaded(self, message: FeatureRewardLoaded) -> None:
        if message.feature_id != self.feature_id:
            return
        head = Text("prevalence within successes (reward >= 0.5) and failures, discovery split\n", style="bold")
        self.query_one("#feature-reward", Static).update(
            head.append_text(reward_table(message.rows))
            if message.rows
            else Text("no rewarded rollouts for this feature's kinds", style="italic")
        )

    def action_show_tab(self, tab: str) -> None:
        self.query_one("#feature-tabs", ContentSwitcher).current = tab
        self.query_one("#feature-tab-line", Static).update(_tab_line(tab))
        self.query_one(f"#{tab}").focus()
        self._show_tasks()
        self._show_reward()

    def on_example_list_selected(self, event: ExampleList.Selected) -> None:
        if self.detail is None:
            return
        for e in self.detail.examples:
            if str(e.segment.segment_id) == event.key:
                self.rldiff.open_rollout(e.segment.rollout_key, segment_id=e.segment.segment_id)
