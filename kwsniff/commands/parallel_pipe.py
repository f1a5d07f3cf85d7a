"""``decode -j 2`` summary lines as a pipeline: one worker runs the engine, the other
renders most lines, so the engine runs once instead of in every worker.

Contract:

* :func:`pipeline_wanted` says when :mod:`kwsniff.commands.parallel` uses it: two
  processes, summary lines through the summary lane (no display filter, no ``-V``/``-x``),
  no plugin hook registered (plugins loaded without hooks, as the shipped ones are until
  configured, report nothing during a run).
* Block ``b`` (``BLOCK`` consecutive exchanges, as in the other mode) belongs to the
  engine worker (0) when ``b % SHARE == 0``, else to the render worker (1):
  :func:`owner`. Both write one text record per owned block and a final record to the
  parent exactly as the other mode's workers do, so the parent merges them the same way.
* The engine worker (:func:`engine_work`) runs the whole engine over the capture and
  renders its own blocks through a :class:`~kwsniff.output.pipeline.Selection` with the
  summary lane, as one process does. Of the render worker's blocks it ships, in index
  order, over a pipe of its own (the link):

  - an exchange the summary lane can read without the run's state: the ``kafka``
    protocol, paired, no problem anywhere, request and response bodies both deferred
    (:data:`~kwsniff.kafka.decoding.DEFERRABLE_APIS` in versions without topic ids, so
    no topic name is learned or needed), nothing lost in a gap, no inferred response:
    as its index, stream, endpoints, the two frames, the request's first and last
    timestamps and the response's last;
  - any other exchange as its line, rendered (and counted) by the engine worker;
  - the end of each block, the run's first timestamp before the first line, and at the
    end the engine's counters.

* The render worker (:func:`render_work`) has no engine: it decodes each shipped
  exchange's frames again with the same deferred decoders (the same messages the engine
  made; it fails loudly, exit status 70, if they differ in what it checks), sets their
  timestamps (:func:`take_record`), and renders it
  through its own Selection and summary lane. What the line reads of an exchange
  (index, endpoints, client id, API, correlation id, timestamps, bodies, problems) is
  then what one process reads; a lane decline completes the bodies with a fresh
  annotate context, which for those APIs and versions holds nothing the run's would
  (no topic ids, no SASL).
"""

from __future__ import annotations

import argparse
import os
import pickle
import struct
from collections.abc import Callable, Iterator
from typing import Any

from kwsniff.commands.decode import engine_options, use_lane
from kwsniff.kafka.decoding import DEFERRABLE_APIS, decode_request, decode_response
from kwsniff.kafka.model import PAIRED, Exchange
from kwsniff.output.pipeline import Selection
from kwsniff.output.summary import SummaryFormatter

#: one block of every SHARE is rendered by the engine worker, the rest by the other one
#: (the busier worker sets the wall time. CPU seconds of the two workers on the whole
#: chatty benchmark capture, quiet machine, 2026-11-28: 1,024 -> 6.0-6.1 and 5.3,
#: 10 -> 6.7-7.1 and 5.0-5.2: the engine worker is the busier in time, although
#: callgrind counts more instructions in the render worker (8 -> 3.11 G and 2.87 G,
#: 1,024 -> 2.86 G and 3.21 G on 60,000 packets): the engine's state misses the caches,
#: the render worker's short-lived objects do not. Measure balance in time, not in
#: instructions)
SHARE = 1024
#: an exchange whose frames hold more bytes is rendered by the engine worker (shipped as
#: its line): copying it through the link and decoding its headers again costs more
#: than rendering it where it is (its line reads a few headers; the copies are of every
#: byte). Bulk benchmark capture (large frames), ...
MAX_SHIP_BYTES = 16 << 10
#: streams whose endpoints the render worker keeps (the engine worker sends them again
#: after both forget them)
MAX_STREAMS = 1 << 16

# link records: _X an exchange, _T a rendered line, _E end of block, _S the first
# timestamp, _C a stream's endpoints, _Z forget the endpoints, _F the engine's counters
_X, _T, _E, _S, _C, _Z, _F = b"X", b"T", b"E", b"S", b"C", b"Z", b"F"
_HEADER = struct.Struct("<cI")
#: index, stream, request first and last ts, response ts, request size
_EXCHANGE = struct.Struct("<QQdddI")
_X_RECORD = struct.Struct("<cIQQdddI")  # _HEADER and _EXCHANGE in one
_TS = struct.Struct("<d")
READ_CHUNK = 1 << 20
#: the render worker's failure when the engine worker stops shipping (the parent then
#: reports the engine worker's own failure)
LINK_ENDED = "the engine worker's link ended early"


def pipeline_wanted(args: argparse.Namespace, jobs: int, lane: bool) -> bool:
    """Whether ``decode`` runs as the pipeline (see the module contract)."""
    if jobs != 2 or not lane:
        return False
    from kwsniff.plugin_api.cli import active_manager
    manager = active_manager()
    # (plugins loaded without a hook, as the shipped ones are until configured, can
    # report nothing during the run)
    return not any(p.context is not None and p.context.guards
                   for p in getattr(manager, "plugins", None) or ())


def owner(block: int) -> int:
    """The worker that renders block ``block``."""
    return 0 if block % SHARE == 0 else 1


def shippable(ex: Exchange) -> bool:
    """Whether the render worker can render ``ex`` from its frames (module contract)
    and it is worth shipping: its two frames together hold at most
    :data:`MAX_SHIP_BYTES`."""
    req, resp = ex.request, ex.response
    return (req is not None and resp is not None
            and len(req.raw) + len(resp.raw) <= MAX_SHIP_BYTES and req.deferred is not None
            and resp.deferred is not None and ex.status == PAIRED and ex.protocol == "kafka"
            and not ex.problems and not req.problems and not resp.problems
            and req.api_key in DEFERRABLE_APIS and resp.api_key == req.api_key
            and resp.api_version == req.api_version and not req.missing
            and not resp.missing and resp.inferred is None)


class _Link:
    """The engine worker's end of the link: records through ``sink`` (the batched
    writer of length-prefixed records the workers write to the parent with: ``buf``,
    ``record(kind, payload)``, ``flush()``), exchanges straight into its buffer, flushed
    past ``batch`` bytes."""

    def __init__(self, sink: Any, batch: int) -> None:
        self.sink = sink
        self.buf: bytearray = sink.buf
        self.batch = batch
        self.record = sink.record
        self.flush = sink.flush
        self.streams: set[int] = set()

    def ship(self, ex: Exchange) -> bool:
        """Ship ``ex`` if it is :func:`shippable` (True), else change nothing (False)."""
        if not shippable(ex):
            return False
        self.exchange(ex)
        return True

    def exchange(self, ex: Exchange) -> None:
        stream = ex.stream
        if stream not in self.streams:
            if len(self.streams) >= MAX_STREAMS:
                self.streams.clear()
                self.record(_Z, b"")
            self.streams.add(stream)
            self.record(_C, pickle.dumps((stream, ex.client, ex.broker)))
        req, resp = ex.request, ex.response
        a, b = req.raw, resp.raw        # type: ignore[union-attr]
        buf = self.buf
        buf += _X_RECORD.pack(_X, _EXCHANGE.size + len(a) + len(b), ex.index, stream,
                              req.ts_first, req.ts_last,           # type: ignore[union-attr]
                              resp.ts_last, len(a))                # type: ignore[union-attr]
        buf += a
        buf += b
        if len(buf) >= self.batch:
            self.flush()


def _records(fd: int, before_wait: Callable[[], None]
             ) -> Iterator[tuple[bytes, bytearray, int, int]]:
    """The render worker's end of the link: ``(kind, buffer, start, end)`` of each
    record until the end (its payload is ``buffer[start:end]``, valid until the next);
    ``before_wait()`` before each read of the pipe."""
    buf = bytearray()
    pos = 0
    while True:
        while len(buf) - pos >= _HEADER.size:
            kind, size = _HEADER.unpack_from(buf, pos)
            end = pos + _HEADER.size + size
            if end > len(buf):
                break
            yield kind, buf, pos + _HEADER.size, end
            pos = end
        before_wait()
        data = os.read(fd, READ_CHUNK)
        if not data:
            if len(buf) > pos:
                raise RuntimeError(LINK_ENDED)
            return
        if pos:
            del buf[:pos]
            pos = 0
        buf += data


def take_record(buf: bytearray, start: int, end: int,
                ends: dict[int, tuple[tuple[str, int], tuple[str, int]]]) -> Exchange:
    """The exchange of the ``_X`` record ``buf[start:end]`` (its frames decoded again,
    deferred; ``ends``: the streams' endpoints); RuntimeError if a frame does not decode
    as the engine worker's did."""
    index, stream, req_first, req_ts, resp_ts, n = _EXCHANGE.unpack_from(buf, start)
    at = start + _EXCHANGE.size
    req = decode_request(bytes(buf[at:at + n]), True, True)
    resp = decode_response(bytes(buf[at + n:end]), req.api_key,    # type: ignore[arg-type]
                           req.api_version, True, True)            # type: ignore[arg-type]
    if req.deferred is None or resp.deferred is None or req.problems or resp.problems:
        raise RuntimeError(f"exchange {index} did not decode again as the engine worker "
                           "decoded it")
    req.ts_first = req_first
    req.ts_last = req_ts
    resp.ts_last = resp_ts
    client, broker = ends[stream]
    return Exchange(index, stream, client, broker, PAIRED, req, resp)


def engine_work(args: argparse.Namespace, palette: Any, link_sink: Any, send: Callable,
                parts: list[Any], source: Any, batch: int, block_size: int,
                counters: Callable[[Any, Any], dict[str, int]]) -> dict[str, Any]:
    """The engine worker (module contract): renders its blocks into ``parts``, calls
    ``send()`` (which must write them to the parent at once) at the end of each of them,
    ships the rest through ``link_sink`` (see :class:`_Link`; in writes of about
    ``batch`` bytes, all written before each ``send()``); returns its final record's
    contents (``counters(engine, source)``: the run counters the parent compares).

    (No deadlock: what the render worker needs is on the link before the engine worker
    writes to the parent, its blocks reach the parent when made, and the render worker
    writes what it has to the parent before it waits for the link. So the parent never
    waits for a block held in a buffer by a worker that waits for it.)"""
    from kwsniff.engine import Engine
    options = engine_options(args)
    options.defer_bodies = True
    engine = Engine(options)
    selection = Selection(None, None)
    use_lane(engine, selection)
    formatter = SummaryFormatter(palette, args.time_format)
    # (summary lines only: what decode's exchange_printer writes for them)
    line = formatter.format
    append = parts.append
    link = _Link(link_sink, batch)
    summary = engine.summary
    block, mine, start_sent = -1, True, False
    lines: list[str] = []

    def end_block() -> None:
        if mine:
            link.flush()        # (what the render worker needs, before the parent's)
            send()
        else:
            link.record(_E, b"")

    for ex in engine.run(source):
        b = (ex.index - 1) // block_size
        if b != block:
            if block >= 0:
                end_block()
            block, mine = b, owner(b) == 0
        if formatter.start_ts is None:
            formatter.start_ts = summary.first_ts     # as in one process
        if mine:
            for shown, facts in selection((ex,)):
                append(line(shown, facts) + "\n")
            continue
        if not start_sent:
            link.record(_S, _TS.pack(formatter.start_ts))
            start_sent = True
        if link.ship(ex):
            continue
        lines.clear()
        for shown, facts in selection((ex,)):
            lines.append(formatter.format(shown, facts) + "\n")
        if lines:
            link.record(_T, "".join(lines).encode("utf-8", "surrogatepass"))
    if block >= 0:
        end_block()
    final = {"engine": (summary.exchanges_total, counters(engine, source)),
             "capture_problems": list(getattr(source, "problems", ())),
             "tls_notes": list(summary.tls_notes),
             "shown": selection.shown, "problems": selection.problems, "events": [],
             "extra": {}}
    link.record(_F, pickle.dumps({k: final[k] for k in ("engine", "capture_problems",
                                                        "tls_notes")}))
    link.flush()
    return final


def render_work(args: argparse.Namespace, palette: Any, link_fd: int, send: Callable,
                parts: list[Any], flush: Callable[[], None]) -> dict[str, Any]:
    """The render worker (module contract): renders the link's exchanges and passes its
    lines on into ``parts``, calling ``send()`` at the end of each block and ``flush()``
    (its writes to the parent) before it waits for the link; returns its final record's
    contents."""
    from kwsniff.kafka.embedded import AnnotateContext
    from kwsniff.output.skim import SummaryLane
    selection = Selection(None, None)
    selection.lane = SummaryLane(AnnotateContext(show_secrets=engine_options(args).show_secrets),
                                 selection.names)
    formatter = SummaryFormatter(palette, args.time_format)
    # (summary lines only: what decode's exchange_printer writes for them)
    line = formatter.format
    append = parts.append
    ends: dict[int, tuple[tuple[str, int], tuple[str, int]]] = {}
    final: dict[str, Any] = {}

    def exchanges() -> Iterator[Exchange]:
        for kind, buf, start, end in _records(link_fd, flush):
            if kind == _X:
                yield take_record(buf, start, end, ends)
            elif kind == _T:
                parts.append(bytes(buf[start:end]))
            elif kind == _E:
                send()
            elif kind == _C:
                stream, client, broker = pickle.loads(buf[start:end])
                ends[stream] = (client, broker)
            elif kind == _Z:
                ends.clear()
            elif kind == _S:
                formatter.start_ts = _TS.unpack_from(buf, start)[0]
            elif kind == _F:
                final.update(pickle.loads(buf[start:end]))
            else:
                raise RuntimeError(f"unknown link record {kind!r}")

    for ex, facts in selection(exchanges()):
        append(line(ex, facts) + "\n")
    if not final:
        raise RuntimeError(LINK_ENDED)
    final.update({"shown": selection.shown, "problems": selection.problems, "events": [],
                  "extra": {}})
    return final
