"""Write the report file, logging the held-out examples it shows (docs/statistics.md, "No leaks")."""

from __future__ import annotations

from pathlib import Path

from engine.errors import InputError
from engine.hypotheses.exposure import record_heldout_view
from engine.report.content import gather
from engine.report.html import render_html
from engine.report.markdown import render_markdown
from engine.store import Store


def write_report(store: Store, path: str | Path) -> Path:
    """`rldiff report STORE -o PATH`: Markdown for .md, self-contained HTML for .html/.htm. A report that
    shows held-out evidence (examples of findings, a small study's whole-study ranking) logs a held-out view (so
    `store` is opened for writing then): hypotheses written after reading it are exploratory."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".md", ".markdown", ".html", ".htm"):
        raise InputError(f"{path}: the report is written as .md or .html")
    content = gather(store)
    text = render_html(content) if suffix in (".html", ".htm") else render_markdown(content)
    if content.shows_heldout:
        if store.read_only:
            raise InputError(
                f"{store.path}: the report shows held-out evidence, and showing it is logged: "
                "open the store for writing"
            )
        record_heldout_view(store.cursor(), "report")
    path.write_text(text, encoding="utf-8")
    return path
