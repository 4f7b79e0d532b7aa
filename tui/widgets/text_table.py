"""Small tables as one styled Text: columns as wide as their widest cell, a bold header.

A Static holding a Rich `Table` measures and renders it again on every layout and every refresh (a screen
coming back into view, a style change): 5-10 ms for a table of three rows. As Text, the same lines cost
a fraction of a millisecond to build and lay out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from rich.text import Text

Justify = Literal["left", "right"]


def text_table(columns: Sequence[tuple[str, Justify]], rows: Iterable[Sequence[str | Text]]) -> Text:
    """`columns` as (header, justify); each row a cell per column (str or Text, one line each)."""
    cells = [[Text(header, style="bold") for header, _ in columns]]
    cells += [[cell if isinstance(cell, Text) else Text(cell) for cell in row] for row in rows]
    widths = [max(row[i].cell_len for row in cells) for i in range(len(columns))]
    table = Text(end="", no_wrap=True, overflow="crop")
    for number, row in enumerate(cells):
        if number:
            table.append("\n")
        for i, (cell, width, (_, justify)) in enumerate(zip(row, widths, columns, strict=True)):
            if i:
                table.append(" ")
            padding = " " * (width - cell.cell_len)
            if justify == "right":
                table.append(padding)
            table.append_text(cell)
            if justify == "left" and i < len(columns) - 1:
                table.append(padding)
    return table
