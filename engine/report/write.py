"""Write the report file."""

from __future__ import annotations

from pathlib import Path

from engine.errors import InputError
from engine.report.content import gather
from engine.report.html import render_html
from engine.report.markdown import render_markdown
from engine.store import Store


def write_report(store: Store, path: str | Path) -> Path:
    """`rldiff report STORE -o PATH`: Markdown for .md, self-contained HTML for .html/.htm."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".md", ".markdown", ".html", ".htm"):
        raise InputError(f"{path}: the report is written as .md or .html")
    content = gather(store)
    text = render_html(content) if suffix in (".html", ".htm") else render_markdown(content)
    path.write_text(text, encoding="utf-8")
    return path
