"""A virtual table: renders only the visible rows of any number of rows (Line API).

Contract:

* Subclasses implement :meth:`VirtualTable.row_count` and :meth:`VirtualTable.row_cells`
  (cell texts and an optional component-class name that styles the row); nothing is
  stored per row here, so a million rows cost nothing until they are on screen.
* Line 0 is a fixed header (column labels, the sorted column marked ▲/▼); it scrolls
  horizontally with the rows. Column widths follow the pane's width
  (:func:`layout_columns`): the ``flex`` column (the digest) takes the rest; when the
  pane is narrow, columns first shrink to their ``min_width``, then the lowest
  ``priority`` ones are hidden; when it is wide, columns grow to their ``max_width``
  (names not cut) once the flex column has ``FLEX_COMFORT`` cells.
* The cursor (a row position) moves with the keyboard (↑ ↓ PgUp PgDn Home End) and the
  mouse (click); every move posts :class:`VirtualTable.CursorMoved`. A click on the
  header posts :class:`VirtualTable.HeaderClicked` (sorting is up to the owner). Enter
  posts :class:`VirtualTable.Activated`.
* Call :meth:`VirtualTable.rows_changed` after the row count or contents change.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

ELLIPSIS = "…"
#: the flex column gets this many cells before other columns grow past their width
FLEX_COMFORT = 48
#: width of a time column per time format (relative, absolute, with date, UTC, epoch)
TIME_WIDTHS = {"r": 10, "a": 15, "ad": 26, "ud": 26, "e": 17}


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    width: int
    right: bool = False        # right-aligned (numbers)
    flex: bool = False         # takes the remaining width (at least ``width``)
    min_width: int | None = None   # may shrink to this when the pane is narrow
    max_width: int | None = None   # may grow to this when the pane is wide
    priority: int = 0          # narrow panes hide the lowest priorities first


def layout_columns(columns: list[Column], avail: int) -> list[int]:
    """Widths of ``columns`` in ``avail`` cells (one separator cell between shown
    columns); 0 hides a column. Shrink to ``min_width`` first, then hide by ascending
    ``priority`` (the flex column is never hidden); spare cells go to the preferred
    ``width`` (highest priority first), the flex column up to :data:`FLEX_COMFORT`,
    ``max_width`` (highest priority first), and the rest to the flex column. When even
    the remaining columns at their minimum do not fit, the sum exceeds ``avail`` (the
    table scrolls horizontally)."""
    n = len(columns)
    mins = [c.width if c.flex or c.min_width is None else min(c.min_width, c.width)
            for c in columns]
    drop_order = sorted((i for i in range(n) if not columns[i].flex),
                        key=lambda i: columns[i].priority)
    shown = list(range(n))

    def need(widths: list[int]) -> int:
        return sum(widths[i] for i in shown) + max(0, len(shown) - 1)

    for i in drop_order:
        if need(mins) <= avail:
            break
        shown.remove(i)
    widths = [mins[i] if i in shown else 0 for i in range(n)]
    spare = avail - need(widths)
    by_priority = sorted((i for i in shown if not columns[i].flex),
                         key=lambda i: -columns[i].priority)
    flex = [i for i in shown if columns[i].flex]

    def grow(i: int, to: int) -> None:
        nonlocal spare
        add = max(0, min(spare, to - widths[i]))
        widths[i] += add
        spare -= add

    for i in by_priority:
        grow(i, columns[i].width)
    for i in flex:
        grow(i, max(FLEX_COMFORT, columns[i].width))
    for i in by_priority:
        grow(i, columns[i].max_width or columns[i].width)
    for i in flex:
        grow(i, widths[i] + spare)
    return widths


def fit(text: str, width: int, right: bool = False) -> str:
    """``text`` cut (with …) or padded to exactly ``width`` cells."""
    if width <= 0:
        return ""
    if len(text) > width:
        return text[:width - 1] + ELLIPSIS
    return text.rjust(width) if right else text.ljust(width)


class VirtualTable(ScrollView, can_focus=True):
    """Base class; see the module contract."""

    COMPONENT_CLASSES = {
        "vtable--header", "vtable--cursor", "vtable--cursor-blur", "vtable--error",
        "vtable--unanswered", "vtable--orphan", "vtable--dim", "vtable--warn",
        "vtable--match", "vtable--all",
    }

    BINDINGS = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "activate", "Select", show=False),
    ]

    cursor: reactive[int] = reactive(0, always_update=True)

    class CursorMoved(Message):
        """The cursor moved to ``position`` (a row position in the table)."""

        def __init__(self, table: VirtualTable, position: int) -> None:
            super().__init__()
            self.table = table
            self.position = position

        @property
        def control(self) -> VirtualTable:
            return self.table

    class Activated(CursorMoved):
        """Enter was pressed on ``position``."""

    class HeaderClicked(Message):
        """The header of column ``key`` was clicked."""

        def __init__(self, table: VirtualTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> VirtualTable:
            return self.table

    def __init__(self, columns: list[Column], *, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.columns = columns
        self.sort_key: str | None = None
        self.sort_reverse = False
        self.time_format = "r"
        self._quiet = False
        self._layout_key: tuple[int, tuple[Column, ...]] | None = None
        self._layout: list[int] = []

    def set_time_format(self, time_format: str, keys: tuple[str, ...]) -> None:
        """Use ``time_format`` (``-t`` formats) and size the time columns ``keys`` for it."""
        self.time_format = time_format
        width = TIME_WIDTHS.get(time_format, 10)
        self.columns = [replace(c, width=width, min_width=None) if c.key in keys else c for c in self.columns]
        self.rows_changed()

    # ----------------------------------------------------------------- to override
    def row_count(self) -> int:
        return 0

    def row_cells(self, position: int) -> tuple[list[str], str | None]:
        """Cell texts of the row at ``position`` and a component class to style it."""
        return [], None

    def cell_segments(self, position: int, key: str, text: str, style: Style) -> list[Segment]:
        """Segments of one (already fitted) cell; override to highlight parts of it."""
        return [Segment(text, style)]

    # ----------------------------------------------------------------- geometry
    def _widths(self) -> list[int]:
        region = self.content_region
        avail = region.width
        if self.row_count() + 1 > region.height:     # room for the vertical scrollbar
            avail -= self.styles.scrollbar_size_vertical
        key = (avail, tuple(self.columns))
        if self._layout_key != key:
            self._layout_key = key
            self._layout = layout_columns(self.columns, max(avail, 0))
        return self._layout

    def _total_width(self) -> int:
        widths = [w for w in self._widths() if w]
        return sum(widths) + len(widths) - 1

    def column_x(self, key: str) -> int | None:
        """The content x where column ``key`` starts (None when hidden or unknown)."""
        x = 0
        for col, w in zip(self.columns, self._widths()):
            if not w:
                continue
            if col.key == key:
                return x - int(self.scroll_x)
            x += w + 1
        return None

    def shown_columns(self) -> list[str]:
        """Keys of the columns the current width shows (narrow panes hide some)."""
        return [c.key for c, w in zip(self.columns, self._widths()) if w]

    @property
    def body_height(self) -> int:
        """Rows visible below the header."""
        return max(1, self.scrollable_content_region.height - 1)

    def rows_changed(self) -> None:
        """Recompute the virtual size (row count changed) and repaint."""
        count = self.row_count()
        self.virtual_size = Size(self._total_width(), count + 1)
        if count and self.cursor >= count:
            self._quiet = True
            self.cursor = count - 1
            self._quiet = False
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        self.rows_changed()

    # ----------------------------------------------------------------- rendering
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self.rich_style
        if y == 0:
            strip = self._header_strip(base)
        else:
            position = scroll_y + y - 1
            if position >= self.row_count():
                return Strip.blank(width, base)
            strip = self._row_strip(position, base)
        return strip.crop_extend(scroll_x, scroll_x + width, base)

    def _header_strip(self, base: Style) -> Strip:
        style = base + self.get_component_rich_style("vtable--header")
        segs = []
        for col, w in zip(self.columns, self._widths()):
            if not w:
                continue
            label = col.label
            if col.key == self.sort_key:
                label += " ▼" if self.sort_reverse else " ▲"
            segs.append(Segment(fit(label, w, col.right), style))
            segs.append(Segment(" ", style))
        if segs:
            segs.pop()
        return Strip(segs)

    def _row_strip(self, position: int, base: Style) -> Strip:
        cells, klass = self.row_cells(position)
        style = base
        if klass:
            style = style + self.get_component_rich_style(klass)
        if position == self.cursor:
            style = style + self.get_component_rich_style(
                "vtable--cursor" if self.has_focus else "vtable--cursor-blur")
        segs: list[Segment] = []
        for col, w, text in zip(self.columns, self._widths(), cells):
            if not w:
                continue
            segs.extend(self.cell_segments(position, col.key, fit(text, w, col.right), style))
            segs.append(Segment(" ", style))
        if segs:
            segs.pop()
        return Strip(segs)

    # ----------------------------------------------------------------- cursor
    def watch_cursor(self, old: int, new: int) -> None:
        count = self.row_count()
        if count and not 0 <= new < count:
            self.cursor = max(0, min(new, count - 1))
            return
        self.scroll_to_cursor()
        self.refresh()
        if not self._quiet and count:
            self.post_message(self.CursorMoved(self, new))

    def move_cursor(self, position: int, *, quiet: bool = False) -> None:
        """Put the cursor on ``position``; ``quiet`` posts no CursorMoved."""
        self._quiet = quiet
        try:
            self.cursor = position
        finally:
            self._quiet = False

    def scroll_to_cursor(self) -> None:
        top = self.scroll_y
        body = self.body_height
        c = self.cursor
        if c < top:
            self.scroll_to(y=c, animate=False, force=True)
        elif c >= top + body:
            self.scroll_to(y=c - body + 1, animate=False, force=True)

    def keep_line(self, position: int, line: int) -> None:
        """Scroll so that ``position`` shows on body line ``line`` (0 = first row)."""
        self.scroll_to(y=max(0, position - line), animate=False, force=True)

    def action_cursor_up(self) -> None:
        if self.row_count():
            self.cursor = max(0, self.cursor - 1)

    def action_cursor_down(self) -> None:
        if self.row_count():
            self.cursor = min(self.row_count() - 1, self.cursor + 1)

    def action_page_up(self) -> None:
        if self.row_count():
            self.cursor = max(0, self.cursor - self.body_height)

    def action_page_down(self) -> None:
        if self.row_count():
            self.cursor = min(self.row_count() - 1, self.cursor + self.body_height)

    def action_first(self) -> None:
        if self.row_count():
            self.cursor = 0

    def action_last(self) -> None:
        if self.row_count():
            self.cursor = self.row_count() - 1

    def action_activate(self) -> None:
        if self.row_count():
            self.post_message(self.Activated(self, self.cursor))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        event.stop()
        if offset.y == 0:
            x = offset.x + int(self.scroll_x)
            pos = 0
            for col, w in zip(self.columns, self._widths()):
                if not w:
                    continue
                if pos <= x < pos + w + 1:
                    self.post_message(self.HeaderClicked(self, col.key))
                    return
                pos += w + 1
            return
        position = int(self.scroll_y) + offset.y - 1
        if 0 <= position < self.row_count():
            self.cursor = position
            if event.chain >= 2:
                self.post_message(self.Activated(self, position))

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
