"""One TCP connection's Kafka conversation: requests paired with responses.

Contract:

* A :class:`Conversation` receives its connection's stream events (bytes and holes per
  direction, close) in capture order and hands finished :class:`Exchange` objects to
  the shared :class:`Context`'s reorder buffer with their order key.  It never raises on
  bad bytes.
* Until it knows what the connection carries it buffers bytes (bounded by the
  detection budget) and asks :func:`kwsniff.kafka.detect.classify`.
* Pairing (modern protocol): by correlation id.  Produce with ``acks=0`` ->
  ``no_response_expected``, after a short grace (``acks0_grace`` seconds of capture time,
  or until a later request of the connection is answered) during which a response that
  some brokers send anyway still pairs with it (with a problem saying so).  A waiting
  request becomes ``unanswered`` when the
  connection closes or the capture ends, when ``timeout`` seconds of capture time pass,
  when ``overtake_limit`` later requests of the connection were answered (brokers answer
  in order), or when its correlation id is reused.  A response with an unknown
  correlation id is an ``orphan_response``; it is held briefly (``orphan_delay`` seconds
  or ``orphan_requests`` later requests) so that the connection's later traffic can help
  infer its API (:mod:`kwsniff.kafka.inference`).
* SASL (SaslHandshake v0): after a successful v0 handshake response the client's frames
  that do not parse as Kafka requests are raw SASL tokens; they pair in order with the
  broker's raw tokens as exchanges of protocol ``"kafka-sasl"``.
* Kafka 0.7: requests pair in order with responses (PRODUCE/MULTIPRODUCE expect none).

The class is split by concern: :mod:`kwsniff.kafka.conv_state` (options, context),
:mod:`~kwsniff.kafka.conv_resync` (frame-start checks), :mod:`~kwsniff.kafka.conv_orphans`,
:mod:`~kwsniff.kafka.conv_inorder` (SASL v0 tokens, 0.7) and
:mod:`~kwsniff.kafka.conv_release` (capture-order bookkeeping), one chain of bases
(``ReleaseControl`` <- ``InOrderPairing`` <- ``OrphanHandling`` <- ``ResyncChecks`` <-
``Conversation``): compiled, they are extension types sharing one C struct (every
attribute is declared in ``conv_release.pxd``).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any

from kwsniff.kafka import detect, legacy07
from kwsniff.kafka.decoding import (
    annotate, complete_body, decode_request, decode_response, header_request, header_response,
    sasl_shape)
from kwsniff.kafka.plausible import produce_acks, request_body_start, request_fields
from kwsniff.kafka.conn_summary import ConnectionSummary
from kwsniff.kafka.conv_resync import ResyncChecks
from kwsniff.kafka.conv_state import (  # noqa: F401 - re-exported for the engine
    KAFKA,
    KAFKA07,
    OTHER,
    PROTO_SASL,
    TLS,
    UNDECIDED,
    Context,
    Options,
    Pending,
    is_ip,
)
from kwsniff.kafka.framing import QUIET, Frame, Framer
from kwsniff.kafka.inference import ApiHistory
from kwsniff.kafka.model import (
    NO_RESPONSE_EXPECTED,
    ORPHAN_RESPONSE,
    PAIRED,
    REQUEST,
    RESPONSE,
    UNANSWERED,
    Exchange,
    KafkaMessage,
)

PRODUCE, METADATA, SASL_HANDSHAKE, API_VERSIONS = 0, 3, 17, 18


def _int32(raw: bytes) -> int:
    """The big-endian signed 32-bit integer that starts ``raw`` (at least 4 bytes): a
    response's correlation id (``struct.unpack_from(">i", raw)[0]``, without a call)."""
    v = (raw[0] << 24) | (raw[1] << 16) | (raw[2] << 8) | raw[3]
    return v - 0x100000000 if v >= 0x80000000 else v


#: data chunks after which detection, still undecided, looks again only as they grow
DECIDE_EVERY = 64


class Conversation(ResyncChecks):
    """See the module docstring."""

    __slots__ = ()      # (the attributes: ReleaseControl.__slots__, the chain's root)

    def __init__(self, conn: Any, ctx: Context) -> None:
        self.conn = conn
        self.ctx = ctx
        opts = ctx.options
        self.state = UNDECIDED
        self.client_dir: int | None = None
        self.client_by = ""
        a_port, b_port = conn.a[1], conn.b[1]
        self.kafka_port = (a_port in opts.ports or b_port in opts.ports
                           or tuple(conn.a) in ctx.learned or tuple(conn.b) in ctx.learned)
        if conn.a_is_client is not None:
            self.client_dir = 0 if conn.a_is_client else 1
            self.client_by = "syn"
        elif self.kafka_port:
            a_k = a_port in opts.ports or tuple(conn.a) in ctx.learned
            b_k = b_port in opts.ports or tuple(conn.b) in ctx.learned
            if a_k != b_k:
                self.client_dir = 1 if a_k else 0
                self.client_by = "port"
        self.framers = (Framer(self._check0, opts.max_frame, opts.window),
                        Framer(self._check1, opts.max_frame, opts.window))
        self.pending: dict[int, Pending] = {}
        self.waiting_bytes = 0      # frame bytes of the requests in pending (bounded)
        self.fifo: deque[Pending] = deque()          # SASL tokens / 0.7 requests, in order
        self.orphans: deque[Pending] = deque()
        self.recent: OrderedDict[int, tuple[int | None, int | None]] = OrderedDict()
        self.history = ApiHistory()
        self.sasl_raw = False
        self.sasl_wait: dict[int, str | None] = {}   # v0 handshake corr -> mechanism
        self.sasl_client_id: str | None = None       # of that handshake (raw tokens have none)
        self.requests_since_orphan = 0
        self.corr_hi: int | None = None              # highest request correlation id
        self.last_req_corr: int | None = None        # of the last request framed
        self.last_resp_corr: int | None = None       # of the last response framed
        self.broker_ranges: dict[int, tuple[int, int]] | None = None
        self.client_key: Any = None
        self.unordered_partial = False
        self.loss_seen = 0                           # 0.7: lost bytes at the last pairing
        self.last_client_id: Any = ()                # (cheap change detection)
        self.last_pair: tuple[int, int] | None = None
        self.undecided_chunks = 0                    # data chunks seen while undecided
        self.next_decide = 0                         # ... when detection looks again
        self.summary = ConnectionSummary(stream=conn.index, first_ts=conn.first_ts or 0.0)
        ctx.reorder.register(self, self._force)

    # ------------------------------------------------------------------ events
    def data(self, d: int, offset: int, data: bytes | memoryview, frame: int, ts: float) -> None:
        state = self.state
        if state == TLS or state == OTHER:
            return
        framer = self.framers[d]
        frames = framer.data(offset, data, frame, ts)
        if frames is QUIET and state != UNDECIDED:
            return                  # a partial frame grew: nothing to pair or release
        if state == UNDECIDED:
            # detection rescans all it buffered: after DECIDE_EVERY chunks, look again
            # only when the chunks grew by an eighth (linear time for tiny segments)
            self.undecided_chunks += 1
            n = self.undecided_chunks
            if n <= DECIDE_EVERY or n >= self.next_decide:
                self.next_decide = n + (n >> 3)
                self._decide(False)
        elif frames:
            self._frames(d, frames)
        self._refresh()

    def gap(self, d: int, offset: int, length: int, frame: int, ts: float, reason: str) -> None:
        if self.state == TLS or self.state == OTHER:
            return
        fr = self.framers[d]
        frames = fr.gap(offset, length, frame, ts)
        self.ctx.stats.gaps += 1
        self.ctx.stats.gap_bytes += length
        self.summary.gaps += 1
        self.summary.gap_bytes += length
        if self.state == UNDECIDED:
            self._decide(False)
        elif frames:
            self._frames(d, frames)
        self._refresh()

    def close(self, reason: str = "closed") -> None:
        """The connection ended (or the capture did): flush everything."""
        if self.state == UNDECIDED:
            self._decide(True)
        if self.state in (KAFKA, KAFKA07):
            # the client side first: responses are judged knowing every request
            c = self.client_dir if self.client_dir is not None else 0
            tail = [fr.first_frame_number() or self.conn.last_frame for fr in self.framers]
            fc = self.framers[c].finish()
            if fc:
                self._frames(c, fc)
            fs = self.framers[1 - c].finish()
            if fs:
                self._frames(1 - c, fs)
            for d in (0, 1):
                self._framer_problems(d)
                rest = self.framers[d].take_skip()
                if rest:
                    self._problem(f"frame {tail[d]}: {rest} bytes at the end of the "
                                  f"{'client' if d == self.client_dir else 'broker'} stream "
                                  "belong to no complete message")
            why = ("capture ended before a response" if reason == "capture-end"
                   else "connection closed before a response")
            for p in list(self.pending.values()):
                self._unanswered(p, why)
            while self.fifo:
                self._unanswered(self.fifo.popleft(), why)
            self._resolve_orphans(all_=True)
        self._sync_counters()
        self.ctx.reorder.forget(self)

    def detach(self) -> None:
        """After :meth:`close`, when the owner is done with the conversation: drop the
        framers (their ``check`` callbacks are bound methods of this conversation, a
        reference cycle), so that it is freed by reference counting at once instead of
        by the cyclic collector. Only ``summary`` and the counters may be read after."""
        self.framers = ()

    def expire(self, now: float) -> None:
        """Give up on waiting items whose deadline (capture time) passed before ``now``."""
        opts = self.ctx.options
        limit = now - opts.timeout
        why = f"no response within {opts.timeout:g} s of capture time"
        changed = False
        grace = now - opts.acks0_grace
        for p in list(self.pending.values()):
            if p.msg.ts_last < limit or (p.kind == "acks0" and p.msg.ts_last < grace):
                self._unanswered(p, why)
                changed = True
            elif p.msg.ts_last >= grace:
                break
        while self.fifo and self.fifo[0].msg.ts_last < limit:
            self._unanswered(self.fifo.popleft(), why)
            changed = True
        if self.orphans and self.orphans[0].msg.ts_last < now - opts.orphan_delay:
            cut = now - opts.orphan_delay
            while self.orphans and self.orphans[0].msg.ts_last < cut:
                self._resolve(self.orphans.popleft())
            changed = True
        if changed or self.state == UNDECIDED:
            self._refresh()

    def waiting(self) -> bool:
        """True while something waits for a response, for inference or for detection."""
        return bool(self.pending or self.fifo or self.orphans) or self.state == UNDECIDED

    # ------------------------------------------------------------- decisions
    def _decide(self, final: bool) -> None:
        opts = self.ctx.options
        if not self.kafka_port and not opts.auto_detect:
            self._set_other("not a Kafka port (auto-detection off)")
            return
        f0, f1 = self.framers
        verdict = detect.classify(
            (f0.buffered(), f1.buffered()),
            (self._seg_starts(0), self._seg_starts(1)),
            self.client_dir, self.kafka_port, final,
            max(opts.detect_budget, opts.window) if self.kafka_port else opts.detect_budget,
            opts.max_frame,
            self.client_by or "content")
        if verdict is None:
            return
        s = self.summary
        s.detected_by = verdict.reason
        if verdict.kind == TLS:
            self.state = TLS
            s.protocol = TLS
            self.client_dir = verdict.client_dir
            self._set_ends()
            # the framers keep what detection buffered: the engine hands it to the TLS
            # layer (kwsniff.engine_tls), which reports the connection
            if self.kafka_port:
                self.ctx.stats.tls_connections += 1
            return
        if verdict.kind == OTHER:
            if final and f0.last_offset is None and f1.last_offset is None:
                self.state = OTHER              # no payload at all: nothing to report
                self.summary.protocol = OTHER
                self.summary.detected_by = "no payload"
                return
            self._set_other(verdict.reason)
            return
        self.state = verdict.kind
        s.protocol = verdict.kind
        if self.client_dir is None:
            self.client_dir = verdict.client_dir if verdict.client_dir is not None else 0
            self.client_by = "content" if verdict.client_dir is not None else "guess"
        s.client_side_by = self.client_by
        self._set_ends()
        self.ctx.stats.kafka_connections += 1
        if not self.kafka_port:
            # later connections to this broker need no content proof
            broker = self.conn.b if self.client_dir == 0 else self.conn.a
            self.ctx.learn(tuple(broker))
        synced = self.conn.a_is_client is not None
        if verdict.kind == KAFKA:
            # chained frames while resynchronising must carry growing correlation ids
            self.framers[self.client_dir].seq_offset = 8
            self.framers[1 - self.client_dir].seq_offset = 4
            # a wrong size must not swallow the messages after it
            self.framers[self.client_dir].guard = self._not_a_request
            self.framers[1 - self.client_dir].guard = self._not_a_response
        out = []
        for d in (0, 1):
            fr = self.framers[d]
            clean = synced and fr.gaps == 0 and fr.first_offset in (None, 0)
            out.append(fr.start(clean))
        self._merged(out[0], out[1])

    def _set_other(self, reason: str) -> None:
        self.state = OTHER
        self.summary.protocol = OTHER
        self.summary.detected_by = reason
        self._set_ends()
        if not self.kafka_port and self.ctx.on_other is not None:
            self.ctx.on_other(self)
        for f in self.framers:
            f.discard()
        if self.kafka_port:
            self._problem(f"frame {self.conn.first_frame}: connection {self.conn.index} on a "
                          f"Kafka port carries no recognisable Kafka traffic ({reason})", run=True)

    def _set_ends(self) -> None:
        conn = self.conn
        d = self.client_dir
        s = self.summary
        if d == 1:
            s.client, s.broker = tuple(conn.b), tuple(conn.a)
        else:
            s.client, s.broker = tuple(conn.a), tuple(conn.b)
        s.client_side_by = self.client_by

    def _seg_starts(self, d: int) -> list[int]:
        fr = self.framers[d]
        base = fr.base + fr.pos
        return [s[0] - base for s in fr.segs if s[0] >= base]

    # -------------------------------------------------------------- checkers
    # ------------------------------------------------------------ dispatching
    def _merged(self, a: list[Frame], b: list[Frame]) -> None:
        """Process frames of both directions in capture order of their last byte."""
        if not a and not b:
            self._framer_problems(0)
            self._framer_problems(1)
            return
        items = [(f.frame_last, 0, i, f) for i, f in enumerate(a)] + \
                [(f.frame_last, 1, i, f) for i, f in enumerate(b)]
        items.sort(key=lambda t: (t[0], t[1] != self.client_dir, t[2]))
        for _, d, _, f in items:
            self._frames(d, [f])

    def _frames(self, d: int, frames: list[Frame]) -> None:
        client = d == self.client_dir
        s = self.summary
        legacy = self.state == KAFKA07
        for f in frames:
            n = len(f.raw) + 4
            if client:
                s.bytes_from_client += n
            else:
                s.bytes_from_broker += n
            s.frame_bytes += n + f.discarded
            if legacy:
                self._legacy(client, f, d)
            elif client:
                self._request(f, d)
            else:
                self._response(f, d)
        self._framer_problems(d)

    def _framer_problems(self, d: int) -> None:
        fr = self.framers[d]
        if fr.problems:
            for p in fr.problems:
                self._problem(p)
            fr.problems.clear()

    # ---------------------------------------------------------------- helpers
    def _key(self, f: Frame, d: int) -> tuple:
        return (f.frame_first, self.conn.index, d, f.offset)

    def _exchange(self, status: str, req: KafkaMessage | None, resp: KafkaMessage | None,
                  protocol: str = "kafka", problems: list[str] | None = None) -> Exchange:
        s = self.summary
        client = s.client or tuple(self.conn.a)
        broker = s.broker or tuple(self.conn.b)
        return Exchange(index=0, stream=self.conn.index, client=client, broker=broker,
                        status=status, request=req, response=resp, protocol=protocol,
                        problems=problems or [])

    def _emit(self, key: tuple, ex: Exchange) -> None:
        st = self.summary.statuses
        st[ex.status] = st.get(ex.status, 0) + 1
        self.ctx.reorder.add(key, ex)

    def _problem(self, text: str, run: bool = True) -> None:
        self.summary.add_problem(text)
        if run:
            self.ctx.stats.add_problem(text)

    def _remember(self, corr: int | None, key: int | None, ver: int | None) -> None:
        if corr is None:
            return
        r = self.recent
        r[corr] = (key, ver)
        r.move_to_end(corr)
        if len(r) > self.ctx.options.recent_limit:
            r.popitem(last=False)

    # ------------------------------------------------------------- requests
    def _request(self, f: Frame, d: int) -> None:
        raw = f.raw
        if self.sasl_raw or self.fifo:
            if request_fields(raw) is None:
                self._sasl_token(f, d, client=True)
                return
            self.sasl_raw = False
        opts = self.ctx.options
        if f.missing:
            msg = header_request(raw)
        else:
            msg = decode_request(raw, opts.bodies, opts.defer_bodies)
            if msg.deferred is not None and request_fields(raw) is None:
                complete_body(msg)    # its problems decide the SASL check below
        if msg.problems and not f.missing and request_fields(raw) is None:
            mech = sasl_shape(raw)
            if mech is not None:
                # a raw SASL token whose SaslHandshake v0 was not captured
                self.sasl_raw = True
                self.sasl_client_id = None
                self.summary.sasl_mechanism = self.summary.sasl_mechanism or mech
                self._sasl_token(f, d, client=True, note="raw SASL token; the SaslHandshake "
                                 "v0 that announced it was not captured")
                return
        self._place(msg, f)
        key = self._key(f, d)
        s = self.summary
        api_key, ver, corr = msg.api_key, msg.api_version, msg.correlation_id
        if api_key is None or corr is None:
            self._unidentified(f, d, "request")
            return
        s.note_request(api_key, ver)
        cid = msg.client_id
        if cid != self.last_client_id:
            self.last_client_id = cid
            s.note_client_id(cid)
        if ver is not None:
            pair = (api_key, ver)
            if pair != self.last_pair:
                self.last_pair = pair
                new = pair not in self.history.pairs
                self.history.note(api_key, ver)
                if self.client_key is None:
                    self.client_key = cid if cid else self.summary.client
                if new:
                    self.ctx.history(self.client_key).note(api_key, ver)
            else:
                self.history.pairs[pair] += 1
        self.last_req_corr = corr
        if self.corr_hi is None or corr > self.corr_hi:
            self.corr_hi = corr
        if msg.body is not None:
            self.ctx.topic_ids.annotate(api_key, msg.body, REQUEST, ver)
            annotate(msg, None, self.ctx.annotate_ctx, self.conn.index)
        kind = "kafka"
        if api_key == PRODUCE and self._acks(msg) == 0:
            kind = "acks0"
        if api_key == SASL_HANDSHAKE and ver == 0:
            mech = msg.body.get("Mechanism") if msg.body else None
            self.sasl_wait[corr] = mech
            if len(self.sasl_wait) > 16:
                del self.sasl_wait[next(iter(self.sasl_wait))]
            s.sasl_mechanism = mech
        if self.orphans and kind == "kafka" and self._claim_orphan(corr, msg, key):
            self._count_request()
            return
        old = self.pending.pop(corr, None)
        if old is not None:
            self.waiting_bytes -= len(old.msg.raw)
            self._unanswered(old, f"correlation id {corr} was reused by a later request "
                                  f"(frame {f.frame_first}) before a response")
        p = Pending(key, msg, self, kind)
        self.pending[corr] = p
        self.waiting_bytes += len(msg.raw)
        # e.g. a one-way capture (no response ever): memory stays bounded, by the number
        # of waiting requests and by their bytes
        reorder = self.ctx.reorder
        limit = reorder.limit
        if len(self.pending) > limit:
            self._unanswered(next(iter(self.pending.values())),
                             f"no response while {limit} later requests waited")
        if self.waiting_bytes > reorder.byte_limit:
            self._too_many_bytes(reorder.byte_limit)
        self._count_request()

    def _too_many_bytes(self, limit: int) -> None:
        """Give up the oldest waiting requests (reported unanswered) until those left
        hold at most ``limit`` bytes of frames, the newest always kept."""
        pending = self.pending
        size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"
        while self.waiting_bytes > limit and len(pending) > 1:
            self._unanswered(next(iter(pending.values())),
                             f"no response while later requests of more than {size} "
                             "waited on this connection")

    def _unidentified(self, f: Frame, d: int, what: str) -> None:
        """A frame too short to carry a header (cut by a capture gap, or malformed):
        there is nothing to pair or show, so it is reported, not made an exchange."""
        have = len(f.raw)
        if f.missing:
            why = (f"a {have + f.missing}-byte {what} lost to a capture gap ({have} bytes "
                   "captured, too few for its header)")
        else:
            why = f"a {have}-byte frame too short for a {what} header"
        self._problem(f"frame {f.frame_first}: {why}; not reported as an exchange")
        # every captured byte of the frame: size prefix, head and what followed a hole
        self.framers[d].skipped_bytes += have + 4 + f.discarded
        self.summary.frame_bytes -= have + 4 + f.discarded

    def _count_request(self) -> None:
        if self.orphans:
            self.requests_since_orphan += 1
            if self.requests_since_orphan >= self.ctx.options.orphan_requests:
                self._resolve_orphans(all_=True)

    @staticmethod
    def _acks(msg: KafkaMessage) -> int | None:
        if msg.body is not None:
            acks = msg.body.get("Acks")
            if isinstance(acks, int):
                return acks
        if msg.api_version is None:
            return None
        start = msg.body_offset or request_body_start(msg.raw, PRODUCE, msg.api_version)
        if start is None:
            return None
        return produce_acks(msg.raw, msg.api_version, start)

    # ------------------------------------------------------------ responses
    def _response(self, f: Frame, d: int) -> None:
        raw = f.raw
        corr = _int32(raw) if len(raw) >= 4 else None
        if self.fifo and (corr is None or corr not in self.pending):
            self._sasl_token(f, d, client=False)
            return
        key = self._key(f, d)
        if corr is not None:
            self.last_resp_corr = corr
        if corr is None:
            self._unidentified(f, d, "response")
            return
        p = self.pending.pop(corr, None)
        if p is not None:
            req = p.msg
            self.waiting_bytes -= len(req.raw)
            p.done = True
            if p.unordered:
                self.ctx.unordered.finished(p)
            msg = self._decode_response(raw, req.api_key, req.api_version, f)
            self._place(msg, f)
            self._after_response(msg, req)
            problems = ["the broker answered a Produce request sent with acks=0"] \
                if p.kind == "acks0" else None
            self._emit(p.key, self._exchange(PAIRED, req, msg, problems=problems))
            self._overtake(p.key)
            return
        if self.sasl_raw:
            self._sasl_token(f, d, client=False)
            return
        known = self.recent.pop(corr, None)
        if known is not None and known[0] is not None and known[1] is not None:
            msg = self._decode_response(raw, known[0], known[1], f)
            self._place(msg, f)
            self._after_response(msg, None)
            self._emit(key, self._exchange(ORPHAN_RESPONSE, None, msg, problems=[
                f"late response: its request (correlation id {corr}) was already reported "
                "without a response"]))
            return
        # orphan: decode later, when the connection's traffic can narrow the API
        msg = KafkaMessage(kind=RESPONSE, raw=raw, correlation_id=corr)
        self._place(msg, f)
        o = Pending(key, msg, self, "orphan")
        self.orphans.append(o)
        if len(self.orphans) > 64:
            self._resolve_orphans(all_=False, upto=self.orphans[0])

    def _decode_response(self, raw: bytes, api_key: int | None, ver: int | None,
                         f: Frame) -> KafkaMessage:
        if f.missing or api_key is None or ver is None:
            return header_response(raw, api_key, ver)
        opts = self.ctx.options
        return decode_response(raw, api_key, ver, opts.bodies, opts.defer_bodies)

    def _after_response(self, msg: KafkaMessage, req: KafkaMessage | None) -> None:
        """Learn from a decoded response (versions, topic ids, brokers, SASL state)."""
        body = msg.body
        api_key = msg.api_key
        s = self.summary
        if body is None:
            return
        s.note_errors(body, api_key, msg.api_version)
        ctx = self.ctx
        if api_key == API_VERSIONS:
            keys = body.get("ApiKeys")
            if isinstance(keys, list) and keys:
                ranges = {}
                for item in keys:
                    if isinstance(item, dict):
                        k, lo, hi = item.get("ApiKey"), item.get("MinVersion"), item.get("MaxVersion")
                        if isinstance(k, int) and isinstance(lo, int) and isinstance(hi, int):
                            ranges[k] = (lo, hi)
                if ranges:
                    ranges = ctx.shared_ranges(ranges)
                    s.api_versions = ranges
                    s.api_versions_frame = msg.frame_last
                    self.broker_ranges = ranges
        elif api_key == METADATA:
            brokers = body.get("Brokers")
            if isinstance(brokers, list):
                for b in brokers:
                    if isinstance(b, dict):
                        host, port = b.get("Host"), b.get("Port")
                        if isinstance(host, str) and isinstance(port, int) and is_ip(host):
                            ctx.learn((host, port))
        elif api_key == SASL_HANDSHAKE and msg.correlation_id in self.sasl_wait:
            mech = self.sasl_wait.pop(msg.correlation_id)
            if body.get("ErrorCode") == 0:
                self.sasl_raw = True
                self.sasl_client_id = req.client_id if req is not None else None
                s.sasl_mechanism = mech
        ctx.topic_ids.learn(api_key, body)
        ctx.topic_ids.annotate(api_key, body, RESPONSE, msg.api_version)
        annotate(msg, req, ctx.annotate_ctx, self.conn.index)

    def _overtake(self, key: tuple) -> None:
        """Requests older than an answered one are unlikely to be answered any more."""
        if not self.pending:
            return
        limit = self.ctx.options.overtake_limit
        for q in list(self.pending.values()):
            if q.key >= key:
                break
            q.overtaken += 1
            if q.kind == "acks0":
                self._unanswered(q, "")
            elif q.overtaken >= limit:
                self._unanswered(q, f"no response: {q.overtaken} later requests on this "
                                    "connection were answered first")

    def _unanswered(self, p: Pending, why: str) -> None:
        if p.done:
            return
        p.done = True
        if p.unordered:
            self.ctx.unordered.finished(p)
        if p.kind == "kafka" or p.kind == "acks0":
            if self.pending.get(p.corr) is p:
                del self.pending[p.corr]
                self.waiting_bytes -= len(p.msg.raw)
            self._remember(p.corr, p.msg.api_key, p.msg.api_version)
            if p.kind == "acks0":
                self._emit(p.key, self._exchange(NO_RESPONSE_EXPECTED, p.msg, None))
                return
        elif p.kind == "orphan":
            return
        proto = PROTO_SASL if p.kind == "sasl" else (legacy07.PROTOCOL if p.kind == "0.7" else "kafka")
        self._emit(p.key, self._exchange(UNANSWERED, p.msg, None, protocol=proto, problems=[why]))

    def _sync_counters(self) -> None:
        s = self.summary
        s.skipped_bytes = self.framers[0].skipped_bytes + self.framers[1].skipped_bytes
        s.resyncs = self.framers[0].resyncs + self.framers[1].resyncs
        s.stream_bytes = sum(fr.last_offset - fr.first_offset for fr in self.framers
                             if fr.last_offset is not None)
        s.last_ts = self.conn.last_ts or s.last_ts

