"""Decoding the segments of one TCP 4-tuple on an executor (``spark-decode``'s reduce side).

Contract: :func:`decode_sorted` consumes the items of one shuffle partition, sorted by
``(connection_key, ts, global_frame)`` (see :mod:`kwsniff.spark.capture_files`), and
runs, for each connection key in turn, a fresh TCP reassembler and engine
(:class:`kwsniff.engine.Engine`, the same decoding path as ``kwsniff export``) over its
segments — streaming: memory is bounded by the engine's and the reassembler's limits,
never by the connection's length. It yields tagged tuples:

* ``("X", (frame, stream_offset), connection_first_frame, values, fix)`` — one exchange:
  its capture-order key (first byte of its first message), the first frame of its TCP
  connection (which becomes the global ``stream`` number), ``values`` in the order of
  :func:`kwsniff.spark.schema.exchange_schema` with ``request``/``response``/
  ``request_header`` as JSON text and ``stream``/``index`` still None, and ``fix``: the
  body columns holding topic ids the connection could not name
  (:mod:`kwsniff.spark.topic_fixup`);
* ``("C", first_frame)`` — every TCP connection (Kafka or not), to number streams like
  a single run does;
* ``("T", topic_id, name, frame)`` — topic id mappings learned, and where;
* ``("P", text, connection_first_frames)`` — run-level problems (TCP layer, engine);
  ``connection N`` in the text is the N-th connection of this 4-tuple;
* ``("S", counters)`` — once per partition, summed over its keys: ``segments``,
  ``exchanges``, ``kafka_connections``, ``skipped_bytes``, ``gap_bytes``, ``problems``
  (run-level) and ``exchange_problems`` (in the exchanges' ``problems`` lists).

Everything except :func:`decode_sorted`'s input is plain picklable data.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from kwsniff import gc_policy
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka.model import Exchange
from kwsniff.kafka.topic_ids import has_topic_ids
from kwsniff.output.facts import TopicNames
from kwsniff.output.jsonl import ExportEncoder, dumps
from kwsniff.spark.capture_files import PROBLEM_KEY
from kwsniff.spark.schema import exchange_schema
from kwsniff.spark.topic_fixup import RecordingTopicIds, unresolved_ids
from kwsniff.tcp import ConnectionOpened, ProblemLog, TcpOptions, TcpReassembler

FIELDS: tuple[str, ...] = tuple(f.name for f in exchange_schema().fields)
POS = {name: i for i, name in enumerate(FIELDS)}
JSON_FIELDS = ("request", "response", "request_header")


class ConnectionRun:
    """Engine and reassembler for the segments of one 4-tuple."""

    def __init__(self, options: EngineOptions, capture_of: Any) -> None:
        tcp = options.tcp or TcpOptions()
        self.problems = ProblemLog(tcp.max_problems)
        self.reassembler = TcpReassembler(
            self.problems, max_buffer=tcp.max_buffer, max_total_buffer=tcp.max_total_buffer,
            max_connections=tcp.max_connections, gap_on_ack=tcp.gap_on_ack)
        self.engine = Engine(options)
        self.ids = RecordingTopicIds()
        self.engine.ctx.topic_ids = self.ids
        self.encoder = ExportEncoder("", names=TopicNames())
        self.capture_of = capture_of
        self.connections: list[int] = []       # first frames, in this key's order
        self.segments = 0
        self.exchanges = 0
        self.exchange_problems = 0
        self.counters: dict[str, int] = {}      # set by finish()

    def feed(self, frame: int, ts: float, seg: Any) -> Iterator[tuple]:
        self.segments += 1
        self.ids.frame = frame
        events = self.reassembler.feed(frame, ts, seg)
        if events:
            yield from self._events(events)

    def _events(self, events: Iterable[Any]) -> Iterator[tuple]:
        feed = self.engine.feed_event
        for ev in events:
            if type(ev) is ConnectionOpened:
                self.connections.append(ev.conn.first_frame)
            out = feed(ev)
            if out:
                for ex in out:
                    yield self._row(ex)

    def finish(self) -> Iterator[tuple]:
        yield from self._events(self.reassembler.finish())
        for ex in self.engine.finish():
            yield self._row(ex)
        for first in self.connections:
            yield ("C", first)
        for text, (name, frame) in self.ids.origins.items():
            yield ("T", text, name, frame)
        s = self.engine.summary
        texts = list(self.problems.messages) + list(s.problems)
        for text in texts:
            yield ("P", text, list(self.connections))
        dropped = self.problems.dropped + s.problems_dropped
        self.counters = {"segments": self.segments, "exchanges": self.exchanges,
                         "kafka_connections": s.kafka_connections,
                         "skipped_bytes": s.skipped_bytes, "gap_bytes": s.gap_bytes,
                         "problems": len(texts) + dropped,
                         "exchange_problems": self.exchange_problems}

    def _row(self, ex: Exchange) -> tuple:
        self.exchanges += 1
        obj = self.encoder.exchange_object(ex)
        self.exchange_problems += len(obj["problems"])
        first = ex.request if ex.request is not None else ex.response
        assert first is not None
        order = (first.frame_first, first.stream_offset)
        fix: list[tuple[int, list[str], int]] = []
        for column, msg, kind in (("request", ex.request, "request"),
                                  ("response", ex.response, "response")):
            if msg is None or not isinstance(msg.body, dict) or msg.api_key is None \
                    or msg.api_version is None or ex.protocol != "kafka":
                continue
            if has_topic_ids(msg.api_key, kind, msg.api_version):
                ids = unresolved_ids(msg.body)
                if ids:
                    fix.append((POS[column], ids, msg.frame_last))
        obj["capture"] = self.capture_of(first.frame_first)
        for name in JSON_FIELDS:
            value = obj.get(name)
            obj[name] = dumps(value) if value is not None else None
        obj["stream"] = None
        obj["index"] = None
        # the reassembler numbers this key's connections 0, 1, ... in creation order,
        # which is the order of their ConnectionOpened events
        conns = self.connections
        conn_first = conns[ex.stream] if 0 <= ex.stream < len(conns) else first.frame_first
        return ("X", order, conn_first, [obj.get(name) for name in FIELDS], fix)


def decode_sorted(items: Iterable[tuple[tuple[bytes, float, int], Any]],
                  options: EngineOptions, capture_of: Any) -> Iterator[tuple]:
    """Decode one sorted shuffle partition (see the module contract), with the
    streaming GC thresholds while it runs (:func:`kwsniff.gc_policy.streaming`)."""
    run: ConnectionRun | None = None
    current: bytes | None = None
    totals: dict[str, int] = {}

    def done(finished: ConnectionRun) -> Iterator[tuple]:
        yield from finished.finish()
        for name, value in finished.counters.items():
            totals[name] = totals.get(name, 0) + value

    with gc_policy.streaming():
        for (key, ts, frame), seg in items:
            if key == PROBLEM_KEY:
                yield ("P", seg[1], [])
                continue
            if key != current:
                if run is not None:
                    yield from done(run)
                run = ConnectionRun(options, capture_of)
                current = key
            yield from run.feed(frame, ts, seg)
        if run is not None:
            yield from done(run)
    if totals:
        yield ("S", totals)
