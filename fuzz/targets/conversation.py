"""The whole decoding path for one connection: detection, framing, pairing, inference,
body/record decoding, and every output view (summary, digest, -V tree with byte
ranges, hex, JSON Lines).

Input: a stream script (:mod:`fuzz.wire`) — real conversations from ``pcaps/`` are the
seeds. Invariants: nothing raises; exchanges are numbered 1..n in order and well formed;
no view hides an internal error; every delivered byte of a Kafka connection is in a
message or counted as skipped; the run counters match the exchanges; run-level problems
name their frame; deferring bodies (as ``-j`` workers do) and completing some of them
changes no exchange, and the completed ones equal the eager ones.
"""

from __future__ import annotations

from collections.abc import Iterable

from fuzz import checks, wire
from fuzz import seeds as _seeds
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka.decoding import complete
from kwsniff.kafka.model import Exchange
from kwsniff.tcp import TcpOptions

MAX_LEN = 16384


def options() -> EngineOptions:
    return EngineOptions(max_frame=1 << 20, resync_window=8192, detect_budget=4096,
                         reorder_limit=64, orphan_delay=0.5,
                         tcp=TcpOptions(max_buffer=8192, max_total_buffer=16384))


def seeds() -> Iterable[bytes]:
    yield from _seeds.streams(6000)
    # synthetic ones: 0.7, garbage after frames, TLS, other ports
    ms = wire.msg07(b"hello") + wire.msg07(wire.gzip_bytes(wire.msg07(b"inner")), 1)
    yield wire.encode_script(wire.PLAIN, [(0, wire.produce07("t", 0, ms)),
                                          (0, wire.fetch07("t", 0)),
                                          (wire.OP_BROKER, wire.fetch07_response(ms)),
                                          (0, wire.offsets07("t", 0)),
                                          (wire.OP_BROKER, wire.offsets07_response([0, 7]))])
    yield wire.encode_script(wire.PLAIN, [(0, wire.api_versions_request(1) + b"garbage!"),
                                          (wire.OP_BROKER, wire.api_versions_response(1))])
    yield wire.encode_script(wire.PLAIN, [(0, wire.tls_client_hello())])
    yield wire.encode_script(wire.OPT_HANDSHAKE, [(0, wire.metadata_request(5)),
                                                  (wire.OP_BROKER, wire.metadata_response(5))])


def run(data: bytes, defer: bool = False) -> tuple[Engine, list, dict[int, int]]:
    """Decode a script; returns the engine, the exchanges and delivered bytes per stream
    (``defer``: with deferred bodies, as ``-j`` workers decode)."""
    pkts = wire.packet_tuples(wire.script_packets(data))
    opts = options()
    opts.defer_bodies = defer
    eng = Engine(opts)
    out, events, taken, _ = checks.feed_engine(eng, pkts)
    return eng, out, checks.delivered_bytes(events, taken)


def _odd(ex: Exchange) -> bool:
    return ex.index % 2 == 1


def one_input(data: bytes) -> None:
    eng, exchanges, delivered = run(data)
    # a -j worker defers bodies and completes those it renders: nothing else changes
    lazy, deferred, _ = run(data, defer=True)
    for ex in deferred:
        if _odd(ex):
            complete(ex, lazy.ctx.annotate_ctx)
    checks.check_deferred_same(exchanges, deferred, _odd)
    checks.check_exchanges(exchanges)
    checks.check_spill_same(exchanges)
    s = eng.summary
    checks.require(s.exchanges_total == len(exchanges), "exchange counter differs")
    checks.require(sum(s.exchanges.values()) == len(exchanges), "status counters differ")
    checks.check_problems(s.problems, "run")
    checks.check_located(s.problems, "run")
    summaries = eng.connection_summaries()
    checks.check_byte_accounting(exchanges, summaries, delivered)
    for cs in summaries:
        checks.check_problems(cs.problems, f"connection {cs.stream}")
    checks.render_all(exchanges)
