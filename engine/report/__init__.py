"""The study report: `write_report(store, path)` writes markdown or self-contained HTML by the suffix."""

from engine.report.write import write_report

__all__ = ["write_report"]
