"""A scrolling list of text blocks (messages, examples), drawn with Textual's line API.

Each block is wrapped to the width once and its lines kept, so a list of any length shows without mounting a
widget per block, and only the lines in view are drawn. The blocks in view are wrapped before the first frame;
the others get an estimated height and are wrapped right after it (the view stays on the same text when
their real heights arrive). One block is current (shaded while the list has focus, scrolled into view when
it changes). Every line starts with the block's edge, a coloured bar.
"""

from __future__ import annotations

import math
from bisect import bisect_right

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

EDGE = "▌ "
MARKED_EDGE = "█ "


class BlockList(ScrollView, can_focus=True):
    """Subclasses say how many blocks there are and what each shows (`block_text`, `block_edge`,
    `block_style`), and call `set_blocks` when they change, `rewrap(i)` when one block's text does."""

    COMPONENT_CLASSES = {"block-list--head", "block-list--current"}
    DEFAULT_CSS = """
    BlockList {
        height: 1fr;
        & > .block-list--head { background: $panel; }
        & > .block-list--current { background: $boost; }
        &:focus > .block-list--current { background: $primary 15%; }
    }
    """
    SEPARATED = True  # a blank line between two blocks

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.current = 0
        self._head: Text | None = None  # a fixed first line, when set
        self._count = 0
        self._texts: list[Text | None] = []  # each block's text, once asked for
        self._rendered: list[list[Strip] | None] = []  # each block's lines at `_wrap` (None: not yet wrapped)
        self._heights: list[int] = []  # lines per block: real once wrapped, estimated before
        self._starts: list[int] = []  # each block's first line
        self._wrap = 0
        self._scroll_target: int | None = None  # once laid out, scroll to this block (-1: the top)

    # -- what subclasses provide -----------------------------------------------------------------------------

    def block_text(self, index: int) -> Text:
        raise NotImplementedError

    def block_edge(self, index: int) -> tuple[str, Style]:
        """The edge's characters (EDGE or MARKED_EDGE) and style."""
        return EDGE, Style()

    def block_style(self, index: int) -> Style:
        """A style laid under the block's own (a muted colour, say)."""
        return Style()

    # -- contents --------------------------------------------------------------------------------------------

    def set_blocks(self, count: int, *, head: Text | None = None, current: int = 0, scroll_to: bool = False) -> None:
        """Show `count` new blocks under `head`, with `current` current; scroll to it (else to the top)."""
        self._head, self._count = head, count
        self.current = min(current, max(0, count - 1))
        self._texts, self._rendered = [None] * count, [None] * count
        self._scroll_target = self.current if scroll_to else -1
        self._layout()

    def rewrap(self, *indexes: int) -> None:
        """Wrap these blocks again (their text changed) and lay the list out, keeping the view in place."""
        for index in indexes:
            self._texts[index] = self._rendered[index] = None
        self._layout()

    @property
    def block_count(self) -> int:
        return self._count

    # -- moving ----------------------------------------------------------------------------------------------

    def move_to(self, index: int) -> None:
        """Make block `index` current and scroll it into view (its top, if it is taller than the view)."""
        if not 0 <= index < self._count:
            return
        self.current = index
        if index < len(self._starts):
            start, end = self._starts[index], self._starts[index] + self._heights[index]
            view = self._view_lines
            if start < self.scroll_y or end - start > view:
                self.scroll_to(y=start, animate=False, immediate=True, force=True)
            elif end > self.scroll_y + view:
                self.scroll_to(y=end - view, animate=False, immediate=True, force=True)
        self.refresh()

    def action_next_block(self) -> None:
        self.move_to(self.current + 1)

    def action_previous_block(self) -> None:
        self.move_to(self.current - 1)

    # -- layout ----------------------------------------------------------------------------------------------

    @property
    def _top_lines(self) -> int:
        return 0 if self._head is None else 1

    @property
    def _view_lines(self) -> int:
        return max(1, self.scrollable_content_region.height - self._top_lines)

    def on_resize(self, event: events.Resize) -> None:
        if self._text_width() != self._wrap:
            self._rendered = [None] * self._count
            self._layout()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def _text_width(self) -> int:
        """Lines wrap as if the scrollbar were there: it comes and goes with the length of what is shown."""
        return max(10, self.size.width - self.styles.scrollbar_size_vertical - len(EDGE) - 1)

    def _text(self, index: int) -> Text:
        text = self._texts[index]
        if text is None:
            text = self._texts[index] = self.block_text(index)
        return text

    def _wrap_block(self, index: int) -> None:
        console = self.app.console
        options = console.options.update(width=self._wrap, no_wrap=False, overflow="fold", height=None)
        lines = console.render_lines(self._text(index), options, pad=False)
        self._rendered[index] = [Strip(line) for line in lines]

    def _estimate(self, index: int) -> int:
        """Lines a block will wrap to, near enough to size the scrollbar until it is wrapped."""
        return sum(max(1, math.ceil(len(line) / self._wrap)) for line in self._text(index).plain.split("\n"))

    def _place(self) -> None:
        """Heights (real or estimated) to starts, and the list's virtual size."""
        self._heights = [len(r) if r is not None else self._estimate(i) for i, r in enumerate(self._rendered)]
        gap = 1 if self.SEPARATED else 0
        self._starts, line = [], 0
        for height in self._heights:
            self._starts.append(line)
            line += height + gap
        total = line - gap if self._count else 0
        self.virtual_size = Size(self._wrap + len(EDGE) + 1, total + self._top_lines)

    def _block_at(self, line: int) -> int:
        return max(0, bisect_right(self._starts, line) - 1)

    def _layout(self) -> None:
        """Wrap the blocks in view, place every block, and wrap the rest after the next frame."""
        if self.size.width == 0:  # not laid out yet: on_resize will
            return
        wrap = self._text_width()
        if wrap != self._wrap:
            self._wrap, self._rendered = wrap, [None] * self._count
        anchor = self._anchor()
        self._place()
        top = self._restore(anchor)
        first, seen = self._block_at(top), 0
        for index in range(first, self._count):  # the view, from its first block down
            if self._rendered[index] is None:
                self._wrap_block(index)
            seen += len(self._rendered[index] or ())
            if seen >= top - self._starts[first] + self._view_lines:
                break
        self._place()
        self._restore(anchor)
        self.refresh()
        if any(r is None for r in self._rendered):
            self.call_after_refresh(self._complete)

    def _complete(self) -> None:
        """Wrap the blocks out of view, keeping the view on the same text."""
        if self.size.width == 0 or all(r is not None for r in self._rendered):
            return
        anchor = self._anchor()
        for index, lines in enumerate(self._rendered):
            if lines is None:
                self._wrap_block(index)
        self._place()
        self._restore(anchor)
        self.refresh()

    def _anchor(self) -> tuple[int, int]:
        """What the view shows at its top, as (block, line within it), to find it again after a layout."""
        target, self._scroll_target = self._scroll_target, None
        if target is not None:
            return (target, 0) if target >= 0 else (0, 0)
        if not self._starts:
            return (0, 0)
        top = round(self.scroll_y)
        block = self._block_at(top)
        return block, top - self._starts[block]

    def _restore(self, anchor: tuple[int, int]) -> int:
        block, line = anchor
        top = self._starts[block] + line if block < len(self._starts) else 0
        self.scroll_to(0, top, animate=False, immediate=True, force=True)
        return top

    # -- drawing ---------------------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        if self._head is not None and y == 0:
            style = base + self.get_component_rich_style("block-list--head")
            head = Text(" ", end="", no_wrap=True).append_text(self._head)
            return Strip(head.render(self.app.console)).adjust_cell_length(width, style).apply_style(style)
        line_no = self.scroll_offset.y + y - self._top_lines
        block = self._block_at(line_no)
        lines = self._rendered[block] if block < self._count else None
        line = line_no - self._starts[block] if self._starts else 0
        if lines is None or not 0 <= line < len(lines):  # a gap, past the end, or wrapped after this frame
            return Strip.blank(width, base)
        style = base + self.block_style(block)
        if block == self.current and self.has_focus:
            style += self.get_component_rich_style("block-list--current")
        edge, edge_style = self.block_edge(block)
        strip = Strip.join([Strip([Segment(edge, edge_style)]), lines[line]])
        return strip.adjust_cell_length(width, style).apply_style(style)
