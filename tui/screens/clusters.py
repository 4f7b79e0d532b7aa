"""Screen 3: clusters of co-occurring significant features; Enter lists a cluster's members."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import Static

from engine.safe_text import one_line
from tui import keymap
from tui.messages import ClusterMembersLoaded, ClustersLoaded
from tui.numbers import pct, pvalue
from tui.screens.base import RldiffScreen
from tui.screens.deltas import SOURCE_SHORT
from tui.widgets.columns import Columns
from tui.widgets.delta_bar import bar_column_width, delta_bar
from tui.widgets.row_table import RowTable

if TYPE_CHECKING:
    from engine.store.queries import ClusterMember, ClusterRow


def cluster_columns(width: int) -> Columns:
    bar = bar_column_width(width)
    return (("id", 4), ("label", None), ("kind", 4), ("size", 4), ("before", 6), ("after", 6), ("Δ pp", bar), ("q", 6))


def member_columns(width: int) -> Columns:
    bar = bar_column_width(width)
    return (("feature", None), ("src", 3), ("memb", 4), ("before", 6), ("after", 6), ("Δ pp", bar), ("q", 6))


class ClustersScreen(RldiffScreen):
    NAV = "clusters"
    AUTO_FOCUS = "#clusters"
    BINDINGS: ClassVar[list[BindingType]] = [*keymap.CLUSTERS]

    def __init__(self) -> None:
        super().__init__()
        self._clusters: list[ClusterRow] = []
        self._members: list[ClusterMember] = []
        self._member_of: int | None = None
        self._pending: int | None = None

    def compose_body(self) -> ComposeResult:
        yield RowTable(id="clusters")
        yield Static(Text("members: highlight a cluster", style="dim"), id="members-title")
        yield RowTable(id="members")

    def on_mount(self) -> None:
        self._fill_clusters()
        self._fill_members()
        super().on_mount()

    def reload(self) -> None:
        from engine.store import queries

        self.run_query("clusters", queries.clusters, ClustersLoaded)

    def on_clusters_loaded(self, message: ClustersLoaded) -> None:
        self._clusters = message.clusters
        self._fill_clusters()
        if self._pending is not None:
            self.select_cluster(self._pending)
        if not self._clusters:
            self.query_one("#members-title", Static).update(
                Text("no clusters in the store (the clusters stage has not run, or found none)", style="italic")
            )

    def _scale(self, values: list[float | None]) -> float:
        return max((abs(v) for v in values if v is not None), default=0.0) or 0.1

    def _fill_clusters(self) -> None:
        table = self.query_one("#clusters", RowTable)
        cursor = table.cursor_row
        width = table.set_columns(cluster_columns(self.app.size.width), self.app.size.width)
        palette, scale = self.palette, self._scale([c.delta for c in self._clusters])
        for c in self._clusters:
            table.add_row(
                Text(str(c.cluster_id)),
                one_line(c.label, width),
                Text(c.kind[:4]),
                Text(str(c.size)),
                Text(pct(c.prevalence_before)),
                Text(pct(c.prevalence_after)),
                delta_bar(c.delta, scale, palette, bar_column_width(self.app.size.width)),
                Text(pvalue(c.q_value)),
                key=str(c.cluster_id),
            )
        if self._clusters:
            table.move_cursor(row=min(cursor, len(self._clusters) - 1))

    def on_row_table_row_highlighted(self, event: RowTable.RowHighlighted) -> None:
        if event.table.id == "clusters":
            self._load_members(int(event.row_key))

    def _load_members(self, cluster_id: int) -> None:
        from engine.store import queries

        if cluster_id == self._member_of:
            return
        self._member_of = cluster_id
        self.run_query(
            "cluster-members",
            lambda cur: queries.cluster_members(cur, cluster_id),
            lambda members: ClusterMembersLoaded(cluster_id, members),
        )

    def on_cluster_members_loaded(self, message: ClusterMembersLoaded) -> None:
        if message.cluster_id != self._member_of:
            return
        self._members = message.members
        self._fill_members()

    def _fill_members(self) -> None:
        table = self.query_one("#members", RowTable)
        width = table.set_columns(member_columns(self.app.size.width), self.app.size.width)
        palette, scale = self.palette, self._scale([m.delta for m in self._members])
        for m in self._members:
            table.add_row(
                one_line(m.label, width),
                Text(SOURCE_SHORT.get(m.source, m.source[:3]), style="dim"),
                Text("" if m.membership is None else f"{m.membership:.2f}"),
                Text(pct(m.prevalence_before)),
                Text(pct(m.prevalence_after)),
                delta_bar(m.delta, scale, palette, bar_column_width(self.app.size.width)),
                Text(pvalue(m.q_value)),
                key=str(m.feature_id),
            )
        cluster = next((c for c in self._clusters if c.cluster_id == self._member_of), None)
        title = Text(f"members of cluster {self._member_of}", style="bold")
        if cluster is not None:
            title.append(f" ({len(self._members)} features, {cluster.kind} segments) · Enter opens one", style="dim")
        self.query_one("#members-title", Static).update(title)

    def restyle(self) -> None:
        self._fill_clusters()
        self._fill_members()

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        if event.table.id == "clusters":
            self.query_one("#members", RowTable).focus()
        else:
            cluster = next((c for c in self._clusters if c.cluster_id == self._member_of), None)
            self.rldiff.open_feature(int(event.row_key), cluster.kind if cluster else None)

    def action_open(self) -> None:
        table = self.focused if isinstance(self.focused, RowTable) else self.query_one("#clusters", RowTable)
        if table.row_count:
            table.action_select_cursor()

    def action_back_to_clusters(self) -> None:
        self.query_one("#clusters", RowTable).focus()

    def select_cluster(self, cluster_id: int) -> None:
        """Move the cursor to a cluster (from the command palette)."""
        table = self.query_one("#clusters", RowTable)
        try:
            table.move_cursor(row=table.get_row_index(str(cluster_id)))
            self._pending = None
        except KeyError:  # not loaded yet: select it when it is
            self._pending = cluster_id
        table.focus()
