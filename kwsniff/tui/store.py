"""Compact storage of every decoded exchange of a TUI session (UI side).

Contract:

* :class:`ExchangeStore` keeps one *row* per exchange, addressed by a row id (0-based,
  in arrival order: capture order for files, completion order for live capture). A row
  is a few typed array slots (time, latency, stream, API key/version, correlation id,
  status, protocol, sizes, record count, problem count, exchange index, spill
  block and item), an interned client id, an interned client/broker address pair, an
  interned *facts tuple* (topics, error codes, partitions, groups, topic ids, members,
  transactional ids, producer ids, TLS, Produce acks), the capture frames where the
  request and the response start and end, and the one-line
  digest as UTF-8 in a per-segment blob: about 120 bytes plus the digest per exchange,
  never the decoded bodies.
* Rows arrive as the tuples of :class:`~kwsniff.tui.rowbuild.RowBuilder` (decoded in
  another process) through :meth:`append`; :meth:`publish` makes them visible to
  readers, which only look below :attr:`count` (one writer thread, any number of
  reader threads, no lock: array reads are atomic under the GIL).
* The full :class:`~kwsniff.kafka.model.Exchange` lives in the segment's spill file
  (written by the decoder, :mod:`kwsniff.tui.spill`: compressed blocks of lean
  records); :meth:`exchange` rebuilds one on demand (detail tree, hex view, slow
  filters, export), keeping the last block read so that a scan in row order reads each
  block once. The store opens a spill file when the first row of its segment arrives
  and unlinks it at once, so nothing is left on disk.
* Rows live in segments of :data:`SEGMENT_ROWS`; when more than ``max_rows`` rows are
  stored the oldest segments are dropped whole (live capture runs for hours with bounded
  memory and disk). Dropped row ids stay invalid: accessors return None or "".
* Per connection a :class:`ConnectionRow` aggregates exchanges, bytes, errors, client ids
  and first/last times, bounded to ``max_connections`` connections.
"""

from __future__ import annotations

import math
import os
import sys
from collections import OrderedDict
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from kwsniff.kafka.model import (
    NO_RESPONSE_EXPECTED,
    ORPHAN_RESPONSE,
    PAIRED,
    UNANSWERED,
    Exchange,
)
from kwsniff.output.facts import TopicNames
from kwsniff.tui.spill import read_block, rebuild

SEGMENT_ROWS = 1 << 16
DEFAULT_MAX_ROWS = 10_000_000
DEFAULT_MAX_CONNECTIONS = 100_000
MAX_CLIENT_IDS = 8
MAX_SHARED_BROKERS = 10_000
NONE_INT = -(1 << 62)          # "absent" in integer columns
NAN = float("nan")

STATUSES = (PAIRED, NO_RESPONSE_EXPECTED, UNANSWERED, ORPHAN_RESPONSE)
STATUS_CODE = {s: i for i, s in enumerate(STATUSES)}

#: index of each part of a facts tuple (F_TLS: ``(version name, suite name, sni)`` or None)
(F_TOPICS, F_ERRORS, F_PARTITIONS, F_GROUPS, F_TOPIC_IDS, F_MEMBERS, F_TXNS, F_PRODUCERS,
 F_TLS, F_ACKS) = range(10)
EMPTY_FACTS: tuple[Any, ...] = ((), (), (), (), (), (), (), (), None, None)
NO_ROUTE = (("", 0), ("", 0))


def spill_path(directory: str, segment: int) -> str:
    """The spill file of a segment inside the session's spill directory."""
    return os.path.join(directory, f"segment-{segment:06d}.spill")


def _open_spill(path: str) -> int:
    """A spill file opened for reading and unlinked at once (-1 when it cannot be)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return -1
    try:
        os.unlink(path)          # stays readable through fd; nothing left behind
    except OSError:
        pass
    return fd


class Interner:
    """Values <-> small ints (client ids, routes, protocols, facts); id 0 is ``first``."""

    __slots__ = ("values", "ids")

    def __init__(self, first: Any) -> None:
        self.values: list[Any] = [first]
        self.ids: dict[Any, int] = {first: 0}

    def id(self, value: Any) -> int:
        i = self.ids.get(value)
        if i is None:
            i = self.ids[value] = len(self.values)
            self.values.append(value)
        return i

    def __getitem__(self, i: int) -> Any:
        return self.values[i]

    def __len__(self) -> int:
        return len(self.values)


@dataclass(slots=True)
class ConnectionRow:
    """What the connections pane shows for one TCP connection."""

    stream: int
    client: tuple[str, int]
    broker: tuple[str, int]
    protocol: str = "kafka"
    client_ids: list[str] = field(default_factory=list)
    exchanges: int = 0
    bytes: int = 0                # Kafka frame bytes (requests + responses)
    errors: int = 0               # exchanges with an error code
    unpaired: int = 0             # unanswered + orphan responses
    problems: int = 0
    first_ts: float = 0.0
    last_ts: float = 0.0
    tcp_bytes: int | None = None  # TCP payload bytes, known when the connection ended


class Segment:
    """Columns of up to :data:`SEGMENT_ROWS` rows, their digests and their spill file."""

    __slots__ = ("number", "first", "ts", "latency", "stream", "api_key", "api_version",
                 "corr", "status", "protocol", "client_id", "route", "facts", "req_bytes",
                 "resp_bytes", "records", "problems", "index", "spill_block", "spill_item",
                 "frames",
                 "digest_end", "digests", "spill_fd")

    def __init__(self, number: int, spill_fd: int) -> None:
        self.number = number
        self.first = number * SEGMENT_ROWS
        self.ts = array("d")
        self.latency = array("d")
        self.stream = array("i")
        self.api_key = array("h")
        self.api_version = array("h")
        self.corr = array("q")
        self.status = array("b")
        self.protocol = array("b")
        self.client_id = array("i")
        self.route = array("i")
        self.facts = array("i")
        self.req_bytes = array("i")
        self.resp_bytes = array("i")
        self.records = array("i")
        self.problems = array("H")
        self.index = array("q")
        self.spill_block = array("q")
        self.spill_item = array("H")
        # request first/last, response first/last frame of each row (-1: no message)
        self.frames = array("q")
        self.digest_end = array("i")
        self.digests = bytearray()
        self.spill_fd = spill_fd         # -1: not open

    def close(self) -> None:
        fd, self.spill_fd = self.spill_fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def memory(self) -> int:
        """Bytes held by the columns and the digest blob."""
        cols = (self.ts, self.latency, self.stream, self.api_key, self.api_version,
                self.corr, self.status, self.protocol, self.client_id, self.route, self.facts,
                self.req_bytes, self.resp_bytes, self.records, self.problems, self.index,
                self.spill_block, self.spill_item, self.frames, self.digest_end)
        return sum(len(c) * c.itemsize for c in cols) + len(self.digests)


def _small(value: int | None) -> int:
    """An API key/version for an ``h`` column: -1 when absent or out of range."""
    return value if value is not None and 0 <= value <= 32767 else -1


def _clamp32(value: int | None) -> int:
    if value is None:
        return -1
    return min(value, 0x7FFFFFFF)


class ExchangeStore:
    """See the module contract."""

    def __init__(self, spill_dir: str, *, max_rows: int = DEFAULT_MAX_ROWS,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS) -> None:
        self.spill_dir = spill_dir
        self.max_rows = max(SEGMENT_ROWS, max_rows)
        self.max_connections = max_connections
        self.names = TopicNames()
        self.segments: dict[int, Segment] = {}
        self.first_segment = 0
        self.count = 0               # published rows (readers look below this)
        self._next = 0               # rows appended (published or not)
        self.dropped = 0             # rows dropped by the row limit
        self.client_ids = Interner(None)
        self.routes = Interner(NO_ROUTE)
        self.protocols = Interner("kafka")
        self.facts_table = Interner(EMPTY_FACTS)
        # (oldest first: dropping the oldest is O(1), as a dict's front is not)
        self.connections: OrderedDict[int, ConnectionRow] = OrderedDict()
        self.connections_dropped = 0
        self.first_ts: float | None = None
        # (segment, offset, records) of the last block read
        self._block: tuple[int, int, list[Any]] | None = None
        self._brokers: dict[tuple[str, int], tuple[str, int]] = {}

    # ------------------------------------------------------------------ writing
    def _segment(self, number: int) -> Segment:
        seg = self.segments.get(number)
        if seg is None:
            seg = self.segments[number] = Segment(
                number, _open_spill(spill_path(self.spill_dir, number)))
        return seg

    def append(self, row: tuple[Any, ...]) -> int:
        """Append one row tuple (:data:`~kwsniff.tui.rowbuild.ROW_FIELDS`); returns its id.

        The row is not visible to readers before :meth:`publish`."""
        (index, ts, end_ts, latency, stream, api_key, api_version, corr, status, protocol,
         client_id, client, broker, facts, req_bytes, resp_bytes, records, problems,
         text, spill_block, spill_item, req_frames, resp_frames) = row
        rid = self._next
        seg = self._segment(rid // SEGMENT_ROWS)
        if self.first_ts is None:
            self.first_ts = ts
        seg.ts.append(ts)
        seg.latency.append(NAN if latency is None else latency)
        seg.stream.append(stream)
        seg.api_key.append(_small(api_key))
        seg.api_version.append(_small(api_version))
        seg.corr.append(NONE_INT if corr is None else corr)
        seg.status.append(STATUS_CODE.get(status, 0))
        seg.protocol.append(self.protocols.id(protocol))
        seg.client_id.append(self.client_ids.id(client_id))
        route = (client, broker)
        rid_route = self.routes.ids.get(route)
        if rid_route is None:
            route = self._canonical_route(client, broker)
            rid_route = self.routes.id(route)
            client, broker = route
        seg.route.append(rid_route)
        seg.facts.append(self.facts_table.id(facts) if facts is not None else 0)
        seg.req_bytes.append(_clamp32(req_bytes))
        seg.resp_bytes.append(_clamp32(resp_bytes))
        seg.records.append(_clamp32(records) if records >= 0 else -1)
        seg.problems.append(min(problems, 0xFFFF))
        seg.index.append(index)
        seg.spill_block.append(spill_block)
        seg.spill_item.append(spill_item)
        seg.frames.extend(req_frames)
        seg.frames.extend(resp_frames)
        seg.digests += text.encode("utf-8", "replace")
        seg.digests.append(0)        # a separator no search text contains
        seg.digest_end.append(len(seg.digests))
        self._connection(stream, client, broker, protocol, client_id, ts, end_ts,
                         bool(facts and facts[F_ERRORS]), status,
                         (req_bytes or 0) + (resp_bytes or 0), problems)
        self._next = rid + 1
        return rid

    def _canonical_route(self, client: tuple[str, int], broker: tuple[str, int]
                         ) -> tuple[tuple[str, int], tuple[str, int]]:
        """A new route with shared address objects: one tuple per broker address (few),
        one string per IP address (hundreds of thousands of client ports share them)."""
        canon = self._brokers.get(broker)
        if canon is None:
            if len(self._brokers) < MAX_SHARED_BROKERS:
                canon = self._brokers[broker] = (sys.intern(broker[0]), broker[1])
            else:
                canon = broker
        return (sys.intern(client[0]), client[1]), canon

    def _connection(self, stream: int, client: tuple[str, int], broker: tuple[str, int],
                    protocol: str, client_id: str | None, ts: float, end: float,
                    error: bool, status: str, size: int, problems: int) -> None:
        conns = self.connections
        c = conns.get(stream)
        if c is None:
            if len(conns) >= self.max_connections:
                conns.popitem(last=False)
                self.connections_dropped += 1
            c = conns[stream] = ConnectionRow(stream, client, broker, protocol,
                                              first_ts=ts, last_ts=end)
        if client_id and client_id not in c.client_ids and len(c.client_ids) < MAX_CLIENT_IDS:
            c.client_ids.append(client_id)
        c.exchanges += 1
        c.bytes += size
        if error:
            c.errors += 1
        if status == UNANSWERED or status == ORPHAN_RESPONSE:
            c.unpaired += 1
        c.problems += problems
        if ts < c.first_ts:
            c.first_ts = ts
        if end > c.last_ts:
            c.last_ts = end

    def publish(self) -> int:
        """Make every appended row visible; drop the oldest segments over the limit."""
        self.count = self._next
        if self.count - self.first_row > self.max_rows:
            self.drop_oldest()
        return self.count

    def drop_oldest(self) -> int:
        """Drop whole oldest segments until at most ``max_rows`` rows remain; returns the
        number of rows dropped."""
        dropped = 0
        while self.count - self.first_row > self.max_rows:
            seg = self.segments.pop(self.first_segment, None)
            self.first_segment += 1
            if seg is not None:
                dropped += len(seg.ts)
                seg.close()
        self.dropped += dropped
        return dropped

    def close(self) -> None:
        """Release the spill files."""
        for seg in list(self.segments.values()):
            seg.close()

    # ------------------------------------------------------------------ reading
    @property
    def first_row(self) -> int:
        """The oldest row id still stored."""
        return self.first_segment * SEGMENT_ROWS

    def locate(self, row: int) -> tuple[Segment, int] | None:
        """``(segment, position)`` of a published row, or None when absent or dropped."""
        if row < 0 or row >= self.count:
            return None
        seg = self.segments.get(row // SEGMENT_ROWS)
        if seg is None:
            return None
        return seg, row - seg.first

    def digest_text(self, row: int) -> str:
        loc = self.locate(row)
        if loc is None:
            return ""
        seg, i = loc
        start = seg.digest_end[i - 1] if i else 0
        return seg.digests[start:seg.digest_end[i] - 1].decode("utf-8", "replace")

    def latency_of(self, row: int) -> float | None:
        loc = self.locate(row)
        if loc is None:
            return None
        seg, i = loc
        v = seg.latency[i]
        return None if math.isnan(v) else v

    def exchange(self, row: int) -> Exchange | None:
        """The full exchange of a row, rebuilt from the spill file (None if gone)."""
        loc = self.locate(row)
        if loc is None:
            return None
        seg, i = loc
        item = seg.spill_item[i]
        fd = seg.spill_fd
        if fd < 0:
            return None
        offset = seg.spill_block[i]
        key = seg.number
        cached = self._block             # (one tuple: safe to share between threads)
        if cached is not None and cached[0] == key and cached[1] == offset:
            records = cached[2]
        else:
            found = read_block(fd, offset)
            if found is None:
                return None
            records = found
            self._block = (key, offset, records)
        if item >= len(records):
            return None
        try:
            ex = rebuild(records[item])
        except Exception:  # noqa: BLE001 - a damaged spill reads as "not available"
            return None
        return ex if isinstance(ex, Exchange) else None

    @property
    def spill_bytes(self) -> int:
        """Bytes of the spill files still open."""
        total = 0
        for seg in list(self.segments.values()):
            fd = seg.spill_fd
            if fd >= 0:
                try:
                    total += os.fstat(fd).st_size
                except OSError:
                    pass
        return total

    def search(self, needle: str, rows_from: int = 0) -> list[int]:
        """Row ids (>= ``rows_from``) whose digest contains ``needle`` (ASCII letters
        compared case-insensitively), in row order."""
        if not needle:
            return []
        pat = needle.lower().encode("utf-8", "replace")
        out: list[int] = []
        for number in sorted(self.segments):
            seg = self.segments.get(number)
            if seg is None:
                continue
            n = min(len(seg.digest_end), self.count - seg.first)
            if n <= 0 or seg.first + n <= rows_from:
                continue
            ends = seg.digest_end
            blob = bytes(seg.digests[:ends[n - 1]]).lower()
            i = max(0, rows_from - seg.first)
            pos = blob.find(pat, ends[i - 1] if i else 0)
            while pos >= 0:
                i = bisect_right(ends, pos, i, n)
                if i >= n:
                    break
                out.append(seg.first + i)
                pos = blob.find(pat, ends[i])
                i += 1
        return out

    def memory(self) -> dict[str, int]:
        """Approximate bytes used: columns and digests, interned tables, connections; and
        the spill bytes on disk."""
        cols = sum(seg.memory() for seg in list(self.segments.values()))
        facts = sum(sum(len(p) for p in t if isinstance(p, tuple)) * 8 + 120
                    for t in self.facts_table.values)
        # measured with tracemalloc: a route ~220 bytes, a connection row ~250 bytes
        return {"rows": self.count - self.first_row, "columns": cols,
                "interned": facts + 80 * len(self.client_ids) + 220 * len(self.routes),
                "connections": 250 * len(self.connections), "spill_disk": self.spill_bytes}
