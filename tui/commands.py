"""The command palette's provider: jump to a feature, cluster, hypothesis or rollout by name."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.markup import escape

from engine.safe_text import one_line
from tui.session import StoreUnavailable

if TYPE_CHECKING:
    from engine.store.queries import SearchHit
    from tui.host import StudyHost


class JumpProvider(Provider):
    """Searches the store (in a thread) as the user types."""

    @property
    def rldiff(self) -> StudyHost:
        # The palette runs only inside tui.app.RldiffApp, which mypy checks against StudyHost there.
        return cast("StudyHost", self.app)

    def _lookup(self, text: str) -> list[SearchHit]:
        from engine.store import queries

        try:
            with self.rldiff.session.cursor() as cur:
                return queries.search(cur, text)
        except StoreUnavailable:
            return []

    async def search(self, query: str) -> Hits:
        if not query.strip():
            return
        matcher = self.matcher(query)
        for hit in await asyncio.to_thread(self._lookup, query.strip()):
            title = one_line(f"{hit.category}: {hit.title}", 120)
            score = matcher.match(title.plain) or 0.1
            yield Hit(
                score,
                title,
                partial(self.rldiff.jump, hit.category, hit.id),
                text=title.plain,
                help=escape(one_line(hit.detail, 120).plain),
            )  # the palette reads help as markup

    async def discover(self) -> Hits:
        for mode, title in (
            ("overview", "Overview"),
            ("deltas", "Deltas"),
            ("clusters", "Clusters"),
            ("hypotheses", "Hypotheses"),
            ("rollouts", "Rollouts"),
        ):
            yield DiscoveryHit(
                Text(f"go to {title}"),
                partial(self.app.switch_mode, mode),
                help="type a name to jump to a feature, cluster, hypothesis or rollout",
            )
        yield DiscoveryHit(
            Text("run the A/A check (check-null)"),
            self.rldiff.action_check_null,
            help="split the first checkpoint within each task, analyse, report what validates (should be nothing)",
        )
