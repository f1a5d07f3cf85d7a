"""Per-connection, per-direction TCP stream reassembly.

Contract: :meth:`TcpReassembler.feed` takes one segment tuple (see
:mod:`kwsniff.tcp.packet`) with its capture frame and timestamp and returns the
events it causes (:mod:`kwsniff.tcp.events`); :meth:`TcpReassembler.finish` closes
every open connection at the end of the input. For each direction the StreamData and
StreamGap events tile the byte stream exactly: in order, without overlaps or holes
(together with the in-order bytes a consumer's ``Connection.sink`` took instead of a
StreamData event, see :mod:`kwsniff.tcp.connection`).

Policy (documented in ``docs/tcp-reassembly.md``):

* Offset 0 is the first byte after the SYN, or the first sequence number seen when the
  handshake was not captured. Sequence numbers are unwrapped (32-bit wrap-around) to
  the position nearest the next expected byte, so streams longer than 4 GiB work.
* Bytes before the next expected offset are final: retransmissions and keep-alives
  are dropped. Out-of-order bytes are buffered; where buffered copies overlap, the
  first copy captured wins (differing content is reported), except that real bytes
  always replace bytes known to be missing (snaplen).
* A hole becomes a StreamGap when the peer acknowledges bytes past it (the capture
  lost them), when the direction's buffer exceeds ``max_buffer`` (or all buffers
  ``max_total_buffer``), or when the connection closes or the capture ends.
  Snaplen-truncated bytes are gaps, never invented data.
* SYN from ``a`` (or SYN-ACK from ``b``) makes ``a`` the client. RST closes at once
  (after delivering the data it carries);
  FINs from both sides close once all data before them is accounted for. A SYN on a
  closed 4-tuple (or with a different initial sequence number) starts a new connection
  with a new index. At most ``max_connections`` are tracked: closed ones are forgotten
  first, then the least recently active open ones are closed as "evicted".
* A forgotten connection's ``Connection`` never changes again (a later segment of its
  4-tuple starts a new connection). When :attr:`TcpReassembler.forgotten` is a list
  (None by default), each one is appended to it as it is forgotten; forgetting happens
  only when a new connection opens, after the ``ConnectionClosed`` events of the
  connections evicted for it and before its ``ConnectionOpened``, in the same event
  list. The consumer empties the list; :meth:`TcpReassembler.finish` does not append
  (every connection is final at the end anyway).
* Bytes after a FIN or a RST (a damaged capture) are not dropped, as in Wireshark:
  bytes past a FIN make the FIN void; new bytes (not a retransmission, at most
  ``REOPEN_WINDOW`` past the end) of a connection closed by RST or FINs reopen it: the
  same ``Connection`` (``reopened`` counts it) gets a second ``ConnectionOpened``, then
  its events go on as before. Both are reported as problems.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Sequence
from operator import itemgetter

from kwsniff.tcp import connection as cx
from kwsniff.tcp.connection import Connection
from kwsniff.tcp.events import (
    GAP_ACKED,
    GAP_BUFFER,
    GAP_CLOSED,
    GAP_END,
    GAP_EVICTED,
    GAP_SNAPLEN,
    ConnectionClosed,
    ConnectionOpened,
    Event,
    StreamData,
    StreamGap,
)
from kwsniff.tcp.packet import Segment, reverse_key, split_key
from kwsniff.tcp.problems import ProblemLog

FIN = 0x01
SYN = 0x02
RST = 0x04
ACK = 0x10
_CONTROL = SYN | FIN | RST

_M32 = 0xFFFFFFFF
_HALF = 0x80000000

#: Buffer accounting overhead per buffered piece, so tiny segments cannot evade the limit.
PIECE_OVERHEAD = 64
#: how far past the end of a closed direction new bytes may start to reopen it
REOPEN_WINDOW = 1 << 20

_START = itemgetter(0)
_NO_EVENTS: tuple[Event, ...] = ()


class _Direction:
    """Reassembly state of one direction (internal)."""

    __slots__ = ("base", "next", "pending", "buffered", "fin", "isn", "ack", "top")

    def __init__(self) -> None:
        self.base: int | None = None    # sequence number of stream offset 0
        self.next = 0                   # next stream offset to deliver
        # buffered pieces, sorted, non-overlapping: [start, end, data | None, frame, ts]
        # (data None: bytes known to be missing because of the snap length)
        self.pending: list[list] = []
        self.buffered = 0               # bytes accounted to ``pending``
        self.fin: int | None = None     # stream offset of the FIN
        self.isn: int | None = None     # initial sequence number (from a SYN)
        self.ack: int | None = None     # latest raw ACK number from the peer
        self.top: int | None = None     # ignored connection: raw end of its latest data

    def unwrap(self, seq: int) -> int:
        """Stream offset of sequence number ``seq`` nearest the next expected offset."""
        nxt = self.next
        return nxt + ((seq - self.base - nxt + _HALF) & _M32) - _HALF  # type: ignore[operator]


class _Flow:
    """A connection and its two directions (internal)."""

    __slots__ = ("conn", "dirs", "closed", "keys")

    def __init__(self, conn: Connection, keys: tuple[bytes, bytes]) -> None:
        self.conn = conn
        self.dirs = (_Direction(), _Direction())
        self.closed = False
        self.keys = keys


class TcpReassembler:
    """Turns TCP segments into stream events (see the module docstring)."""

    def __init__(self, problems: ProblemLog | None = None, *, max_buffer: int = 8 << 20,
                 max_total_buffer: int = 256 << 20, max_connections: int = 65536,
                 gap_on_ack: bool = True) -> None:
        self.problems = problems if problems is not None else ProblemLog()
        self.max_buffer = max_buffer
        self.max_total_buffer = max_total_buffer
        self.max_connections = max_connections
        self.gap_on_ack = gap_on_ack
        self._table: dict[bytes, tuple[_Flow, int]] = {}
        self._flows: dict[int, _Flow] = {}     # tracked flows (open and closed) by index
        self._next_index = 0
        self._buffered = 0
        # the Connections forgotten since the consumer last emptied it (None: not kept)
        self.forgotten: list[Connection] | None = None
        # counters
        self.connections = 0
        self.retransmissions = 0       # segments whose bytes were all already accounted for
        self.keepalives = 0
        self.out_of_order = 0          # segments buffered ahead of a hole
        self.overlap_conflicts = 0     # overlapping copies with different bytes
        self.gaps = 0
        self.gap_bytes = 0

    # -- feeding -------------------------------------------------------------------------

    def feed(self, frame: int, ts: float, seg: Segment) -> Sequence[Event]:
        """Process one segment captured in ``frame`` at ``ts``; return the events it causes
        (a list, or an empty tuple when there are none)."""
        key, seq, ack, flags, payload, missing = seg
        entry = self._table.get(key)
        if entry is None or flags & _CONTROL:
            return self._feed_slow(frame, ts, seg, entry)
        flow, d = entry
        if flow.closed:
            return self._feed_slow(frame, ts, seg, entry)
        conn = flow.conn
        conn.last_ts = ts
        conn.last_frame = frame
        conn.packets[d] += 1
        events: list[Event] | None = None
        if flags & ACK:
            peer = flow.dirs[d ^ 1]
            peer.ack = ack
            if (peer.pending or peer.fin is not None) and self.gap_on_ack:
                events = []
                self._acked(flow, d ^ 1, frame, ts, events)
        if not payload and not missing:
            return events or _NO_EVENTS
        n = len(payload)
        conn.bytes[d] += n + missing
        ds = flow.dirs[d]
        if conn.ignored:
            if ds.pending:
                self._discard(ds)
            if ds.base is None:
                # (where the stream starts, should the connection be decoded later)
                ds.base = seq
            ds.top = seq + n + missing      # (its end, see _unseen)
            return events or _NO_EVENTS
        base = ds.base
        nxt = ds.next
        if base is None:
            base = ds.base = seq
        rel = (seq - base - nxt) & _M32
        if not rel and not missing and not ds.pending and ds.fin is None:
            # the common case: the next bytes, in order
            ds.next = nxt + n
            if events is None:
                sink = conn.sink
                if sink is not None and sink(d, nxt, payload, frame, ts):
                    return _NO_EVENTS
                return [StreamData(conn, d, nxt, payload, frame, ts)]
            events.append(StreamData(conn, d, nxt, payload, frame, ts))
            return events
        if events is None:
            events = []
        self._data(flow, d, nxt + ((rel + _HALF) & _M32) - _HALF, payload, missing, frame, ts,
                   events)
        if ds.fin is not None:
            self._close_if_finished(flow, frame, ts, events)
        return events

    def _close_if_finished(self, flow: _Flow, frame: int, ts: float,
                           events: list[Event]) -> None:
        """Close ``flow`` once both sides sent FIN and every byte before them is accounted for."""
        d0, d1 = flow.dirs
        if (not flow.closed and d0.fin is not None and d1.fin is not None
                and d0.next >= d0.fin and d1.next >= d1.fin):
            self._close(flow, cx.CLOSE_FIN, GAP_CLOSED, frame, ts, events)

    def _feed_slow(self, frame: int, ts: float, seg: Segment,
                   entry: tuple[_Flow, int] | None) -> list[Event]:
        """Segments with SYN/FIN/RST, for new 4-tuples, or for closed connections."""
        key, seq, ack, flags, payload, missing = seg
        events: list[Event] = []
        if entry is not None:
            flow, d = entry
            if flags & SYN and self._starts_new(flow, d, seq, flags):
                if not flow.closed:
                    self._close(flow, cx.CLOSE_PORT_REUSED, GAP_CLOSED, frame, ts, events)
                entry = None
            elif flow.closed and (payload or missing) and not flags & (RST | SYN) and \
                    flow.conn.close_reason in (cx.CLOSE_RST, cx.CLOSE_FIN) and \
                    self._resumes(flow.dirs[d], seq, len(payload) + missing):
                # new bytes after a RST or FIN (as Wireshark, keep decoding): the same
                # connection again, announced by a second ConnectionOpened
                conn = flow.conn
                self.problems.add(f"frame {frame}: data after the {conn.close_reason.upper()} "
                                  f"of connection {conn.index}; decoding continues")
                flow.closed = False
                flow.dirs[d].fin = None
                conn.close_reason = None
                conn.reopened += 1
                events.append(ConnectionOpened(conn))
            elif flow.closed:
                # a late segment (final ACK, retransmission) of a closed connection
                conn = flow.conn
                conn.packets[d] += 1
                conn.bytes[d] += len(payload) + missing
                conn.last_ts = ts
                conn.last_frame = frame
                return events
        if entry is None:
            flow = self._open(key, flags, frame, ts, events)
            d = 0
        conn = flow.conn
        conn.last_ts = ts
        conn.last_frame = frame
        conn.packets[d] += 1
        conn.bytes[d] += len(payload) + missing
        ds = flow.dirs[d]
        if flags & SYN:
            if conn.a_is_client is None:
                conn.a_is_client = (d == 0) != bool(flags & ACK)
            if ds.isn is None and ds.next == 0 and not ds.pending:
                ds.isn = seq
                ds.base = (seq + 1) & _M32
        if flags & ACK and not flags & RST:
            # (the acknowledgment number of a RST is not evidence of anything received)
            peer = flow.dirs[1 - d]
            peer.ack = ack
            if (peer.pending or peer.fin is not None) and self.gap_on_ack:
                self._acked(flow, 1 - d, frame, ts, events)
        if flags & RST and not (payload or missing):
            self._close(flow, cx.CLOSE_RST, GAP_CLOSED, frame, ts, events)
            return events
        if ds.base is None:
            if not (payload or missing or flags & (FIN | SYN)):
                # a pure ACK does not say where the stream starts: its data may be
                # captured after it (a capture begun mid-stream)
                self._close_if_finished(flow, frame, ts, events)
                return events
            ds.base = seq
        dseq = (seq + 1) & _M32 if flags & SYN else seq
        off = ds.unwrap(dseq)
        if (payload or missing) and not conn.ignored:
            self._data(flow, d, off, payload, missing, frame, ts, events)
        if flags & RST:
            # (the data a RST segment carries is delivered first, as Wireshark shows it)
            self._close(flow, cx.CLOSE_RST, GAP_CLOSED, frame, ts, events)
            return events
        if flags & FIN and ds.fin is None:
            fin = off + len(payload) + missing
            if fin >= ds.next:
                ds.fin = fin
            if ds.pending or ds.next < fin:
                # FIN ahead of a hole: the retransmission may still come
                self._acked(flow, d, frame, ts, events)
        self._close_if_finished(flow, frame, ts, events)
        return events

    @staticmethod
    def _resumes(ds: _Direction, seq: int, n: int) -> bool:
        """Do ``n`` bytes at ``seq`` continue the direction's stream (new bytes, at most
        ``REOPEN_WINDOW`` past its end) rather than repeat old ones?"""
        if ds.base is None:
            return False
        off = ds.unwrap(seq)
        return off + n > ds.next and off <= ds.next + REOPEN_WINDOW

    def _starts_new(self, flow: _Flow, d: int, seq: int, flags: int) -> bool:
        """Does this SYN (from direction ``d`` of ``flow``) start a new connection?"""
        if flow.closed:
            return True
        ds = flow.dirs[d]
        if ds.isn is not None:
            return seq != ds.isn                      # same ISN: a retransmitted SYN
        if flags & ACK:
            return False                              # SYN-ACK answering a SYN we saw
        return flow.dirs[1 - d].isn is None           # SYN on a connection seen mid-stream

    def _open(self, key_ab: bytes, flags: int, frame: int, ts: float,
              events: list[Event]) -> _Flow:
        if len(self._flows) >= self.max_connections:
            self._evict(frame, ts, events)
        a_is_client = None
        if flags & SYN:
            a_is_client = not flags & ACK
        src, sport, dst, dport = split_key(key_ab)
        conn = Connection(self._next_index, (src, sport), (dst, dport), a_is_client, ts, frame)
        key_ba = reverse_key(key_ab)
        flow = _Flow(conn, (key_ab, key_ba))
        self._table[key_ab] = (flow, 0)
        self._table[key_ba] = (flow, 1)
        self._flows[conn.index] = flow
        self._next_index += 1
        self.connections += 1
        events.append(ConnectionOpened(conn))
        return flow

    # -- data ----------------------------------------------------------------------------

    def _data(self, flow: _Flow, d: int, off: int, payload: bytes, missing: int, frame: int,
              ts: float, events: list[Event]) -> None:
        """Place ``payload`` (+ ``missing`` unknown bytes) at ``off`` and deliver what is ready."""
        ds = flow.dirs[d]
        conn = flow.conn
        n = len(payload)
        end = off + n + missing
        nxt = ds.next
        if end <= nxt:
            if n + missing <= 1 and off == nxt - 1:
                self.keepalives += 1
            else:
                self.retransmissions += 1
            return
        if ds.fin is not None and end > ds.fin:
            # bytes after a FIN: it was not the end (a damaged capture); as Wireshark,
            # keep the bytes (the FIN's sequence number, when skipped, is not a hole)
            self.problems.add(f"frame {frame}: {n + missing} bytes after the FIN of "
                              f"connection {conn.index} direction {d}; decoding continues")
            if off == ds.fin + 1 and nxt == ds.fin:
                ds.base = (ds.base + 1) & _M32
                off -= 1
                end -= 1
            ds.fin = None
        if off < nxt:
            # part of it is already delivered: keep only the new bytes
            cut = nxt - off
            if cut >= n:
                missing -= cut - n
                payload = b""
            else:
                payload = payload[cut:]
            n = len(payload)
            off = nxt
        if off == nxt and not ds.pending:
            if n:
                events.append(StreamData(conn, d, off, payload, frame, ts))
            ds.next = off + n
            if missing:
                self._gap(flow, d, missing, frame, ts, GAP_SNAPLEN, events)
            return
        if off > nxt:
            self.out_of_order += 1
        if n:
            self._buffer(flow, d, off, off + n, payload, frame, ts)
        if missing:
            self._buffer(flow, d, off + n, end, None, frame, ts)
        self._drain(flow, d, events)
        if ds.pending and ds.ack is not None and self.gap_on_ack:
            # the peer may already have acknowledged bytes of the hole before these
            self._acked(flow, d, frame, ts, events)
        if ds.buffered > self.max_buffer:
            while ds.pending and ds.buffered > self.max_buffer:
                self._skip_to(flow, d, ds.pending[0][0], frame, ts, GAP_BUFFER, events)
        if self._buffered > self.max_total_buffer:
            self._relieve(frame, ts, events)

    def _buffer(self, flow: _Flow, d: int, start: int, end: int, data: bytes | None,
                frame: int, ts: float) -> None:
        """Add bytes [start, end) to the direction's buffer (overlap policy: first copy wins,
        real bytes replace known-missing ones)."""
        ds = flow.dirs[d]
        pending = ds.pending
        markers: list[list] = []
        if data is not None:
            # take out known-missing pieces this data overlaps; they go back in afterwards
            i = self._first_overlap(pending, start)
            while i < len(pending) and pending[i][0] < end:
                if pending[i][2] is None:
                    markers.append(pending.pop(i))
                else:
                    i += 1
            for m in markers:
                ds.buffered -= m[1] - m[0] + PIECE_OVERHEAD
                self._buffered -= m[1] - m[0] + PIECE_OVERHEAD
        self._insert(flow, d, start, end, data, frame, ts)
        for m in markers:
            self._insert(flow, d, m[0], m[1], None, m[3], m[4])

    @staticmethod
    def _first_overlap(pending: list[list], start: int) -> int:
        """Index of the first buffered piece that ends after ``start``."""
        i = bisect_right(pending, start, key=_START)
        if i and pending[i - 1][1] > start:
            i -= 1
        return i

    def _insert(self, flow: _Flow, d: int, start: int, end: int, data: bytes | None,
                frame: int, ts: float) -> None:
        """Buffer the parts of [start, end) that no buffered piece covers yet."""
        ds = flow.dirs[d]
        pending = ds.pending
        i = self._first_overlap(pending, start)
        pieces: list[list] = []
        pos = start
        while pos < end:
            if i < len(pending) and pending[i][0] < end:
                p_start, p_end, p_data = pending[i][0], pending[i][1], pending[i][2]
                if p_start > pos:
                    pieces.append([pos, p_start, None if data is None else
                                   data[pos - start:p_start - start], frame, ts])
                lo, hi = max(pos, p_start), min(end, p_end)
                if (data is not None and p_data is not None and
                        data[lo - start:hi - start] != p_data[lo - p_start:hi - p_start]):
                    self.overlap_conflicts += 1
                    self.problems.add(
                        f"frame {frame}: bytes {lo}-{hi} of connection {flow.conn.index} "
                        f"direction {d} differ from the copy in frame {pending[i][3]}; "
                        "the first copy is kept")
                pos = max(pos, p_end)
                i += 1
            else:
                pieces.append([pos, end, None if data is None else data[pos - start:],
                               frame, ts])
                pos = end
        for piece in pieces:
            insort(pending, piece, key=_START)
            size = piece[1] - piece[0] + PIECE_OVERHEAD
            ds.buffered += size
            self._buffered += size

    def _drain(self, flow: _Flow, d: int, events: list[Event]) -> None:
        """Deliver buffered pieces that start at the next expected offset."""
        ds = flow.dirs[d]
        pending = ds.pending
        conn = flow.conn
        k = 0
        freed = 0
        nxt = ds.next
        count = len(pending)
        while k < count and pending[k][0] == nxt:
            start, end, data, frame, ts = pending[k]
            if data is None:
                self.gaps += 1
                self.gap_bytes += end - start
                conn.gap_bytes[d] += end - start
                events.append(StreamGap(conn, d, start, end - start, frame, ts, GAP_SNAPLEN))
            else:
                events.append(StreamData(conn, d, start, data, frame, ts))
            freed += end - start + PIECE_OVERHEAD
            nxt = end
            k += 1
        if k:
            del pending[:k]
            ds.next = nxt
            ds.buffered -= freed
            self._buffered -= freed

    def _gap(self, flow: _Flow, d: int, length: int, frame: int, ts: float, reason: str,
             events: list[Event]) -> None:
        """Declare ``length`` bytes at the next expected offset lost."""
        ds = flow.dirs[d]
        conn = flow.conn
        self.gaps += 1
        self.gap_bytes += length
        conn.gap_bytes[d] += length
        events.append(StreamGap(conn, d, ds.next, length, frame, ts, reason))
        ds.next += length

    def _skip_to(self, flow: _Flow, d: int, offset: int, frame: int, ts: float, reason: str,
                 events: list[Event]) -> None:
        """Declare the hole up to ``offset`` lost, then deliver what follows it."""
        ds = flow.dirs[d]
        if offset > ds.next:
            # attribute the gap to the frame of the data that follows it, when buffered
            if ds.pending and ds.pending[0][0] == offset:
                frame, ts = ds.pending[0][3], ds.pending[0][4]
            self._gap(flow, d, offset - ds.next, frame, ts, reason, events)
        self._drain(flow, d, events)

    def _acked(self, flow: _Flow, d: int, frame: int, ts: float, events: list[Event]) -> None:
        """The peer acknowledged up to ``ds.ack``: holes below it will never be filled."""
        ds = flow.dirs[d]
        if ds.ack is None or ds.base is None or flow.conn.ignored:
            return
        acked = ds.unwrap(ds.ack)
        if ds.fin is not None:
            acked = min(acked, ds.fin)      # the FIN itself takes one sequence number
        while acked > ds.next:
            target = min(acked, ds.pending[0][0]) if ds.pending else acked
            if ds.pending or ds.fin is not None:
                self._skip_to(flow, d, target, frame, ts, GAP_ACKED, events)
            else:
                return
            if not ds.pending and ds.fin is None:
                return
        if ds.fin is not None:
            self._close_if_finished(flow, frame, ts, events)

    # -- closing -------------------------------------------------------------------------

    def _flush(self, flow: _Flow, d: int, frame: int, ts: float, reason: str,
               events: list[Event]) -> None:
        """Deliver everything buffered, declaring every remaining hole with ``reason``."""
        ds = flow.dirs[d]
        if flow.conn.ignored:
            self._discard(ds)
            return
        # holes the peer acknowledged are explained better than by ``reason``
        if ds.ack is not None and ds.base is not None and self.gap_on_ack:
            self._acked(flow, d, frame, ts, events)
        while ds.pending:
            self._skip_to(flow, d, ds.pending[0][0], frame, ts, reason, events)
        if ds.fin is not None and ds.fin > ds.next:
            self._gap(flow, d, ds.fin - ds.next, frame, ts, reason, events)
        elif ds.fin is None and ds.ack is not None and ds.base is not None and self.gap_on_ack:
            # data acknowledged at the end but never captured (not counting a lost FIN's
            # sequence number, which is indistinguishable from one lost byte)
            acked = ds.unwrap(ds.ack)
            if acked > ds.next + 1:
                self._gap(flow, d, acked - ds.next, frame, ts, GAP_ACKED, events)

    def _unseen(self, flow: _Flow, d: int) -> None:
        """``Connection.unseen_bytes`` of an ignored connection's direction: its end (the
        FIN, else the end of its latest data or what the peer acknowledged when that is
        more than one past it: one may be a lost FIN) less the bytes captured and the
        holes reported."""
        ds = flow.dirs[d]
        conn = flow.conn
        if ds.base is None:
            return
        have = conn.bytes[d] + conn.gap_bytes[d]
        end = ds.fin
        if end is None:
            top = ds.unwrap(ds.top & _M32) if ds.top is not None else 0
            acked = ds.unwrap(ds.ack) if ds.ack is not None else 0
            end = max(top, acked if acked > top + 1 else 0)
        if end > have:
            conn.unseen_bytes += end - have

    def _discard(self, ds: _Direction) -> None:
        self._buffered -= ds.buffered
        ds.buffered = 0
        ds.pending.clear()

    def _close(self, flow: _Flow, reason: str, gap_reason: str, frame: int, ts: float,
               events: list[Event]) -> None:
        flow.closed = True          # first: flushing must not close it again
        conn = flow.conn
        for d in (0, 1):
            if conn.ignored:
                self._unseen(flow, d)
            self._flush(flow, d, frame, ts, gap_reason, events)
            self._discard(flow.dirs[d])
        flow.conn.close_reason = reason
        events.append(ConnectionClosed(flow.conn, reason))

    def _forget(self, flow: _Flow) -> None:
        for key in flow.keys:
            entry = self._table.get(key)
            if entry is not None and entry[0] is flow:
                del self._table[key]
        self._flows.pop(flow.conn.index, None)
        if self.forgotten is not None:
            self.forgotten.append(flow.conn)

    def _evict(self, frame: int, ts: float, events: list[Event]) -> None:
        """Make room in the connection table: forget closed flows, then close idle ones."""
        target = self.max_connections - max(1, self.max_connections // 8)
        for flow in [f for f in self._flows.values() if f.closed]:
            if len(self._flows) <= target:
                return
            self._forget(flow)
        if len(self._flows) <= target:
            return
        idle = sorted(self._flows.values(), key=lambda f: f.conn.last_ts)
        for flow in idle[:len(self._flows) - target]:
            self._close(flow, cx.CLOSE_EVICTED, GAP_EVICTED, frame, ts, events)
            self._forget(flow)

    def _relieve(self, frame: int, ts: float, events: list[Event]) -> None:
        """All buffers together are over the limit: give up the holes of the fullest ones."""
        while self._buffered > self.max_total_buffer:
            fullest = None
            size = 0
            for flow in self._flows.values():
                for d in (0, 1):
                    if flow.dirs[d].buffered > size:
                        fullest, size = (flow, d), flow.dirs[d].buffered
            if fullest is None:
                return
            flow, d = fullest
            ds = flow.dirs[d]
            while ds.pending:
                self._skip_to(flow, d, ds.pending[0][0], frame, ts, GAP_BUFFER, events)

    def finish(self) -> list[Event]:
        """End of input: close every open connection (holes become gaps); return the events."""
        events: list[Event] = []
        for flow in list(self._flows.values()):
            if not flow.closed:
                conn = flow.conn
                self._close(flow, cx.CLOSE_END, GAP_END, conn.last_frame, conn.last_ts, events)
        self._table.clear()
        self._flows.clear()
        return events

    @property
    def buffered_bytes(self) -> int:
        """Bytes (plus per-piece overhead) currently held in out-of-order buffers."""
        return self._buffered

    @property
    def open_connections(self) -> int:
        return sum(1 for f in self._flows.values() if not f.closed)

