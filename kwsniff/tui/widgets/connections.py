"""The connections pane: every Kafka connection, and an "all connections" first line.

Contract: :class:`ConnectionTable` shows a snapshot of the store's
:class:`~kwsniff.tui.store.ConnectionRow` values (refreshed by the owner with
:meth:`ConnectionTable.update_rows`), sorted by stream or by the clicked column.
Position 0 is "All connections"; :meth:`ConnectionTable.stream_at` returns the stream
of a position (None for the first line). Rows with errors or unpaired exchanges are
coloured.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from kwsniff.output.digest import human_bytes
from kwsniff.output.fields import format_address
from kwsniff.output.summary import format_time
from kwsniff.tui.store import ConnectionRow
from kwsniff.tui.widgets.table import Column, VirtualTable

COLUMNS = [
    Column("stream", "Stream", 8, right=True, min_width=6, priority=5),
    Column("route", "Client → Broker", 40, min_width=30, priority=10),
    Column("exchanges", "Exch.", 7, right=True, priority=8),
    Column("bytes", "Bytes", 9, right=True, priority=7),
    Column("errors", "Errors", 6, right=True, priority=6),
    Column("unpaired", "Unpaired", 8, right=True, priority=4),
    Column("first", "First", 10, right=True, priority=3),
    Column("last", "Last", 10, right=True, priority=2),
    Column("client_ids", "Client ids", 16, flex=True),
]

_SORT: dict[str, Any] = {
    "stream": lambda c: c.stream,
    "route": lambda c: (c.client, c.broker),
    "exchanges": lambda c: c.exchanges,
    "bytes": lambda c: c.bytes,
    "errors": lambda c: c.errors,
    "unpaired": lambda c: c.unpaired,
    "first": lambda c: c.first_ts,
    "last": lambda c: c.last_ts,
    "client_ids": lambda c: ",".join(c.client_ids),
}


class ConnectionTable(VirtualTable):
    """See the module contract."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(list(COLUMNS), id=id)
        self.rows: list[ConnectionRow] = []
        self.sort_key = "stream"
        self.time_base = 0.0
        self.totals = (0, 0, 0, 0)

    def update_rows(self, rows: list[ConnectionRow], *, keep_stream: int | None = None
                    ) -> None:
        """Show ``rows`` (sorted here); the cursor stays on ``keep_stream`` if given (else
        on its position: the first line stays the first line)."""
        rows = sorted(rows, key=attrgetter("stream"))
        if self.sort_key not in (None, "stream"):
            # stable: equal keys stay in stream order (also when reversed)
            rows.sort(key=_SORT[self.sort_key], reverse=self.sort_reverse)
        elif self.sort_reverse:
            rows.reverse()
        self.rows = rows
        ex = size = errors = unpaired = 0
        for c in rows:
            ex += c.exchanges
            size += c.bytes
            errors += c.errors
            unpaired += c.unpaired
        self.totals = (ex, size, errors, unpaired)
        self.rows_changed()
        if keep_stream is not None:
            for i, c in enumerate(rows):
                if c.stream == keep_stream:
                    self.move_cursor(i + 1, quiet=True)
                    break

    def sort_by(self, key: str) -> None:
        if key not in _SORT:
            return
        if self.sort_key == key:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_key, self.sort_reverse = key, False
        current = self.stream_at(self.cursor)
        self.update_rows(self.rows, keep_stream=current)
        if current is None:
            self.move_cursor(0, quiet=True)

    def row_count(self) -> int:
        return len(self.rows) + 1

    def stream_at(self, position: int) -> int | None:
        if 1 <= position <= len(self.rows):
            return self.rows[position - 1].stream
        return None

    def row_cells(self, position: int) -> tuple[list[str], str | None]:
        if position == 0:
            ex, size, errors, unpaired = self.totals
            return ["", f"All connections ({len(self.rows)})", str(ex), human_bytes(size),
                    str(errors), str(unpaired), "", "", ""], "vtable--all"
        c = self.rows[position - 1]
        route = f"{format_address(c.client)} → {format_address(c.broker)}"
        if c.protocol != "kafka":
            route += f" ({c.protocol})"
        ids = ", ".join(c.client_ids) if c.client_ids else "-"
        klass = "vtable--error" if c.errors else ("vtable--unanswered" if c.unpaired else None)
        return [str(c.stream), route, str(c.exchanges), human_bytes(c.bytes), str(c.errors),
                str(c.unpaired), format_time(c.first_ts, self.time_format, self.time_base),
                format_time(c.last_ts, self.time_format, self.time_base), ids], klass
