"""The kwsniff TUI application: connections, exchanges, detail tree and linked hex view.

Contract:

* :class:`KwsniffApp` opens a capture file (``capture=``) or a live source
  (``live=``, an opened :class:`~kwsniff.capture.live.LiveSource`) and decodes it in a
  background thread (:class:`~kwsniff.tui.loader.Loader`) into an
  :class:`~kwsniff.tui.store.ExchangeStore`; the first screen shows at once and the
  list grows while the capture loads (progress bar in the status line). Once rows are
  shown, the list and the status line are updated at most every
  :data:`LOADING_PAINT_SECONDS` while loading, off-screen growth every
  :data:`GROW_SECONDS`.
* Panes: filter bar (``-Y`` language), connections (selecting one filters the list),
  exchange list (virtual; sortable by clicking a header or ``o``/``O``), detail tree of
  the selected exchange with the focused field's description, hex view of the frame
  with the focused field's bytes highlighted (and bytes selecting fields).
* The selection follows the exchange, not the line: new exchanges (live capture, a
  capture still loading, a re-sort) never move it; ``p`` pauses the list.
* Keys are listed in the footer and on the help screen (``?``); ``s`` statistics,
  ``e`` export of the current view as JSON Lines, ``/`` search in digests.
* Everything the user can get wrong (bad filter, unwritable export path) is reported in
  the UI; decoding problems of the capture are shown in the status line.
"""

from __future__ import annotations

import os
import time
from array import array
from pathlib import Path
from typing import Any, TypeVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Footer, Header, Input, ProgressBar, Static, Tree

from kwsniff.errors import UserError
from kwsniff.output.filter import FilterError
from kwsniff.output.hexdump import frame_bytes
from kwsniff.output.pipeline import not_kafka_text
from kwsniff.output.summary import TIME_FORMATS
from kwsniff.output.tree import TreeNode, build_tree
from kwsniff.tui.export import export_rows
from kwsniff.tui.loader import Loader
from kwsniff.tui.rowfacts import make_matcher
from kwsniff.tui.store import DEFAULT_MAX_ROWS, ExchangeStore
from kwsniff.tui.view import SORT_COLUMNS, ViewBuilder, ViewSpec, find_match, position_of
from kwsniff.tui.widgets.connections import ConnectionTable
from kwsniff.tui.widgets.detail import DetailTree, describe_node
from kwsniff.tui.widgets.exchanges import ExchangeTable
from kwsniff.tui.widgets.filterbar import FilterBar
from kwsniff.tui.widgets.hexview import HexView

W = TypeVar("W", bound=Widget)

TICK_SECONDS = 0.2
CONNECTIONS_REFRESH_SECONDS = 1.0
GROW_SECONDS = 1.0           # off-screen growth of the list is shown at most this often
LOADING_PAINT_SECONDS = 0.5  # while loading (rows shown): list and status updated this often
DETAIL_DELAY = 0.05          # cursor must rest this long before an exchange is decoded
CONNECTION_DELAY = 0.25      # ... before a connection filters the list
SORT_ORDER = list(SORT_COLUMNS)


class KwsniffApp(App[None]):
    """See the module contract."""

    CSS_PATH = "app.tcss"
    TITLE = "kwsniff"
    #: screen classes the layout in app.tcss depends on (see there)
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]

    BINDINGS = [
        Binding("f", "focus_filter", "Filter"),
        Binding("slash", "search", "Search"),
        Binding("n", "search_next", "Next match", show=False),
        Binding("N", "search_previous", "Previous match", show=False),
        Binding("s", "stats", "Stats"),
        Binding("i", "insights", "Insights", show=False),
        Binding("e", "export", "Export"),
        Binding("p", "pause", "Pause"),
        Binding("o", "sort_next", "Sort"),
        Binding("O", "sort_reverse", "Reverse sort", show=False),
        Binding("c", "toggle_connections", "Show/hide connections", show=False),
        Binding("b", "toggle_bytes", "Show/hide bytes", show=False),
        Binding("a", "all_connections", "All connections", show=False),
        Binding("x", "swap_frame", "Req/Resp hex"),
        Binding("t", "time_format", "Time format", show=False),
        Binding("m", "maximize", "Maximize pane", show=False),
        Binding("question_mark,f1", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, *, capture: str | None = None, interface: str | None = None,
                 options: Any = None, ports: tuple[int, ...] = (),
                 bpf_filter: str | None = None, buffer_mib: int | None = None,
                 plugin_args: Any = None, display_filter: str | None = None,
                 max_exchanges: int = DEFAULT_MAX_ROWS, spill_dir: str | None = None,
                 start_loading: bool = True, decoders: int = 1) -> None:
        super().__init__()
        if (capture is None) == (interface is None):
            raise ValueError("give exactly one of capture and interface")
        self.capture = capture
        self.live_name = interface
        self.loader = Loader(path=capture, interface=interface, options=options, ports=ports,
                             bpf_filter=bpf_filter, buffer_mib=buffer_mib,
                             plugin_args=plugin_args, spill_dir=spill_dir,
                             max_rows=max_exchanges, workers=decoders)
        self.store: ExchangeStore = self.loader.store
        self.initial_filter = display_filter
        self.start_loading = start_loading
        self.spec = ViewSpec()
        self.builder: ViewBuilder | None = None
        self.builder_generation = -1
        self.selected_row: int | None = None
        self.selected_exchange: Any = None
        self.tree_root: TreeNode | None = None
        self.hex_message: str | None = None
        self.paused = False
        self.paused_at = 0
        self.search_text = ""
        self._search_cache: tuple[str, int, list[int]] | None = None
        self._detail_timer: Timer | None = None
        self._conn_timer: Timer | None = None
        self._last_conn_refresh = 0.0
        self._conn_interval = CONNECTIONS_REFRESH_SECONDS
        self._last_grow = 0.0
        self._next_loading_paint = 0.0
        self._last_progress = -1.0
        self._status_shown = ""
        self._conn_count = -1
        self._dropped_seen = 0
        self._time_format = "r"
        self._mounted_at = 0.0
        self.first_screen_seconds: float | None = None
        self.loaded_seconds: float | None = None
        self._load_reported = False
        self._main_screen: Screen[Any] | None = None
        self._reselect = False       # a view change may have dropped the selection

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield Header()
        yield FilterBar(id="filterbar")
        with Horizontal(id="status"):
            yield ProgressBar(id="progress", show_eta=False)
            yield Static("", id="status-text")
        with Vertical(id="top"):
            yield ConnectionTable(id="connections")
            yield ExchangeTable(self.store, id="exchanges")
        with Horizontal(id="bottom"):
            with Vertical(id="detail-pane"):
                yield DetailTree(id="detail")
                yield Static(describe_node(None), id="field-info")
            yield HexView(id="hex")
        yield Input(placeholder="search digests (Enter: next match, Escape: close)",
                    id="search", classes="hidden")
        yield Footer()

    def _q(self, selector: str, kind: type[W]) -> W:
        """A widget of the main screen (also while another screen is shown)."""
        screen = self._main_screen if self._main_screen is not None else self.screen
        return screen.query_one(selector, kind)

    @property
    def exchanges(self) -> ExchangeTable:
        return self._q("#exchanges", ExchangeTable)

    @property
    def connections(self) -> ConnectionTable:
        return self._q("#connections", ConnectionTable)

    @property
    def detail(self) -> DetailTree:
        return self._q("#detail", DetailTree)

    @property
    def hexview(self) -> HexView:
        return self._q("#hex", HexView)

    @property
    def filterbar(self) -> FilterBar:
        return self._q("#filterbar", FilterBar)

    def on_mount(self) -> None:
        self._main_screen = self.screen
        self._mounted_at = time.monotonic()
        self.sub_title = self._source_name()
        self.exchanges.border_title = "Exchanges"
        self.connections.border_title = "Connections"
        self.detail.border_title = "Detail"
        self.hexview.border_title = "Bytes"
        self.hexview.clear("select an exchange to see its bytes")
        self.filterbar.validate("")
        self.exchanges.focus()
        if self.initial_filter:
            self.filterbar.set_expression(self.initial_filter)
            self._apply_filter(self.initial_filter)
        if self.start_loading:
            self.run_worker(self.loader.run, thread=True, group="loader", name="loader")
        self.set_interval(TICK_SECONDS, self._tick)
        self.call_after_refresh(self._first_paint)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Main-screen keys do nothing (and leave the footer) while another screen shows."""
        if action in self._MAIN_ACTIONS and self._main_screen is not None and \
                self.screen is not self._main_screen:
            return False
        return True

    _MAIN_ACTIONS = frozenset({
        "focus_filter", "search", "search_next", "search_previous", "stats", "export",
        "pause", "sort_next", "sort_reverse", "toggle_connections", "toggle_bytes",
        "all_connections",
        "swap_frame", "time_format", "maximize", "help"})

    def _first_paint(self) -> None:
        if self.first_screen_seconds is None:
            self.first_screen_seconds = time.monotonic() - self._mounted_at

    def _source_name(self) -> str:
        if self.capture is not None:
            return Path(self.capture).name
        return f"live: {self.live_name or 'interface'}"

    def on_unmount(self) -> None:
        if self.builder is not None:
            self.builder.cancel()
        self.loader.close()

    # ------------------------------------------------------------------ ticking
    def _tick(self) -> None:
        if not self.screen_stack or not self.is_running:
            return
        try:
            self._tick_once()
        except NoMatches:      # shutting down: the widgets are gone
            return

    def _tick_once(self) -> None:
        store = self.store
        loader = self.loader
        if store.dropped != self._dropped_seen:
            self._dropped_seen = store.dropped
            self._set_spec(self.spec)          # views may hold dropped rows
        base = loader.first_ts if loader.first_ts is not None else store.first_ts
        if base is not None and base != self.exchanges.time_base:
            # the capture's first packet once the decoder reports it, the first
            # exchange until then: rows already drawn are drawn again
            self.exchanges.time_base = base
            self.connections.time_base = base
            self.exchanges.refresh()
            self.connections.refresh()
        now = time.monotonic()
        if not loader.done and self.exchanges.count:
            # loading: at most 1 / LOADING_PAINT_SECONDS repaints of the list and status
            # (the decoder needs the CPU more than the screen needs the news)
            if now < self._next_loading_paint:
                return
            self._next_loading_paint = now + LOADING_PAINT_SECONDS
        if not self.paused:
            self._update_rows()
        if now - self._last_conn_refresh >= self._conn_interval or \
                (loader.done and self._conn_count != len(store.connections)):
            self._refresh_connections()
        self._update_status()
        if loader.done and not self._load_reported:
            self._load_reported = True
            self.loaded_seconds = loader.elapsed
            self._refresh_connections()
            if loader.error:
                self.notify(loader.error, title="capture", severity="error", timeout=10,
                            markup=False)

    def _update_rows(self) -> None:
        table = self.exchanges
        store = self.store
        builder = self.builder
        if builder is None:
            count = store.count - store.first_row
            if count != table.count or table.rows_ref is not None:
                if table.rows_ref is None and not self._growth_due(count):
                    return
                first = table.count == 0 and count > 0
                table.set_rows(None, count)
                if first and self.selected_row is None:
                    table.move_cursor(0)       # open the first exchange
            return
        rows = builder.rows
        count = len(rows)
        if rows is table.rows_ref and count == table.count:
            if self._reselect and builder.complete:
                self._follow_view(rows, count, builder)
            return
        replaced = rows is not table.rows_ref
        if not replaced and not self._growth_due(count):
            return
        screen_line = table.cursor - int(table.scroll_y)
        table.set_rows(rows, count)
        if self.selected_row is not None and (replaced or table.row_at(table.cursor)
                                              != self.selected_row):
            pos = position_of(rows, self.selected_row, ascending=not self.spec.sorted)
            if pos is not None:
                self._reselect = False
                table.move_cursor(pos, quiet=True)
                table.keep_line(pos, max(0, min(screen_line, table.body_height - 1)))
                return
        if self._reselect:
            self._follow_view(rows, count, builder)

    def _follow_view(self, rows: Any, count: int, builder: ViewBuilder) -> None:
        """After a view change that dropped the selected exchange: the cursor goes to the
        first row of the view (Detail and Bytes follow), or Detail and Bytes are cleared
        when nothing matches. Waits until the selection is known to be out of the view
        (a complete view, or an unsorted one already past it)."""
        selected = self.selected_row
        if selected is not None and not builder.complete and \
                (self.spec.sorted or not count or rows[count - 1] < selected):
            return
        if count:
            self._reselect = False
            table = self.exchanges
            table.move_cursor(0)
            table.keep_line(0, 0)
        elif builder.complete:
            self._reselect = False
            self._clear_detail("no exchange in this view")

    def _clear_detail(self, message: str) -> None:
        self.selected_row = None
        self.selected_exchange = None
        self.tree_root = None
        self.hex_message = None
        self.detail.show_tree(None)
        self.hexview.clear(message)
        self._show_field(None)

    def _growth_due(self, count: int) -> bool:
        """Whether rows appended at the end should be shown now: at once when they land
        on screen, else at most every GROW_SECONDS (a resize re-lays out the screen)."""
        table = self.exchanges
        now = time.monotonic()
        visible_end = int(table.scroll_y) + table.body_height
        if table.count < visible_end or now - self._last_grow >= GROW_SECONDS or \
                self.loader.done:
            self._last_grow = now
            return True
        return False

    def _refresh_connections(self) -> None:
        started = time.monotonic()
        conns = list(self.store.connections.values())
        self._conn_count = len(conns)
        table = self.connections
        table.update_rows(conns, keep_stream=table.stream_at(table.cursor))
        self._last_conn_refresh = done = time.monotonic()
        # with 100k connections a refresh costs ~0.1 s: keep it under ~5 % of the time
        self._conn_interval = max(CONNECTIONS_REFRESH_SECONDS, 20 * (done - started))

    def _update_status(self) -> None:
        loader = self.loader
        store = self.store
        bar = self._q("#progress", ProgressBar)
        if loader.done:
            bar.update(total=100, progress=100)
        elif loader.progress is not None:
            progress = round(loader.progress * 100, 1)
            if abs(progress - self._last_progress) >= 0.5:
                self._last_progress = progress
                bar.update(total=100, progress=progress)
        else:
            bar.update(total=None)
        parts = []
        total = store.count - store.first_row
        shown = self.exchanges.count
        # paused: the totals the list was frozen at (the new ones are counted apart)
        listed = self.paused_at if self.paused else total
        if self.spec.identity:
            parts.append(f"{shown if self.paused else total} exchanges")
        else:
            parts.append(f"{shown} of {listed} exchanges")
            if self.builder is not None and not self.builder.complete:
                prog = self.builder.progress()
                if prog is not None and prog < 1:
                    parts.append(f"filtering {int(prog * 100)}%")
        if self.spec.stream is not None:
            parts.append(f"stream {self.spec.stream}")
        if self.spec.expression:
            parts.append(f"filter: {self.spec.expression}")
        if self.spec.sorted:
            parts.append(f"sorted by {SORT_COLUMNS[self.spec.sort or 'no']}"
                         f"{' (reversed)' if self.spec.reverse else ''}")
        if loader.done:
            c = loader.counters or {}
            state = "loaded" if loader.path else "capture stopped"
            parts.append(f"{state}: {c.get('packets', loader.packets)} packets, "
                         f"{c.get('connections', 0)} connections, {c.get('problems', 0)} problems")
            other = not_kafka_text(c)
            if other is not None:
                parts.append(other)
            if loader.error:
                parts.append(f"error: {loader.error}")
        elif loader.live:
            drops = f", {loader.dropped} dropped by the kernel" if loader.dropped else ""
            parts.append(f"capturing: {loader.packets} packets{drops}")
        else:
            parts.append(f"loading: {loader.packets} packets, {loader.elapsed:.1f} s")
        if self.paused:
            parts.append(f"PAUSED ({total - self.paused_at} new, p resumes)")
        if store.dropped:
            parts.append(f"oldest {store.dropped} dropped (limit {store.max_rows})")
        text = " · ".join(parts)
        if text != self._status_shown:
            self._status_shown = text
            # fixed size: no layout pass needed
            self._q("#status-text", Static).update(Text(text), layout=False)

    # ------------------------------------------------------------------ view spec
    def _set_spec(self, spec: ViewSpec) -> None:
        if self.builder is not None:
            self.builder.cancel()
            self.builder = None
        self.spec = spec
        table = self.exchanges
        table.sort_key = spec.sort if spec.sorted else None
        table.sort_reverse = spec.reverse
        if spec.identity:
            table.set_rows(None, self.store.count - self.store.first_row)
            if self.selected_row is not None:
                pos = self.selected_row - self.store.first_row
                if 0 <= pos < table.count:
                    table.move_cursor(pos, quiet=True)
                    table.scroll_to_cursor()
            elif table.count:
                table.move_cursor(0)           # nothing selected: open the first one
        else:
            builder = ViewBuilder(self.store, spec, lambda: self.loader.done)
            self.builder = builder
            self._reselect = True
            table.set_rows(builder.rows, 0)
            self.run_worker(builder.run, thread=True, group="view", name="view")
        if self.paused:
            self.paused = False
        self._update_status()

    def _apply_filter(self, expression: str) -> None:
        expression = expression.strip()
        if not expression:
            self._set_spec(ViewSpec("", None, self.spec.stream, self.spec.sort,
                                    self.spec.reverse))
            return
        try:
            _flt, matcher, _fast = make_matcher(expression)
        except FilterError as err:
            self.notify(err.message, title="filter", severity="error", markup=False)
            return
        self._set_spec(ViewSpec(expression, matcher, self.spec.stream, self.spec.sort,
                                self.spec.reverse))

    def _apply_stream(self, stream: int | None) -> None:
        if stream == self.spec.stream:
            return
        s = self.spec
        self._set_spec(ViewSpec(s.expression, s.matcher, stream, s.sort, s.reverse))

    def _apply_sort(self, column: str | None, reverse: bool) -> None:
        s = self.spec
        self._set_spec(ViewSpec(s.expression, s.matcher, s.stream, column, reverse))

    # ------------------------------------------------------------------ events
    @on(FilterBar.Applied)
    def _filter_applied(self, event: FilterBar.Applied) -> None:
        self._apply_filter(event.expression)
        self.exchanges.focus()

    @on(FilterBar.Cancelled)
    def _filter_cancelled(self) -> None:
        self.exchanges.focus()

    @on(ExchangeTable.CursorMoved, "#exchanges")
    def _exchange_moved(self, event: ExchangeTable.CursorMoved) -> None:
        row = self.exchanges.row_at(event.position)
        if row is None or row == self.selected_row:
            return
        self.selected_row = row
        if self._detail_timer is not None:
            self._detail_timer.stop()
        self._detail_timer = self.set_timer(DETAIL_DELAY, lambda: self._load_detail(row))

    @on(ExchangeTable.Activated, "#exchanges")
    def _exchange_activated(self, event: ExchangeTable.Activated) -> None:
        self.detail.focus()

    @on(ExchangeTable.HeaderClicked, "#exchanges")
    def _exchange_header(self, event: ExchangeTable.HeaderClicked) -> None:
        if event.key not in SORT_COLUMNS:
            return
        if self.spec.sort == event.key:
            self._apply_sort(event.key, not self.spec.reverse)
        else:
            self._apply_sort(event.key, False)

    @on(ConnectionTable.CursorMoved, "#connections")
    def _connection_moved(self, event: ConnectionTable.CursorMoved) -> None:
        stream = self.connections.stream_at(event.position)
        if self._conn_timer is not None:
            self._conn_timer.stop()
        self._conn_timer = self.set_timer(CONNECTION_DELAY, lambda: self._apply_stream(stream))

    @on(ConnectionTable.Activated, "#connections")
    def _connection_activated(self, event: ConnectionTable.Activated) -> None:
        if self._conn_timer is not None:
            self._conn_timer.stop()
        self._apply_stream(self.connections.stream_at(event.position))
        self.exchanges.focus()

    @on(ConnectionTable.HeaderClicked, "#connections")
    def _connection_header(self, event: ConnectionTable.HeaderClicked) -> None:
        self.connections.sort_by(event.key)

    # ------------------------------------------------------------------ detail
    @work(thread=True, exclusive=True, group="detail")
    def _load_detail(self, row: int) -> None:
        ex = self.store.exchange(row)
        root = None
        if ex is not None:
            try:
                root = build_tree(ex, spans=True)
            except Exception as err:  # noqa: BLE001 - show the problem instead of crashing
                root = TreeNode("Problem", f"the detail tree could not be built: "
                                           f"{type(err).__name__}: {err}", style="warn")
        if self.selected_row == row:
            self.call_from_thread(self._show_detail, row, ex, root)

    def _show_detail(self, row: int, ex: Any, root: TreeNode | None) -> None:
        if self.selected_row != row:
            return
        self.selected_exchange = ex
        self.tree_root = root
        self.detail.show_tree(root)
        self.hex_message = None
        if ex is None:
            self.hexview.clear("the exchange is no longer stored (row limit)")
            self._show_field(None)
            return
        first = "request" if ex.request is not None else "response"
        self._show_frame(first)
        self._show_field(root)

    def _show_frame(self, kind: str) -> None:
        ex = self.selected_exchange
        if ex is None:
            return
        msg = ex.request if kind == "request" else ex.response
        if msg is None:
            return
        self.hex_message = kind
        frames = f"frame {msg.frame_first}" if msg.frame_first == msg.frame_last \
            else f"frames {msg.frame_first}-{msg.frame_last}"
        title = f"{kind}: {msg.size} bytes, {frames}"
        other = ex.response if kind == "request" else ex.request
        if other is not None:
            title += " (x: show the " + ("response" if kind == "request" else "request") + ")"
        note = f"{msg.missing} bytes lost in a capture gap are not shown" if msg.missing else ""
        self.hexview.show(frame_bytes(msg.raw, msg.size), title, note)

    def _show_field(self, node: TreeNode | None) -> None:
        self._q("#field-info", Static).update(describe_node(node, self.selected_exchange),
                                              layout=False)
        hexview = self.hexview
        if node is None or node.message is None or node.start is None or node.length is None:
            hexview.set_highlight(None)
            return
        if node.message != self.hex_message:
            self._show_frame(node.message)
        hexview.set_highlight((node.start, node.start + node.length),
                              scroll=not hexview.has_focus)

    @on(Tree.NodeHighlighted, "#detail")
    def _node_highlighted(self, event: Tree.NodeHighlighted[TreeNode]) -> None:
        self._show_field(event.node.data)

    @on(HexView.ByteSelected, "#hex")
    def _byte_selected(self, event: HexView.ByteSelected) -> None:
        if self.hex_message is None:
            return
        node = self.detail.focus_offset(self.hex_message, event.offset)
        if node is None:
            self._show_field(None)

    # ------------------------------------------------------------------ search
    def action_search(self) -> None:
        box = self._q("#search", Input)
        box.remove_class("hidden")
        box.value = self.search_text
        box.focus()

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.search_text = event.value.strip()
        self.exchanges.needle = self.search_text or None
        self.exchanges.refresh()
        box = self._q("#search", Input)
        box.add_class("hidden")
        self.exchanges.focus()
        if self.search_text:
            self._find(forward=True)

    def on_key(self, event: Any) -> None:
        if event.key == "escape":
            box = self._q("#search", Input)
            if box.has_focus:
                box.add_class("hidden")
                self.exchanges.focus()
                event.stop()

    def action_search_next(self) -> None:
        self._find(forward=True)

    def action_search_previous(self) -> None:
        self._find(forward=False)

    def _matches(self) -> list[int]:
        text = self.search_text
        cache = self._search_cache
        if cache is not None and cache[0] == text and cache[1] == self.store.count:
            return cache[2]
        rows = self.store.search(text)
        self._search_cache = (text, self.store.count, rows)
        return rows

    def _find(self, forward: bool) -> bool:
        """Move the cursor to the next (previous) exchange whose digest matches."""
        if not self.search_text:
            self.action_search()
            return False
        table = self.exchanges
        n = table.count
        if not n:
            return False
        matches = self._matches()
        if not matches:
            self.notify(f"no digest contains {self.search_text!r}", severity="warning",
                        markup=False)
            return False
        start = table.cursor
        pos = find_match(table.rows_ref, table.count, self.store.first_row,
                         self.spec.sorted, matches, start, forward)
        if pos is None:
            self.notify(f"no digest in this view contains {self.search_text!r}",
                        severity="warning", markup=False)
            return False
        if (forward and pos <= start) or (not forward and pos >= start):
            self.notify("search wrapped around", timeout=2)
        table.cursor = pos
        return True

    # ------------------------------------------------------------------ actions
    def action_focus_filter(self) -> None:
        self.filterbar.input.focus()

    def action_pause(self) -> None:
        self.paused = not self.paused
        if self.paused:
            self.paused_at = self.store.count - self.store.first_row
            self.notify("list paused: new exchanges are kept and appear on resume (p)",
                        timeout=3)
        else:
            self._update_rows()
        self._update_status()

    def action_sort_next(self) -> None:
        current = self.spec.sort if self.spec.sorted else "no"
        i = SORT_ORDER.index(current) if current in SORT_ORDER else 0
        column = SORT_ORDER[(i + 1) % len(SORT_ORDER)]
        self._apply_sort(None if column == "no" else column, False)
        self.notify(f"sorted by {SORT_COLUMNS[column]}", timeout=2)

    def action_sort_reverse(self) -> None:
        column = self.spec.sort or "no"
        self._apply_sort(column, not self.spec.reverse)

    def _toggle_pane(self, widget: Widget, name: str) -> bool:
        """Show ``widget`` if the layout hides it, else hide it (screen classes
        ``-show-NAME`` / ``-hide-NAME``, see app.tcss); returns whether it shows now."""
        screen = self._main_screen if self._main_screen is not None else self.screen
        show = not widget.display
        screen.set_class(show, f"-show-{name}")
        screen.set_class(not show, f"-hide-{name}")
        if not show and widget.has_focus:
            self.exchanges.focus()
        return show

    def action_toggle_connections(self) -> None:
        self._toggle_pane(self.connections, "conns")

    def action_toggle_bytes(self) -> None:
        self._toggle_pane(self.hexview, "hex")

    def action_all_connections(self) -> None:
        self.connections.move_cursor(0, quiet=True)
        self._apply_stream(None)

    def action_swap_frame(self) -> None:
        ex = self.selected_exchange
        if ex is None:
            return
        other = "response" if self.hex_message == "request" else "request"
        if (ex.response if other == "response" else ex.request) is None:
            self.notify(f"this exchange has no {other}", timeout=2)
            return
        self._show_frame(other)
        node = self.detail.focused_data
        if node is not None and node.message == other and node.start is not None \
                and node.length is not None:
            self.hexview.set_highlight((node.start, node.start + node.length))

    def action_time_format(self) -> None:
        i = TIME_FORMATS.index(self._time_format)
        self._time_format = TIME_FORMATS[(i + 1) % len(TIME_FORMATS)]
        self.exchanges.set_time_format(self._time_format, ("time",))
        self.connections.set_time_format(self._time_format, ("first", "last"))
        names = {"r": "relative", "a": "absolute", "ad": "absolute with date",
                 "ud": "UTC with date", "e": "epoch"}
        self.notify(f"time: {names[self._time_format]}", timeout=2)

    def action_maximize(self) -> None:
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
        elif self.focused is not None:
            screen.maximize(self.focused)

    def action_help(self) -> None:
        from kwsniff.tui.screens.help import HelpScreen
        pairs = [(" ".join(self.get_key_display(Binding(k.strip(), b.action))
                           for k in b.key.split(",")), b.description)
                 for b in self.BINDINGS if isinstance(b, Binding)]
        self.push_screen(HelpScreen(pairs))

    def action_insights(self) -> None:
        from kwsniff.tui.screens.insights import InsightsScreen
        self.push_screen(InsightsScreen(self))

    def action_stats(self) -> None:
        from kwsniff.tui.screens.stats import StatsScreen
        self.push_screen(StatsScreen(self))

    def view_rows(self) -> Any:
        """The row ids of the current view, in view order (a snapshot)."""
        table = self.exchanges
        if table.rows_ref is None:
            first = self.store.first_row
            return range(first, first + table.count)
        return array("q", table.rows_ref[:table.count])

    def view_description(self) -> str:
        parts = []
        if self.spec.stream is not None:
            parts.append(f"stream {self.spec.stream}")
        if self.spec.expression:
            parts.append(f"filter {self.spec.expression}")
        return ", ".join(parts) if parts else "all exchanges"

    def stats_input(self) -> tuple[Any, str, dict[str, Any] | None, bool]:
        """What the statistics screen computes over: the view's rows, their description,
        the decoder's report when the view is the whole capture, and whether the capture
        is still loading."""
        rows = self.view_rows()
        whole = self.spec.matcher is None and self.spec.stream is None and not self.paused \
            and self.store.dropped == 0
        report = self.loader.report if whole else None
        return rows, self.view_description(), report, not self.loader.done

    def action_export(self) -> None:
        from kwsniff.tui.screens.export import ExportScreen
        if self.capture is not None and self.capture != "-":
            stem = Path(self.capture).name.split(".")[0] or "capture"
        else:
            stem = (self.live_name or "live").replace("/", "_")
        default = str(Path.cwd() / f"{stem}-exchanges.jsonl")
        rows = self.view_rows()

        def chosen(path: str | None) -> None:
            if path:
                self._export(rows, os.path.expanduser(path))

        self.push_screen(ExportScreen(default, len(rows), self.view_description()), chosen)

    @work(thread=True, exclusive=True, group="export")
    def _export(self, rows: Any, path: str) -> None:
        capture = self.capture if self.capture is not None else f"live:{self.live_name}"
        counters = self.loader.counters      # so far, while loading or capturing
        try:
            result = export_rows(self.store, rows, path, capture, counters)
        except UserError as err:
            self.call_from_thread(self.notify, str(err), title="export", severity="error",
                                  markup=False)
            return
        text = f"{result.exchanges} exchanges written to {result.path}"
        if result.missing:
            text += f" ({result.missing} no longer stored)"
        self.call_from_thread(self.notify, text, title="export", timeout=6, markup=False)

    def status_text(self) -> str:
        """The status line as plain text."""
        return str(self._q("#status-text", Static).render())
