"""Hex view of one Kafka frame, linked to the detail tree.

Contract:

* :class:`HexView` shows a frame as it crossed the wire (size prefix + body, see
  :func:`kwsniff.output.hexdump.frame_bytes`) in the ``tshark -x`` layout (offset,
  16 bytes in two groups of 8, ASCII), rendering only visible lines, so a 100 MiB
  frame opens as fast as a small one.
* :meth:`HexView.show` sets the bytes; :attr:`HexView.highlight` (a half-open
  ``(start, end)`` in frame offsets) is shown emphasised and scrolled into view.
* Selecting bytes: a click on a byte (hex or ASCII column) or the arrow keys move the
  byte cursor and post :class:`HexView.ByteSelected` with the frame offset, so the
  owner can focus the field that holds that byte.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

PER_LINE = 16
_PRINTABLE = [chr(b) if 0x20 <= b < 0x7F else "." for b in range(256)]
_HEX = [f"{b:02x}" for b in range(256)]


def offset_width(size: int) -> int:
    """Hex digits of the offset column for a frame of ``size`` bytes."""
    return max(4, len(f"{max(size - 1, 0):x}"))


def hex_x(width: int, column: int) -> int:
    """Screen x of the first hex digit of byte ``column`` (0-15) of a line."""
    return width + 2 + column * 3 + (1 if column >= 8 else 0)


def ascii_x(width: int, column: int) -> int:
    """Screen x of byte ``column`` in the ASCII part of a line."""
    return width + 2 + PER_LINE * 3 + 1 + 2 + column


def byte_at(width: int, x: int) -> int | None:
    """The byte column (0-15) at screen x of a line, or None (gaps count as nothing)."""
    for col in range(PER_LINE):
        hx = hex_x(width, col)
        if hx <= x < hx + 2:
            return col
        if ascii_x(width, col) == x:
            return col
    return None


class HexView(ScrollView, can_focus=True):
    """See the module contract."""

    COMPONENT_CLASSES = {"hexview--offset", "hexview--highlight", "hexview--cursor",
                         "hexview--title"}

    BINDINGS = [
        Binding("left", "move(-1)", "Byte left", show=False),
        Binding("right", "move(1)", "Byte right", show=False),
        Binding("up", "move(-16)", "Line up", show=False),
        Binding("down", "move(16)", "Line down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First byte", show=False),
        Binding("end", "jump(-1)", "Last byte", show=False),
    ]

    class ByteSelected(Message):
        """The user selected the byte at frame ``offset``."""

        def __init__(self, view: HexView, offset: int) -> None:
            super().__init__()
            self.view = view
            self.offset = offset

        @property
        def control(self) -> HexView:
            return self.view

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data = b""
        self.title = ""
        self.note = ""
        self.highlight: tuple[int, int] | None = None
        self.cursor: int | None = None

    # ----------------------------------------------------------------- content
    def show(self, data: bytes, title: str = "", note: str = "") -> None:
        """Show ``data`` (frame bytes) with a title line; clears highlight and cursor."""
        self.data = data
        self.title = title
        self.note = note
        self.highlight = None
        self.cursor = None
        self._resize()
        self.scroll_to(y=0, animate=False, force=True)
        self.refresh()

    def clear(self, title: str = "") -> None:
        self.show(b"", title)

    @property
    def lines(self) -> int:
        return (len(self.data) + PER_LINE - 1) // PER_LINE

    def _resize(self) -> None:
        width = offset_width(len(self.data))
        extra = 1 + (1 if self.note else 0)
        self.virtual_size = Size(ascii_x(width, PER_LINE), self.lines + extra)

    def set_highlight(self, span: tuple[int, int] | None, *, scroll: bool = True) -> None:
        """Emphasise frame bytes ``[start, end)`` and scroll them into view."""
        if span is not None:
            start, end = max(0, span[0]), min(len(self.data), span[1])
            span = (start, end) if end > start else None
        self.highlight = span
        if span is not None and scroll:
            self._scroll_to_offset(span[0], span[1])
        self.refresh()

    def _scroll_to_offset(self, start: int, end: int | None = None) -> None:
        first = start // PER_LINE + 1            # +1: the title line
        last = ((end if end else start + 1) - 1) // PER_LINE + 1
        top = int(self.scroll_y)
        height = max(1, self.scrollable_content_region.height)
        if first < top or first >= top + height:
            self.scroll_to(y=max(0, first - 1), animate=False, force=True)
        elif last >= top + height and last - first < height:
            self.scroll_to(y=last - height + 1, animate=False, force=True)

    # ----------------------------------------------------------------- rendering
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self.rich_style
        line = scroll_y + y
        if line == 0:
            style = base + self.get_component_rich_style("hexview--title")
            strip = Strip([Segment(self.title, style)])
        elif line - 1 < self.lines:
            strip = self._data_strip(line - 1, base)
        elif line - 1 == self.lines and self.note:
            strip = Strip([Segment(self.note, base + self.get_component_rich_style(
                "hexview--offset"))])
        else:
            return Strip.blank(width, base)
        return strip.crop_extend(scroll_x, scroll_x + width, base)

    def _data_strip(self, index: int, base: Style) -> Strip:
        data = self.data
        start = index * PER_LINE
        chunk = data[start:start + PER_LINE]
        width = offset_width(len(data))
        hl = self.highlight
        cur = self.cursor
        hl_style = base + self.get_component_rich_style("hexview--highlight")
        cur_style = base + self.get_component_rich_style("hexview--cursor")

        def style_of(pos: int) -> Style:
            if cur is not None and pos == cur:
                return cur_style
            if hl is not None and hl[0] <= pos < hl[1]:
                return hl_style
            return base

        def inside(pos: int) -> bool:
            return hl is not None and hl[0] <= pos < hl[1]

        segs = [Segment(f"{start:0{width}x}", base + self.get_component_rich_style(
            "hexview--offset")), Segment("  ", base)]
        n = len(chunk)
        for col in range(PER_LINE):
            pos = start + col
            if col < n:
                segs.append(Segment(_HEX[chunk[col]], style_of(pos)))
            else:
                segs.append(Segment("  ", base))
            if col == PER_LINE - 1:
                break
            # the gap after this byte is emphasised when the range continues past it
            joined = col + 1 < n and inside(pos) and inside(pos + 1)
            gap = "  " if col == 7 else " "
            segs.append(Segment(gap, hl_style if joined else base))
        segs.append(Segment("   ", base))
        for col, b in enumerate(chunk):
            segs.append(Segment(_PRINTABLE[b], style_of(start + col)))
        return Strip(segs)

    # ----------------------------------------------------------------- selection
    def _select(self, offset: int) -> None:
        if not self.data:
            return
        offset = max(0, min(offset, len(self.data) - 1))
        self.cursor = offset
        self._scroll_to_offset(offset)
        self.refresh()
        self.post_message(self.ByteSelected(self, offset))

    def action_move(self, delta: int) -> None:
        base = self.cursor if self.cursor is not None else \
            (self.highlight[0] if self.highlight else 0)
        self._select(base + delta if self.cursor is not None or delta < 0 else base)

    def action_page(self, direction: int) -> None:
        height = max(1, self.scrollable_content_region.height - 1)
        base = self.cursor if self.cursor is not None else 0
        self._select(base + direction * height * PER_LINE)

    def action_jump(self, where: int) -> None:
        self._select(len(self.data) - 1 if where < 0 else 0)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or not self.data:
            return
        event.stop()
        line = int(self.scroll_y) + offset.y - 1
        if not 0 <= line < self.lines:
            return
        col = byte_at(offset_width(len(self.data)), offset.x + int(self.scroll_x))
        if col is None:
            return
        pos = line * PER_LINE + col
        if pos < len(self.data):
            self.focus()
            self._select(pos)
