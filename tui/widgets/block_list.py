"""A scrolling list of text blocks (messages, examples), drawn with Textual's line API.

Each block is wrapped to the width once and its lines kept, so a list of any length shows without mounting a
widget per block, and only the lines in view are drawn. One block is current (shaded while the list has
focus, scrolled into view when it changes). Every line starts with the block's edge, a coloured bar.
"""

from __future__ import annotations

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
        self._rendered: list[list[Strip]] = []  # each block's lines at `_wrap`, without the edge
        self._lines: list[tuple[int, int]] = []  # (block, line within it); (-1, 0) separates two blocks
        self._starts: list[int] = []  # each block's first line
        self._wrap = 0
        self._scroll_pending = False  # once laid out, scroll to `_scroll_target` (a block, or None: the top)
        self._scroll_target: int | None = None

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
        self._rendered = []
        self._scroll_pending, self._scroll_target = True, self.current if scroll_to else None
        self._layout()

    def rewrap(self, *indexes: int) -> None:
        """Wrap these blocks again (their text changed) and lay the list out."""
        for index in indexes:
            self._wrap_block(index)
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
            start, end = self._starts[index], self._starts[index] + len(self._rendered[index])
            view = max(1, self.scrollable_content_region.height - self._top_lines)
            if start < self.scroll_y or end - start > view:
                self.scroll_to(y=start, animate=False, immediate=True, force=True)
            elif end > self.scroll_y + view:
                self.scroll_to(y=end - view, animate=False, immediate=True, force=True)
        self.refresh()

    def action_next_block(self) -> None:
        self.move_to(self.current + 1)

    def action_previous_block(self) -> None:
        self.move_to(self.current - 1)

    # -- layout and drawing ----------------------------------------------------------------------------------

    @property
    def _top_lines(self) -> int:
        return 0 if self._head is None else 1

    def on_resize(self, event: events.Resize) -> None:
        if self._text_width() != self._wrap:
            self._rendered = []
            self._layout()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def _text_width(self) -> int:
        """Lines wrap as if the scrollbar were there: it comes and goes with the length of what is shown."""
        return max(10, self.size.width - self.styles.scrollbar_size_vertical - len(EDGE) - 1)

    def _wrap_block(self, index: int) -> None:
        if index < len(self._rendered):
            console = self.app.console
            options = console.options.update(width=self._wrap, no_wrap=False, overflow="fold", height=None)
            self._rendered[index] = [
                Strip(line) for line in console.render_lines(self.block_text(index), options, pad=False)
            ]

    def _layout(self) -> None:
        """Wrap what is not wrapped at the current width and lay the lines out."""
        if self.size.width == 0:  # not laid out yet: on_resize will
            return
        self._wrap = self._text_width()
        while len(self._rendered) < self._count:
            self._rendered.append([])
            self._wrap_block(len(self._rendered) - 1)
        self._lines, self._starts = [], []
        for index, lines in enumerate(self._rendered):
            if index and self.SEPARATED:
                self._lines.append((-1, 0))
            self._starts.append(len(self._lines))
            self._lines.extend((index, i) for i in range(len(lines)))
        self.virtual_size = Size(self._wrap + len(EDGE) + 1, len(self._lines) + self._top_lines)
        if self._scroll_pending:
            self._scroll_pending = False
            target = self._scroll_target
            top = self._starts[target] if target is not None and target < len(self._starts) else 0
            self.scroll_to(0, top, animate=False, immediate=True, force=True)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        if self._head is not None and y == 0:
            style = base + self.get_component_rich_style("block-list--head")
            head = Text(" ", end="", no_wrap=True).append_text(self._head)
            return Strip(head.render(self.app.console)).adjust_cell_length(width, style).apply_style(style)
        index = self.scroll_offset.y + y - self._top_lines
        if index >= len(self._lines) or self._lines[index][0] < 0:
            return Strip.blank(width, base)
        block, line = self._lines[index]
        style = base + self.block_style(block)
        if block == self.current and self.has_focus:
            style += self.get_component_rich_style("block-list--current")
        edge, edge_style = self.block_edge(block)
        strip = Strip.join([Strip([Segment(edge, edge_style)]), self._rendered[block][line]])
        return strip.adjust_cell_length(width, style).apply_style(style)
