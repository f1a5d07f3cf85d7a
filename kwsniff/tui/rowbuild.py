"""Turning decoded exchanges into compact rows and spilled pickles (decoder side).

Contract:

* :class:`RowBuilder` numbers exchanges 0, 1, 2, ... (the row ids of the
  :class:`~kwsniff.tui.store.ExchangeStore` that receives them, in the same order) and
  for each returns a *row tuple* (see :data:`ROW_FIELDS`): what the exchange list,
  the connections pane, the fast filters and the digest search need, never the bodies;
  its ``facts`` part is None or the store's facts tuple (``F_*`` of
  :mod:`kwsniff.tui.store`).
* The full exchange goes to the spill file of its segment
  (``spill_path(directory, segment)``, :data:`~kwsniff.tui.store.SEGMENT_ROWS` rows per
  file) through a :class:`~kwsniff.tui.spill.SpillWriter` (lean records in compressed
  blocks; the row keeps the block's offset and the item's position in it), or, when
  :meth:`RowBuilder.row` is given ``packed``, the record the engine process already
  made of it (:func:`~kwsniff.tui.spill.pack`: the same bytes);
  :meth:`RowBuilder.flush` writes what is pending and must be called before the rows
  are handed to a reader. The builder closes a segment's file when it moves on; the
  reader opens it by path (and may unlink it at once: the data stays reachable through
  the open descriptors).
* Nothing here raises on odd exchanges: the digest and facts come from the output
  layer, which never raises; a spilling failure spills an empty record (the reader
  then reports the exchange as unavailable).
"""

from __future__ import annotations

from typing import Any

from kwsniff.kafka.model import Exchange
from kwsniff.output.digest import digest
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.fields import FIELDS
from kwsniff.tui.spill import SpillWriter
from kwsniff.tui.store import SEGMENT_ROWS, spill_path

#: the fields of a row tuple, in order
ROW_FIELDS = ("index", "ts", "end_ts", "latency_ms", "stream", "api_key", "api_version",
              "correlation_id", "status", "protocol", "client_id", "client", "broker",
              "facts", "request_bytes", "response_bytes", "records", "problems", "digest",
              "spill_block", "spill_item", "request_frames", "response_frames")


_NO_MORE = ((), (), (), (), None, None)
_acks = FIELDS["acks"].get


def _tls(info: Any) -> tuple[Any, ...] | None:
    if info is None:
        return None
    return (info.version_name, info.suite_name, info.sni)


class RowBuilder:
    """See the module contract."""

    def __init__(self, directory: str, strip: bool = True) -> None:
        self.directory = directory
        self.rows = 0
        self._segment = -1
        self.spill = SpillWriter(strip)

    def row(self, ex: Exchange, facts: ExchangeFacts,
            packed: tuple[bytes, int] | None = None) -> tuple[Any, ...]:
        """The row tuple of ``ex`` (the next row id; queued for the spill file, as
        ``packed`` when given: its :func:`~kwsniff.tui.spill.pack` record)."""
        rid = self.rows
        number = rid // SEGMENT_ROWS
        if number != self._segment:
            self._next_segment(number)
        self.rows = rid + 1
        req, resp = ex.request, ex.response
        block, item = self.spill.add(ex) if packed is None else self.spill.add_packed(*packed)
        problems = len(ex.problems) + (len(req.problems) if req is not None else 0) + \
            (len(resp.problems) if resp is not None else 0)
        topics = tuple(facts.topics)
        errors = tuple(facts.error_codes)
        parts = tuple(facts.partitions)
        groups = tuple(facts.groups)
        more = (tuple(facts.topic_ids), tuple(facts.members), tuple(facts.transactional_ids),
                tuple(facts.producer_ids), _tls(ex.tls), _acks(facts))
        text = digest(ex, facts).replace("\n", " ").replace("\0", " ")
        end = ex.response_ts if ex.response_ts is not None else ex.ts
        return (ex.index, ex.ts, end, ex.latency_ms, ex.stream, ex.api_key, ex.api_version,
                ex.correlation_id, ex.status, ex.protocol, ex.client_id,
                tuple(ex.client), tuple(ex.broker),
                (topics, errors, parts, groups) + more
                if (topics or errors or parts or groups or more != _NO_MORE) else None,
                req.size if req is not None else None, resp.size if resp is not None else None,
                facts.record_count if facts.has_records else -1, problems, text,
                block, item,
                (req.frame_first, req.frame_last) if req is not None else (-1, -1),
                (resp.frame_first, resp.frame_last) if resp is not None else (-1, -1))

    def _next_segment(self, number: int) -> None:
        self._segment = number
        self.spill.open(spill_path(self.directory, number))

    def flush(self) -> None:
        """Write the pending block (before handing its rows to a reader)."""
        self.spill.flush()

    def close(self) -> None:
        self.spill.close()
