"""Turning decoded exchanges into compact rows and spilled pickles (decoder side).

Contract:

* :class:`RowBuilder` numbers exchanges 0, 1, 2, ... (the row ids of the
  :class:`~kwsniff.tui.store.ExchangeStore` that receives them, in the same order) and
  for each returns a *row tuple* (see :data:`ROW_FIELDS`): what the exchange list,
  the connections pane, the fast filters and the digest search need, never the bodies.
* The full exchange is pickled into the spill file of its segment
  (``spill_path(directory, segment)``, :data:`~kwsniff.tui.store.SEGMENT_ROWS` rows per
  file); :meth:`RowBuilder.flush` writes what is pending and must be called before the
  rows are handed to a reader. The builder closes a segment's file when it moves on;
  the reader opens it by path (and may unlink it at once: the data stays reachable
  through the open descriptors).
* Nothing here raises on odd exchanges: the digest and facts come from the output
  layer, which never raises; a pickling failure spills an empty record (the reader
  then reports the exchange as unavailable).
"""

from __future__ import annotations

import os
import pickle
from typing import Any

from kwsniff.kafka.model import Exchange
from kwsniff.output.digest import digest
from kwsniff.output.facts import ExchangeFacts
from kwsniff.tui.store import SEGMENT_ROWS, spill_path

#: the fields of a row tuple, in order
ROW_FIELDS = ("index", "ts", "end_ts", "latency_ms", "stream", "api_key", "api_version",
              "correlation_id", "status", "protocol", "client_id", "client", "broker",
              "facts", "request_bytes", "response_bytes", "records", "problems", "digest",
              "spill_offset", "spill_length")


class RowBuilder:
    """See the module contract."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.rows = 0
        self._segment = -1
        self._fd = -1
        self._size = 0
        self._pending: list[bytes] = []

    def row(self, ex: Exchange, facts: ExchangeFacts) -> tuple[Any, ...]:
        """The row tuple of ``ex`` (its pickle is queued for the spill file)."""
        number = self.rows // SEGMENT_ROWS
        if number != self._segment:
            self._next_segment(number)
        self.rows += 1
        req, resp = ex.request, ex.response
        try:
            blob = pickle.dumps(ex, pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an unpicklable oddity must not stop decoding
            blob = b""
        offset = self._size
        self._size += len(blob)
        self._pending.append(blob)
        problems = len(ex.problems) + (len(req.problems) if req is not None else 0) + \
            (len(resp.problems) if resp is not None else 0)
        topics = tuple(facts.topics)
        errors = tuple(facts.error_codes)
        parts = tuple(facts.partitions)
        groups = tuple(facts.groups)
        text = digest(ex, facts).replace("\n", " ").replace("\0", " ")
        end = ex.response_ts if ex.response_ts is not None else ex.ts
        return (ex.index, ex.ts, end, ex.latency_ms, ex.stream, ex.api_key, ex.api_version,
                ex.correlation_id, ex.status, ex.protocol, ex.client_id,
                tuple(ex.client), tuple(ex.broker),
                (topics, errors, parts, groups) if (topics or errors or parts or groups)
                else None,
                req.size if req is not None else None, resp.size if resp is not None else None,
                facts.record_count if facts.has_records else -1, problems, text,
                offset, len(blob))

    def _next_segment(self, number: int) -> None:
        self.flush()
        self._close()
        self._segment = number
        self._size = 0
        self._fd = os.open(spill_path(self.directory, number),
                           os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)

    def flush(self) -> None:
        """Write the pending pickles (before handing their rows to a reader)."""
        if not self._pending or self._fd < 0:
            self._pending.clear()
            return
        data = memoryview(b"".join(self._pending))
        self._pending.clear()
        while data:
            data = data[os.write(self._fd, data):]

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        self.flush()
        self._close()
