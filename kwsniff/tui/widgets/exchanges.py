"""The exchange list: one line per stored exchange, rendered on demand from the store.

Contract:

* :class:`ExchangeTable` shows the rows of a *rows reference*: None means every stored
  row in capture order (identity view), else an array of row ids (a filtered and/or
  sorted view from :class:`~kwsniff.tui.view.ViewBuilder`). The owner sets it with
  :meth:`ExchangeTable.set_rows`; nothing per row is kept here.
* Columns: No., Time (``-t`` formats of ``decode``), Client (client id, else address),
  API and version, correlation id, latency, status, error names, digest (the CLI's
  one-line digest, with ``[N problems]``). Rows are coloured by error, unanswered,
  orphan response, decode problems and no-response-expected.
* :attr:`ExchangeTable.needle` (the ``/`` search text) is highlighted in digests.
"""

from __future__ import annotations

import math
from typing import Any

from rich.segment import Segment
from rich.style import Style

from kwsniff.kafka.model import NO_RESPONSE_EXPECTED, ORPHAN_RESPONSE, UNANSWERED
from kwsniff.output.fields import format_address
from kwsniff.output.names import api_label, error_label
from kwsniff.output.summary import format_latency, format_time
from kwsniff.tui.store import F_ERRORS, NONE_INT, STATUSES, ExchangeStore
from kwsniff.tui.widgets.table import Column, VirtualTable

STATUS_TEXT = {"paired": "paired", NO_RESPONSE_EXPECTED: "no resp.", UNANSWERED: "unanswered",
               ORPHAN_RESPONSE: "orphan"}
STATUS_CLASS = {UNANSWERED: "vtable--unanswered", ORPHAN_RESPONSE: "vtable--orphan",
                NO_RESPONSE_EXPECTED: "vtable--dim"}

#: narrow panes hide Corr, Client, Time, Status first (lowest priority); API, latency
#: and the start of the digest stay
COLUMNS = [
    Column("no", "No.", 7, right=True, min_width=5, priority=6),
    Column("time", "Time", 10, right=True, priority=3),
    Column("client", "Client", 16, min_width=10, max_width=24, priority=2),
    Column("api", "API", 17, min_width=12, max_width=31, priority=9),
    Column("corr", "Corr", 6, right=True, priority=1),
    Column("latency", "Latency", 9, right=True, min_width=8, priority=8),
    Column("status", "Status", 10, min_width=8, priority=4),
    Column("error", "Error", 14, min_width=10, max_width=27, priority=5),
    Column("digest", "Digest", 24, flex=True),
]


def error_text(codes: tuple[int, ...], protocol: str) -> str:
    """Error names as the summary line shows them (two, then ``+N``)."""
    if not codes:
        return ""
    text = ",".join(error_label(c, protocol) for c in codes[:2])
    if len(codes) > 2:
        text += f",+{len(codes) - 2}"
    return text


def row_cells(store: ExchangeStore, row: int, time_format: str = "r",
              time_base: float = 0.0) -> tuple[list[str], str | None]:
    """The cells and row class of a stored row (blank cells if it was dropped)."""
    loc = store.locate(row)
    if loc is None:
        return ["", "", "", "", "", "", "", "", "(dropped: oldest exchanges over the limit)"], \
            "vtable--dim"
    seg, i = loc
    protocol = store.protocols[seg.protocol[i]]
    key = seg.api_key[i]
    ver = seg.api_version[i]
    api = api_label(key if key >= 0 else None, protocol)
    if ver >= 0:
        api += f" v{ver}"
    corr = seg.corr[i]
    lat = seg.latency[i]
    status = STATUSES[seg.status[i]]
    client_id = store.client_ids[seg.client_id[i]]
    if not client_id:
        client_id = format_address(store.routes[seg.route[i]][0])
    codes = store.facts_table[seg.facts[i]][F_ERRORS]
    digest = store.digest_text(row)
    problems = seg.problems[i]
    if problems:
        digest += f" [{problems} problem{'s' if problems != 1 else ''}]"
    cells = [
        str(seg.index[i]),
        format_time(seg.ts[i], time_format, time_base),
        client_id,
        api,
        "-" if corr == NONE_INT else str(corr),
        format_latency(None if math.isnan(lat) else lat),
        STATUS_TEXT.get(status, status),
        error_text(codes, protocol),
        digest,
    ]
    if codes:
        klass: str | None = "vtable--error"
    else:
        klass = STATUS_CLASS.get(status)
        if klass is None and problems:
            klass = "vtable--warn"
    return cells, klass


class ExchangeTable(VirtualTable):
    """The exchange list (see the module contract)."""

    def __init__(self, store: ExchangeStore, *, id: str | None = None) -> None:
        super().__init__(list(COLUMNS), id=id)
        self.store = store
        self.rows_ref: Any = None
        self.count = 0
        self.time_base = 0.0
        self.needle: str | None = None

    def set_rows(self, rows_ref: Any, count: int) -> None:
        """Show ``count`` rows of ``rows_ref`` (None: stored rows in capture order)."""
        self.rows_ref = rows_ref
        self.count = count
        self.rows_changed()

    def row_count(self) -> int:
        return self.count

    def row_at(self, position: int) -> int | None:
        """The store row id at ``position`` (None outside the view)."""
        if not 0 <= position < self.count:
            return None
        if self.rows_ref is None:
            return self.store.first_row + position
        try:
            return self.rows_ref[position]
        except IndexError:
            return None

    def row_cells(self, position: int) -> tuple[list[str], str | None]:
        row = self.row_at(position)
        if row is None:
            return [], None
        return row_cells(self.store, row, self.time_format, self.time_base)

    def cell_segments(self, position: int, key: str, text: str, style: Style) -> list[Segment]:
        needle = self.needle
        if key != "digest" or not needle:
            return [Segment(text, style)]
        low = text.lower()
        n = needle.lower()
        at = low.find(n)
        if at < 0:
            return [Segment(text, style)]
        match = style + self.get_component_rich_style("vtable--match")
        out: list[Segment] = []
        pos = 0
        while at >= 0:
            if at > pos:
                out.append(Segment(text[pos:at], style))
            out.append(Segment(text[at:at + len(n)], match))
            pos = at + len(n)
            at = low.find(n, pos)
        if pos < len(text):
            out.append(Segment(text[pos:], style))
        return out
