"""The one decoding path: packets -> TCP streams -> Kafka conversations -> exchanges.

Contract:

* :func:`iter_exchanges` (or :meth:`Engine.run`) consumes packet tuples (a
  ``CaptureSource``, a live source, any iterable of ``(frame, ts, linktype, data,
  orig_len)``) and yields :class:`~kwsniff.kafka.model.Exchange` objects in capture
  order (order of the first byte of each exchange's first message) with 1-based
  ``index`` values in that order.  Nothing here does I/O; nothing raises on bad bytes.
* :attr:`Engine.summary` (:class:`RunSummary`) holds run counters, readable at any time;
  :attr:`Engine.connections` the :class:`~kwsniff.kafka.conn_summary.ConnectionSummary`
  of every finished connection that carried (or, on a Kafka port, should have carried)
  Kafka, at most ``max_connection_summaries`` of them (the oldest forgotten first; 0 for
  output that never lists connections: ``decode``, ``export``, ``stats``, ``live``).
* Sans-IO use (live capture, tests): :meth:`Engine.feed_event` with TCP events,
  :meth:`Engine.tick` to let capture time pass, :meth:`Engine.finish` at the end.
* Memory is bounded by the options: waiting requests expire after ``timeout`` seconds
  of capture time, the reorder buffer holds at most ``reorder_limit`` exchanges and
  ``reorder_bytes`` bytes of their frames, frames
  are at most ``max_frame`` bytes, resynchronisation looks at most ``resync_window``
  bytes, detection buffers at most ``detect_budget`` bytes per direction.
* Endpoint learning: once a broker endpoint ``(ip, port)`` is known to speak Kafka (by
  content or from Metadata/FindCoordinator answers), every other connection to it is
  decoded as Kafka: undecided ones are judged as on a Kafka port, and open ones already
  judged not Kafka (at most ``MAX_PARKED`` of them are remembered, the oldest forgotten:
  a reference to the TCP connection each, no bytes) are decoded from their next bytes
  on, hunting for a frame start as in a capture that starts mid-stream; their bytes
  before that are counted as not Kafka (``RunSummary.not_kafka_bytes``) and a problem
  says so.  The start of every connection judged not Kafka (what detection looked at:
  at most ``START_KEEP`` bytes per direction, ``MAX_START_BYTES`` of memory for all of
  them, the oldest dropped first) is kept: when its endpoint is learned, that start is decoded
  again, as a part of its own (an open connection then goes on from its next bytes as
  above); for a connection closed by then, the bytes after the kept start are counted
  as not Kafka and a problem says how many.
* Connections judged not Kafka are reported (``RunSummary.not_kafka``: at most
  ``MAX_NOT_KAFKA_LISTED`` endpoints with their bytes; counts beyond that).
* Memory does not grow with the connections of the capture: once the TCP layer forgets
  a connection (its counters are final, see :mod:`kwsniff.tcp.reassembly`), its bytes
  are added to the run's not-Kafka and TLS counts and its not-Kafka row joins a
  bounded list of the largest, unless its kept start may still be decoded again (then
  when that start is dropped). :meth:`run` takes the TCP layer's forgotten connections;
  a driver that feeds events itself calls :meth:`Engine.follow` with its TCP stream.
"""

from __future__ import annotations

from collections import OrderedDict
from heapq import heappush, heappushpop
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from kwsniff.kafka.conn_summary import ConnectionSummary
from kwsniff.kafka.conv_state import KAFKA, KAFKA07, OTHER, TLS, UNDECIDED, Context, Options
from kwsniff.kafka.conversation import Conversation
from kwsniff.kafka.model import STATUSES, Exchange
from kwsniff.tcp import ConnectionClosed, ConnectionOpened, StreamGap, TcpEventStream, TcpOptions
from kwsniff.tcp.events import StreamData

#: capture-time interval between sweeps for expired requests
SWEEP_INTERVAL = 1.0
#: open connections judged not Kafka that a later endpoint learning can still decode
MAX_PARKED = 10_000
#: bytes per direction kept of a connection judged not Kafka, decoded again if its
#: broker endpoint is learned later
START_KEEP = 64 << 10
#: all kept starts together (the oldest are dropped first), each counted with the
#: memory its objects take besides the bytes: START_ENTRY_COST per connection (its
#: tables' entries), START_PIECE_COST per kept segment (a tuple and a bytes object)
MAX_START_BYTES = 64 << 20
START_ENTRY_COST = 512
START_PIECE_COST = 160
#: not-Kafka connections listed (with endpoints and bytes) in the run summary
MAX_NOT_KAFKA_LISTED = 1_000


@dataclass(slots=True)
class EngineOptions:
    """What the user can tune (CLI flags map onto these)."""

    ports: tuple[int, ...] = (9092,)     # Kafka ports (``--port``, repeatable)
    auto_detect: bool = True             # also find Kafka on other ports by content
    timeout: float = 300.0               # seconds of capture time before "unanswered"
    orphan_delay: float = 10.0           # seconds an orphan waits for inference evidence
    acks0_grace: float = 1.0             # seconds an acks=0 Produce waits for a stray response
    overtake_limit: int = 8              # later answered requests that make one unanswered
    max_frame: int = 100 << 20           # largest plausible Kafka message (bytes)
    resync_window: int = 4 << 20         # bytes examined while resynchronising
    detect_budget: int = 64 << 10        # bytes per direction examined for detection
    reorder_limit: int = 10_000          # exchanges held back for capture order
    reorder_bytes: int = 128 << 20       # ... and the bytes of their frames, in all
    bodies: bool = True                  # decode bodies (False: headers only, faster)
    show_secrets: bool = False           # keep SASL passwords/tokens unmasked
    # leave bodies only output needs undecoded until kwsniff.kafka.decoding.complete
    # (decoding workers that render some of the exchanges; the engine's own decisions,
    # counters and exchange order are unchanged)
    defer_bodies: bool = False
    max_problems: int = 1000             # run problems kept (the rest are counted)
    # finished connections' summaries kept for Engine.connections (the oldest forgotten
    # first; 0: none, for output that never lists connections)
    max_connection_summaries: int = 100_000
    # decrypted TLS connections whose TlsInfo their exchanges get (the oldest forgotten)
    max_tls_infos: int = 100_000
    tcp: TcpOptions | None = None        # TCP layer limits
    # TLS secrets (kwsniff.tls.KeyLog, from --tls-keylog / SSLKEYLOGFILE); None: no keys,
    # TLS connections are still followed through their handshake and reported
    tls_keylog: Any = None
    tls_live: bool = False               # re-read the key log files when a key is missing


@dataclass(slots=True)
class RunSummary:
    """Counters of one run; complete after the iterator is exhausted."""

    packets: int = 0
    tcp_connections: int = 0
    kafka_connections: int = 0           # modern and 0.7
    kafka07_connections: int = 0
    tls_connections: int = 0             # TLS seen on a Kafka port
    tls_decrypted: int = 0               # TLS connections decrypted with the key log
    tls_undecrypted: int = 0             # TLS connections on a Kafka port without a key
    # one line per such connection: what its handshake showed (bounded like problems)
    tls_notes: list[str] = field(default_factory=list)
    # TCP payload bytes of the connections followed as TLS (not counted in frame_bytes,
    # skipped_bytes, gap_bytes): TLS records decrypted + not decrypted (handshake, alerts,
    # records without a key or that did not authenticate, a cut last record) + holes
    tls_bytes: int = 0
    tls_decrypted_bytes: int = 0
    tls_undecrypted_bytes: int = 0
    tls_gap_bytes: int = 0
    tls_frame_bytes: int = 0             # plaintext bytes in Kafka frames inside TLS
    other_connections: int = 0           # examined and not Kafka
    not_kafka_connections: int = 0       # of those, the ones that carried payload
    not_kafka_bytes: int = 0             # TCP payload bytes of those (and of the parts of
                                         # connections before their endpoint was learned)
    not_kafka: list = field(default_factory=list)   # [{"client", "server", "bytes"}]
    late_kafka_connections: int = 0      # decoded once their broker endpoint was learned
    reopened_connections: int = 0        # decoded on after data that followed a RST/FIN
    exchanges: dict[str, int] = field(default_factory=lambda: {s: 0 for s in STATUSES})
    exchanges_total: int = 0
    requests: int = 0
    responses: int = 0
    inferred_responses: int = 0          # orphans decoded by inference
    frame_bytes: int = 0                 # stream bytes in Kafka frames (captured ones)
    skipped_bytes: int = 0               # stream bytes in no frame (resynchronisation)
    gaps: int = 0                        # holes in Kafka streams
    gap_bytes: int = 0
    resyncs: int = 0
    topic_ids_resolved: int = 0
    first_ts: float | None = None
    last_ts: float | None = None
    problems: list[str] = field(default_factory=list)
    problems_dropped: int = 0
    max_problems: int = 1000
    tcp: Any = None                      # kwsniff.tcp.TcpStats at the end of the run

    def add_problem(self, text: str) -> None:
        if len(self.problems) < self.max_problems:
            self.problems.append(text)
        else:
            self.problems_dropped += 1

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__slots__ if k not in ("tcp", "max_problems")}
        out["exchanges"] = dict(self.exchanges)
        out["problems"] = list(self.problems)
        out["tls_notes"] = list(self.tls_notes)
        return out


class Engine:
    """Composes the TCP and Kafka layers (see the module docstring)."""

    def __init__(self, options: EngineOptions | None = None) -> None:
        opts = options or EngineOptions()
        self.options = opts
        self.summary = RunSummary(max_problems=opts.max_problems)
        self.ctx = Context(Options(
            ports=opts.ports, auto_detect=opts.auto_detect, max_frame=opts.max_frame,
            window=opts.resync_window, detect_budget=opts.detect_budget, timeout=opts.timeout,
            overtake_limit=opts.overtake_limit, orphan_delay=opts.orphan_delay,
            bodies=opts.bodies, show_secrets=opts.show_secrets, acks0_grace=opts.acks0_grace,
            defer_bodies=opts.defer_bodies),
            self.summary, opts.reorder_limit, opts.reorder_bytes)
        self.convs: dict[int, Conversation] = {}
        # (the tables bounded by _keep: oldest first)
        self.connections: OrderedDict[int, ConnectionSummary] = OrderedDict()
        self._next_sweep: float | None = None
        self._tcp: TcpEventStream | None = None
        self.tls: dict[int, Any] = {}                # stream -> engine_tls.TlsLink being followed
        self.tls_info: OrderedDict[int, Any] = OrderedDict()   # stream -> TlsInfo of
                                                               # decrypted ones
        self._tls_unread: list[tuple[Any, str]] = []  # (link, why) not decrypted
        # stream -> [(Connection, decrypted record bytes, gap bytes)] of links no longer
        # followed (counted at the end, or when the TCP layer forgets the connection)
        self._tls_done: dict[int, list[tuple]] = {}
        self._source: Any = None                     # the capture (its embedded secrets)
        self._secrets_seen = 0                       # ... key logs already taken
        # (_parked and _starts drop their oldest entries first: OrderedDicts, whose first
        # key is found in O(1) after the ones before it were removed, a dict's is not)
        # stream -> (open Connection judged not Kafka, stream bytes it delivered)
        self._parked: OrderedDict[int, Any] = OrderedDict()
        self._other: dict[int, Any] = {}         # stream -> (seq, Connection judged not Kafka)
        self._other_seq = 0                      # ... seq: order of judging, for ties
        # (bytes, -seq, row) of the largest not-Kafka connections already forgotten by the
        # TCP layer: a heap of at most MAX_NOT_KAFKA_LISTED, the smallest on top
        self._other_top: list[tuple] = []
        self._forgot: list | None = None         # the TCP layer's forgotten connections
        self._gone: set[int] = set()             # ... forgotten while their start is kept
        self._late: dict[int, int] = {}          # stream -> directions whose skip is pending
        self._earlier: list = []                 # summaries of earlier parts of reopened
                                                 # connections (see connection_summaries)
        self._counted: dict[int, int] = {}       # stream -> bytes of a revived connection
                                                 # already counted as not Kafka
        # stream -> (Connection, [segments of each direction], memory cost) judged not Kafka
        self._starts: OrderedDict[int, Any] = OrderedDict()
        self._start_bytes = 0
        self._finishing = False
        self.ctx.on_learn = self._learned
        self.ctx.on_other = self._keep_start

    # ------------------------------------------------------------------ driving
    def run(self, source: Iterable[tuple]) -> Iterator[Exchange]:
        """Decode ``source`` (packet tuples); yield exchanges in capture order, keeping
        no reference to an exchange once it was yielded."""
        tcp = TcpEventStream(source, self.options.tcp)
        self._tcp = tcp
        self.follow(tcp)
        self._source = source
        summary = self.summary
        for ev in tcp:
            # (feed_event, inlined: one call less per packet; compiled, _feed is a C call)
            try:
                out = self._feed(ev)
            except Exception as err:  # noqa: BLE001 - last line of defence
                out = self._contain(ev, err)
            if out:
                summary.packets = tcp.packets    # (kept current as exchanges come out)
                yield from hand_over(out)
        yield from hand_over(self.finish())

    def follow(self, tcp: TcpEventStream) -> None:
        """Take the connections ``tcp`` forgets, to count them then instead of keeping
        them to the end (see the module docstring); :meth:`run` calls it."""
        self._forgot = tcp.reassembler.forgotten = []

    def feed_event(self, ev: Any) -> list[Exchange]:
        """Process one TCP stream event; return the exchanges it releases."""
        try:
            return self._feed(ev)
        except Exception as err:  # noqa: BLE001 - last line of defence: never stop a run
            return self._contain(ev, err)

    def _contain(self, ev: Any, err: Exception) -> list[Exchange]:
        """A bug met by some bytes: report it, abandon that connection, keep going."""
        conn = getattr(ev, "conn", None)
        frame = getattr(ev, "frame", None) or (conn.last_frame if conn is not None else 0)
        where = f"connection {conn.index}" if conn is not None else "the run"
        self.summary.add_problem(f"frame {frame}: internal error in {where}: "
                                 f"{type(err).__name__}: {err}; its remaining traffic is skipped")
        if conn is not None:
            conv = self.convs.pop(conn.index, None)
            conn.ignored = True
            conn.sink = None
            if conv is not None:
                try:
                    self.ctx.reorder.forget(conv)
                except Exception:  # noqa: BLE001
                    pass
        try:
            return self._release(False)
        except Exception:  # noqa: BLE001
            return []

    def _feed(self, ev: Any) -> list[Exchange]:
        t = type(ev)
        if t is StreamData:
            sd = ev                     # (compiled: typed, its fields read as C fields)
            conv = self.convs.get(sd.conn.index)
            if conv is None:
                if self._parked:
                    self._unseen(sd.conn.index, len(sd.data))
                if self.tls:
                    return self._tls_event(ev)
                return []
            conv.data(sd.direction, sd.offset, sd.data, sd.frame, sd.ts)
            ts = sd.ts
            if conv.state != KAFKA and conv.state != KAFKA07:
                self._settled(conv)
        elif t is StreamGap:
            conv = self.convs.get(ev.conn.index)
            if conv is None:
                if self._parked:
                    self._unseen(ev.conn.index, ev.length)
                if self.tls:
                    return self._tls_event(ev)
                return []
            if self._late and ev.conn.index in self._late:
                self._late_gap(conv, ev)
            else:
                conv.gap(ev.direction, ev.offset, ev.length, ev.frame, ev.ts, ev.reason)
            ts = ev.ts
            self._settled(conv)
        elif t is ConnectionOpened:
            conn = ev.conn
            if conn.reopened:
                # bytes after a RST/FIN: the same connection decoded on (the TCP layer
                # reported it); a new conversation hunts for its next message
                if conn.ignored:
                    return []
                self.summary.reopened_connections += 1
            else:
                self.summary.tcp_connections += 1
                if self._forgot:
                    # (connections forgotten to make room for this one: their
                    # ConnectionClosed events came before this event)
                    self._fold_forgotten()
            conv = self.convs[conn.index] = Conversation(conn, self.ctx)
            conn.sink = self._sink(conv)
            ts = conn.first_ts
        elif t is ConnectionClosed:
            if self._parked:
                self._parked.pop(ev.conn.index, None)
            conv = self.convs.pop(ev.conn.index, None)
            if conv is not None:
                conv.close("capture-end" if ev.reason == "end of capture" else ev.reason)
                self._retire(conv)
            elif self.tls:
                return self._tls_event(ev)
            ts = ev.conn.last_ts
        else:
            return []
        if ts > self.ctx.now:
            self.ctx.now = ts
        s = self.summary
        if s.first_ts is None:
            s.first_ts = ts
            self._next_sweep = ts + SWEEP_INTERVAL
        if s.last_ts is None or ts > s.last_ts:
            s.last_ts = ts
        if self._next_sweep is not None and ts >= self._next_sweep:
            self._sweep(ts)
        reorder = self.ctx.reorder
        if reorder.dirty and reorder.ready:
            return self._release(False)
        return []

    def tick(self, now: float) -> list[Exchange]:
        """Let capture time pass without packets (live capture): expire and release."""
        self._sweep(now)
        return self._release(False)

    def finish(self) -> list[Exchange]:
        """End of input: close every conversation, release everything."""
        self._finishing = True
        self._parked.clear()
        self._starts.clear()
        self._start_bytes = 0
        self._gone.clear()
        if self._forgot:
            del self._forgot[:]     # (reported with the rest at the end)
        self.ctx.on_learn = None            # (a reference cycle through the engine)
        self.ctx.on_other = None
        for idx in list(self.convs):
            conv = self.convs.pop(idx)
            conv.close("capture-end")
            self._retire(conv)
        for idx in list(self.tls):
            self._tls_close(idx, "capture-end")
        for link, why in self._tls_unread:
            self.summary.tls_notes.append(_tls_note(link, why))
        self._tls_unread = []
        out = self._release(True)
        self._report_connections()
        if self._tcp is not None:
            stats = self._tcp.stats
            self.summary.tcp = stats
            self.summary.packets = max(self.summary.packets, stats.packets)
        self.summary.topic_ids_resolved = self.ctx.topic_ids.resolved
        return out

    # ----------------------------------------------------------------- internal
    def _sink(self, conv: Conversation) -> Any:
        """The connection's fast path (``Connection.sink``): bytes that only extend a
        partial Kafka frame are taken without a ``StreamData`` event when nothing else
        would happen at this packet (no sweep due, nothing to release), with the same
        effect as the event (the framer's and the run's state)."""
        framers = conv.framers
        ctx = self.ctx
        reorder = ctx.reorder
        summary = self.summary

        def sink(d: int, offset: int, data: Any, frame: int, ts: float) -> bool:
            state = conv.state
            if (state != KAFKA and state != KAFKA07) or (reorder.dirty and reorder.ready):
                return False
            nxt = self._next_sweep
            if nxt is None or ts >= nxt or not framers[d].extend(offset, data, frame, ts):
                return False
            if ts > ctx.now:
                ctx.now = ts
            last = summary.last_ts
            if last is None or ts > last:
                summary.last_ts = ts
            return True

        return sink

    def _settled(self, conv: Conversation) -> None:
        """Stop the TCP layer from delivering bytes of connections that are not Kafka."""
        state = conv.state
        if state == TLS:
            self._start_tls(conv)
        elif state == OTHER:
            conn = conv.conn
            conn.ignored = True
            self.convs.pop(conn.index, None)
            seen = 0            # stream bytes delivered before (not counting holes)
            for fr in conv.framers:
                if fr.last_offset is not None:
                    seen += fr.last_offset - fr.first_offset - fr.gap_bytes
            conv.close("ignored")
            self._retire(conv)
            if not conv.kafka_port and not self._finishing:
                parked = self._parked
                parked[conn.index] = (conn, seen)
                if len(parked) > MAX_PARKED:
                    old = next(iter(parked))
                    del parked[old]
                    self._drop_start(old)

    def _keep_start(self, conv: Conversation) -> None:
        """``Context.on_other``: keep the start of a connection judged not Kafka (see the
        module docstring), as ``(offset, bytes, frame, ts)`` segments per direction."""
        if self._finishing:
            return
        head: list[list] = []
        n = 0
        pieces = 0
        for fr in conv.framers:
            segs = []
            base = fr.base
            start = base + fr.pos
            lim = start + START_KEEP
            buf = fr.buf
            for s_off, s_end, frame, ts in fr.segs:
                lo = max(s_off, start)
                hi = min(s_end, lim)
                if lo < hi:
                    segs.append((lo, bytes(buf[lo - base:hi - base]), frame, ts))
                    n += hi - lo
            pieces += len(segs)
            head.append(segs)
        if not n:
            return
        cost = n + START_ENTRY_COST + START_PIECE_COST * pieces
        starts = self._starts
        self._drop_start(conv.conn.index)
        starts[conv.conn.index] = (conv.conn, head, cost)
        self._start_bytes += cost
        while self._start_bytes > MAX_START_BYTES and starts:
            self._drop_start(next(iter(starts)))

    def _drop_start(self, idx: int, fold: bool = True) -> None:
        entry = self._starts.pop(idx, None)
        if entry is not None:
            self._start_bytes -= entry[2]
            if fold and idx in self._gone:
                # forgotten by the TCP layer while its start was kept: final now
                self._gone.discard(idx)
                self._fold(idx)

    def _rescan(self, idx: int) -> tuple[Conversation, list[int], list] | None:
        """A new conversation (a part of its own) fed the kept start of connection
        ``idx``: ``(conversation, bytes kept per direction, the segments)``, not closed."""
        entry = self._starts.get(idx)
        if entry is None:
            return None
        self._drop_start(idx, False)
        conn, head, _cost = entry
        conv = Conversation(conn, self.ctx)
        kept = [0, 0]
        for d in (0, 1):
            for off, data, frame, ts in head[d]:
                conv.data(d, off, data, frame, ts)
                kept[d] += len(data)
        return conv, kept, head

    def _rescan_closed(self, idx: int, endpoint: tuple) -> None:
        """Decode again the kept start of a connection that was judged not Kafka and has
        closed; its bytes after that start count as not Kafka."""
        conn = self._starts[idx][0]
        got = self._rescan(idx)
        if got is None:
            return
        gone = idx in self._gone    # (forgotten by the TCP layer: final after this)
        if gone:
            self._gone.discard(idx)
        conv, kept, _head = got
        s = self.summary
        mark = len(s.problems)
        conv.close("closed")
        if conv.state != KAFKA and conv.state != KAFKA07:
            conv.detach()   # (not Kafka again: reported with its bytes as before)
            del s.problems[mark:]
            if gone:
                self._fold(idx)
            return
        if self._other.pop(idx, None) is not None:
            s.not_kafka_connections -= 1
        s.other_connections -= 1
        s.late_kafka_connections += 1
        self._retire(conv)
        tail = max(0, conn.bytes[0] - kept[0]) + max(0, conn.bytes[1] - kept[1]) + \
            conn.unseen_bytes
        cs = conv.summary
        cs.stream_bytes += tail
        cs.not_kafka_bytes += tail
        s.not_kafka_bytes += tail
        more = f"; {tail} bytes after it were not kept (counted as not Kafka)" if tail else ""
        s.add_problem(f"frame {conn.first_frame}: connection {idx} (closed) was judged not "
                      f"Kafka; its first {kept[0] + kept[1]} bytes were decoded again, since "
                      f"{endpoint[0]}:{endpoint[1]} is now known to be a Kafka broker{more}")
        if gone:
            self._fold(idx)

    def _unseen(self, idx: int, n: int) -> None:
        """Bytes (or a hole) the TCP layer delivered after the connection was judged not
        Kafka (events of the same packet that came after the judgement): if it is parked,
        they count as not Kafka should it be revived."""
        p = self._parked.get(idx)
        if p is not None:
            self._parked[idx] = (p[0], p[1] + n)

    def _retire(self, conv: Conversation) -> None:
        conv.conn.sink = None
        conv.detach()
        s = self.summary
        cs = conv.summary
        if conv.state == KAFKA or conv.state == KAFKA07:
            if conv.state == KAFKA07:
                s.kafka07_connections += 1
            s.skipped_bytes += cs.skipped_bytes
            s.frame_bytes += cs.frame_bytes
            s.resyncs += cs.resyncs
        elif conv.state == OTHER or (conv.state == TLS and not conv.kafka_port):
            s.other_connections += 1
            if conv.summary.detected_by != "no payload":
                idx = conv.conn.index
                if idx not in self._other:
                    self._other[idx] = (self._other_seq, conv.conn)
                    self._other_seq += 1
                s.not_kafka_connections += 1
        if (conv.state == OTHER or conv.state == TLS) and not conv.kafka_port:
            return
        if conv.state == "undecided":
            return
        limit = self.options.max_connection_summaries
        if limit <= 0:
            return
        conns = self.connections
        prev = conns.get(cs.stream)
        if prev is not None and prev is not cs:
            # the same TCP connection decoded again (reopened by bytes after its RST or
            # FIN): the summary of its earlier part is kept too
            earlier = self._earlier
            earlier.append(prev)
            if len(earlier) > limit:
                del earlier[0]
        _keep(conns, cs.stream, cs, limit)

    def _learned(self, endpoint: tuple) -> None:
        """``Context.on_learn``: a broker endpoint became known to speak Kafka."""
        if self._finishing:
            return
        for conn, seen in [p for p in self._parked.values()
                           if tuple(p[0].a) == endpoint or tuple(p[0].b) == endpoint]:
            self._revive(conn, seen, endpoint)
        for idx in [i for i, st in self._starts.items() if i not in self._parked and
                    (tuple(st[0].a) == endpoint or tuple(st[0].b) == endpoint)]:
            self._rescan_closed(idx, endpoint)
        for conv in list(self.convs.values()):
            conn = conv.conn
            if conv.state == UNDECIDED and not conv.kafka_port and \
                    (tuple(conn.a) == endpoint or tuple(conn.b) == endpoint):
                conv.kafka_port = True
                if conv.client_dir is None:
                    conv.client_dir = 1 if tuple(conn.a) == endpoint else 0
                    conv.client_by = "port"

    def _revive(self, conn: Any, seen: int, endpoint: tuple) -> None:
        """Decode a connection judged not Kafka from its next bytes on (see the module
        docstring); the TCP layer reports the bytes it did not deliver meanwhile as a
        hole, which :meth:`_late_gap` counts as not Kafka."""
        del self._parked[conn.index]
        s = self.summary
        got = self._rescan(conn.index)
        if got is not None:
            # its kept start, decoded as a part of its own (counted once, by the part
            # decoded from here on)
            part, kept, _head = got
            mark = len(s.problems)
            part.close("capture-end")
            if part.state != KAFKA and part.state != KAFKA07:
                # (instead of "on a Kafka port carries no recognisable Kafka traffic")
                del s.problems[mark:]
                s.add_problem(f"frame {conn.first_frame}: connection {conn.index}: its kept "
                              f"start ({kept[0] + kept[1]} bytes) holds no Kafka message "
                              "start")
            if part.state == KAFKA or part.state == KAFKA07:
                self._retire(part)
                s.kafka_connections -= 1
                if part.state == KAFKA07:
                    s.kafka07_connections -= 1
                seen = max(0, seen - kept[0] - kept[1])
            else:
                part.detach()
        if self._other.pop(conn.index, None) is not None:
            s.not_kafka_connections -= 1
        s.other_connections -= 1
        s.late_kafka_connections += 1
        s.not_kafka_bytes += seen
        self._counted[conn.index] = self._counted.get(conn.index, 0) + seen
        conn.ignored = False
        conv = self.convs[conn.index] = Conversation(conn, self.ctx)
        conn.sink = self._sink(conv)
        self._late[conn.index] = 3
        s.add_problem(f"frame {conn.last_frame}: connection {conn.index} was judged not Kafka; "
                      f"decoded from here on, since {endpoint[0]}:{endpoint[1]} is now known "
                      "to be a Kafka broker (its earlier bytes are counted as not Kafka)")

    def _late_gap(self, conv: Conversation, ev: Any) -> None:
        """Holes of a revived connection's direction before any byte of it was delivered
        again: the bytes the TCP layer did not deliver while the connection was judged
        not Kafka (acknowledged piece by piece, they may come as several holes)."""
        d = ev.direction
        idx = ev.conn.index
        pending = self._late[idx]
        fr = conv.framers[d]
        if pending & (1 << d) and (fr.last_offset is None or
                                   fr.last_offset - fr.first_offset == fr.gap_bytes):
            gaps, gap_bytes = conv.summary.gaps, conv.summary.gap_bytes
            s = self.summary
            run_gaps, run_bytes = s.gaps, s.gap_bytes
            conv.gap(d, ev.offset, ev.length, ev.frame, ev.ts, "not Kafka before learning")
            conv.summary.gaps, conv.summary.gap_bytes = gaps, gap_bytes
            s.gaps, s.gap_bytes = run_gaps, run_bytes
            s.not_kafka_bytes += ev.length
            conv.summary.not_kafka_bytes += ev.length
            self._counted[idx] = self._counted.get(idx, 0) + ev.length
            return
        pending &= ~(1 << d)
        if pending:
            self._late[idx] = pending
        else:
            del self._late[idx]
        conv.gap(d, ev.offset, ev.length, ev.frame, ev.ts, ev.reason)

    def _fold_forgotten(self) -> None:
        """Count the connections the TCP layer forgot (see the module docstring)."""
        forgot = self._forgot
        conns = forgot[:]
        del forgot[:]
        starts = self._starts
        for conn in conns:
            idx = conn.index
            if idx in starts:
                self._gone.add(idx)     # (its start may be decoded again: folded later)
            else:
                self._fold(idx)

    def _fold(self, idx: int) -> None:
        """Count now the TLS and not-Kafka bytes of final connection ``idx``."""
        links = self._tls_done.pop(idx, None)
        entry = self._other.pop(idx, None)
        if links is not None and entry is None:
            for conn, decrypted, gaps in links:
                self._tls_count(conn, decrypted, gaps)
        if entry is not None:
            seq, conn = entry
            row = self._other_row(conn)
            top = self._other_top
            # ((bytes, -seq) is unique: rows are never compared)
            item = (row["bytes"], -seq, row)
            if len(top) < MAX_NOT_KAFKA_LISTED:
                heappush(top, item)
            else:
                heappushpop(top, item)
        self._counted.pop(idx, None)

    def _other_row(self, conn: Any) -> dict:
        """Count a final not-Kafka connection's bytes; its ``RunSummary.not_kafka`` row."""
        s = self.summary
        n = conn.bytes[0] + conn.bytes[1]
        # (a revived connection judged not Kafka again: its bytes before the
        # revival are counted already)
        s.not_kafka_bytes += n - self._counted.get(conn.index, 0)
        # (bytes the capture missed after it was judged not Kafka: a hole)
        s.gap_bytes += conn.unseen_bytes
        # the server: the SYN's receiver, else the endpoint with the lower port
        if conn.a_is_client is False or (conn.a_is_client is None and conn.a[1] < conn.b[1]):
            client, server = conn.b, conn.a
        else:
            client, server = conn.a, conn.b
        return {"client": f"{client[0]}:{client[1]}", "server": f"{server[0]}:{server[1]}",
                "bytes": n}

    def _report_connections(self) -> None:
        """``RunSummary.not_kafka``, ``not_kafka_bytes`` and ``tls_*`` from the connections
        not forgotten by the TCP layer yet (their counters are final at the end of the run),
        counted as a forgotten one is; the largest not-Kafka rows, ties in the order they
        were judged."""
        for idx in [*self._tls_done, *self._other]:
            self._fold(idx)
        self._counted.clear()
        self.summary.not_kafka = [t[2] for t in sorted(self._other_top, reverse=True)]
        self._other_top = []

    def _tls_count(self, conn: Any, decrypted: int, gaps: int) -> None:
        s = self.summary
        gaps += conn.unseen_bytes
        total = conn.bytes[0] + conn.bytes[1] + gaps
        s.tls_bytes += total
        s.tls_decrypted_bytes += decrypted
        s.tls_gap_bytes += gaps
        s.tls_undecrypted_bytes += total - decrypted - gaps

    def _sweep(self, now: float) -> None:
        self._next_sweep = now + SWEEP_INTERVAL
        self.ctx.now = max(self.ctx.now, now)
        for conv in list(self.convs.values()):
            if conv.waiting():
                conv.expire(now)
        for link in list(self.tls.values()):
            inner = link.inner
            if inner is not None and inner.waiting():
                inner.expire(now)

    # -------------------------------------------------------------------- TLS
    def _start_tls(self, conv: Conversation) -> None:
        """Detection said TLS: follow the connection through :class:`TlsLink` (its
        handshake always; its Kafka stream when the key log has its secrets)."""
        from kwsniff.engine_tls import TlsLink    # (cryptography only for TLS captures)
        self._capture_secrets()
        conn = conv.conn
        self.convs.pop(conn.index, None)
        conn.sink = None
        link = TlsLink(conv, self.options.tls_keylog, self.options.tls_live)
        conv.close("ignored")
        self._retire(conv)
        self.tls[conn.index] = link
        self._tls_check(link)

    def _capture_secrets(self) -> None:
        """Add the key logs the capture embeds (pcapng Decryption Secrets Blocks) that
        appeared since the last look to the run's key log."""
        found = getattr(self._source, "tls_secrets", None)
        if not found or len(found) <= self._secrets_seen:
            return
        from kwsniff.tls.keylog import KeyLog
        opts = self.options
        if opts.tls_keylog is None:
            opts.tls_keylog = KeyLog()
        for blob in found[self._secrets_seen:]:
            opts.tls_keylog.add_text(blob.decode("ascii", "replace"))
        self._secrets_seen = len(found)

    def _tls_event(self, ev: Any) -> list[Exchange]:
        """A TCP event of a connection followed by the TLS path (or of none)."""
        idx = ev.conn.index
        link = self.tls.get(idx)
        if link is None:
            return []
        t = type(ev)
        if t is StreamData:
            link.data(ev.direction, ev.data, ev.frame, ev.ts)
            ts = ev.ts
        elif t is StreamGap:
            link.gap(ev.direction, ev.length, ev.frame, ev.ts, ev.reason)
            ts = ev.ts
        else:
            self._tls_close(idx, "capture-end" if ev.reason == "end of capture" else ev.reason)
            ts = ev.conn.last_ts
        if ts > self.ctx.now:
            self.ctx.now = ts
        s = self.summary
        if s.last_ts is None or ts > s.last_ts:
            s.last_ts = ts
        if self._next_sweep is not None and ts >= self._next_sweep:
            self._sweep(ts)
        if idx in self.tls:
            self._tls_check(link)
        reorder = self.ctx.reorder
        if reorder.dirty and reorder.ready:
            return self._release(False)
        return []

    def _tls_check(self, link: Any) -> None:
        """Stop following a connection nothing can decrypt (once its handshake spoke)."""
        if link.session.hopeless:
            self._tls_report(link)
            link.conn.ignored = True
            self.tls.pop(link.conn.index, None)
            self._tls_finished(link)
        elif link.decrypted and link.conn.index not in self.tls_info:
            self._tls_decrypted(link)

    def _tls_finished(self, link: Any) -> None:
        """A link no longer followed: its bytes are counted once its connection is final
        (when the TCP layer forgets it, or at the end of the run)."""
        self._tls_done.setdefault(link.conn.index, []).append(
            (link.conn, link.session.info.decrypted_record_bytes, link.gap_bytes))

    def _tls_decrypted(self, link: Any) -> None:
        """Remember the connection's TlsInfo for its exchanges (bounded like the
        connection summaries: the oldest are forgotten first)."""
        _keep(self.tls_info, link.conn.index, link.session.info,
              self.options.max_tls_infos)

    def _tls_report(self, link: Any) -> None:
        if link.reported:
            return
        link.reported = True
        info = link.session.info
        conn = link.conn
        s = self.summary
        if link.decrypted:
            s.tls_decrypted += 1
        elif link.kafka_port:
            s.tls_undecrypted += 1
            why = {"missing": "no key for it in the key log" if self.options.tls_keylog is not None
                   else "no key log (--tls-keylog)",
                   "unsupported suite": "its cipher suite is not supported"}.get(
                       info.key, "no TLS handshake seen")
            s.add_problem(f"frame {conn.first_frame}: connection {conn.index} is "
                          f"TLS-encrypted ({info.describe()}), not decrypted: {why}")
            if len(self._tls_unread) < s.max_problems:
                self._tls_unread.append((link, why))     # (noted at the end: byte counts)
        if info.key == "found":
            for p in info.problems[:5]:
                s.add_problem(f"connection {conn.index}: {p}")

    def _tls_close(self, idx: int, reason: str) -> None:
        link = self.tls.pop(idx, None)
        if link is None:
            return
        if link.decrypted and idx not in self.tls_info:
            self._tls_decrypted(link)
        self._tls_report(link)
        self._tls_finished(link)
        inner = link.inner
        if inner is not None:
            inner.close(reason)
            self._retire(inner)
            if inner.state == KAFKA or inner.state == KAFKA07:
                # (its bytes are counted as TLS record bytes: see RunSummary.tls_bytes)
                s = self.summary
                cs = inner.summary
                s.frame_bytes -= cs.frame_bytes
                s.skipped_bytes -= cs.skipped_bytes
                s.tls_frame_bytes += cs.frame_bytes

    def _release(self, final: bool) -> list[Exchange]:
        reorder = self.ctx.reorder      # (typed where compiled: drain is a C call)
        out = reorder.drain(final)
        if out:
            # RunSummary.count of each, in one pass (its counters added once)
            s = self.summary
            statuses = s.exchanges
            requests = responses = inferred = 0
            for ex in out:
                statuses[ex.status] = statuses.get(ex.status, 0) + 1
                if ex.request is not None:
                    requests += 1
                resp = ex.response
                if resp is not None:
                    responses += 1
                    if resp.inferred:
                        inferred += 1
            s.exchanges_total += len(out)
            s.requests += requests
            s.responses += responses
            s.inferred_responses += inferred
        if self.tls_info:
            infos = self.tls_info
            for ex in out:
                info = infos.get(ex.stream)
                if info is not None:
                    ex.tls = info
        return out

    def connection_summaries(self) -> list[ConnectionSummary]:
        """Summaries of finished and still-open Kafka connections, by stream index; a
        connection reopened by bytes after its RST or FIN has one per part, in order."""
        out = dict(self.connections)
        parts = [(cs.stream, 0, i, cs) for i, cs in enumerate(self._earlier)]
        for idx, conv in self.convs.items():
            if conv.state in (KAFKA, KAFKA07):
                prev = out.get(idx)
                if prev is not None and prev is not conv.summary:
                    parts.append((idx, 1, 0, prev))
                out[idx] = conv.summary
        for idx, link in self.tls.items():
            inner = link.inner
            if inner is not None and inner.state in (KAFKA, KAFKA07):
                out[idx] = inner.summary
        parts.extend((k, 2, 0, cs) for k, cs in out.items())
        parts.sort(key=lambda p: p[:3])
        return [p[3] for p in parts]


def hand_over(out: list[Exchange]) -> Iterator[Exchange]:
    """Yield the exchanges of ``out`` in order, the list letting go of each as it is
    yielded (it ends empty). A long wait (a slow acks=all Produce) releases hundreds of
    exchanges at once; iterating the list itself would keep those already output, and
    the records their output decoded, alive until the last one was."""
    out.reverse()
    while out:
        yield out.pop()


def _keep(table: OrderedDict, key: int, value: Any, limit: int) -> None:
    """``table[key] = value``, then forget the oldest keys (first stored: a key stored
    again keeps its place) while it holds more than ``limit``, in O(1) each, as the
    engine's other bounded tables (``del table[next(iter(table))]`` on a plain dict
    scans the slots of every key deleted before it, O(n) each on a table of 100,000
    connections)."""
    table[key] = value
    while len(table) > limit:
        table.popitem(last=False)


def _tls_note(link: Any, why: str) -> str:
    """``TLS connection 3 10.0.0.5:41234 → 10.0.0.2:9092: TLS 1.3, ..., 517 + 2804
    bytes, not decrypted (why)``: what an undecrypted TLS connection showed."""
    cs = link.outer_summary
    conn = link.conn
    ends = (f" {cs.client[0]}:{cs.client[1]} → {cs.broker[0]}:{cs.broker[1]}"
            if cs.client and cs.broker else "")
    nb = getattr(conn, "bytes", None)
    size = ""
    if nb is not None:
        c = 0 if tuple(conn.a) == tuple(cs.client or ()) else 1
        size = f", {nb[c]} bytes from the client, {nb[1 - c]} from the server"
    return (f"TLS connection {conn.index}{ends}: {link.session.info.describe()}{size}, "
            f"not decrypted ({why})")


def iter_exchanges(source: Iterable[tuple], options: EngineOptions | None = None, *,
                   engine: Engine | None = None) -> Iterator[Exchange]:
    """Decode ``source``; pass ``engine`` to read its summary and connections afterwards."""
    eng = engine if engine is not None else Engine(options)
    return eng.run(source)
