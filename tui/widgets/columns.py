"""Table columns sized to the terminal: fixed columns keep their width, flexible ones share the rest."""

from __future__ import annotations

from collections.abc import Sequence

Columns = Sequence[tuple[str, int | None]]  # (header, width); None = flexible


def flexible_width(columns: Columns, total_width: int, minimum: int = 12) -> int:
    """The width each flexible column gets in a table `total_width` cells wide (cell padding, scrollbar)."""
    fixed = sum(w for _, w in columns if w) + 2 * len(columns) + 2
    flexible = sum(1 for _, w in columns if not w) or 1
    return max(minimum, (total_width - fixed) // flexible)
