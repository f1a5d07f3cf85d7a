"""TCP reassembly of one connection with loss, reordering, duplicates, tiny and empty
segments (a stream script, see :mod:`fuzz.wire`).

Invariants: the event contract holds; every delivered byte equals the byte the script
sent at that stream offset (when the handshake was captured, so offsets are known);
nothing is delivered twice; the C header kernel (``kwsniff.tcp._headers``, when in use)
gives the same events, connection state and counters as the Python parser alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from fuzz import checks, wire
from fuzz import seeds as _seeds
from kwsniff.tcp import StreamData, TcpEventStream, TcpOptions
from kwsniff.tcp import stream as stream_mod

MAX_LEN = 8192
OPTIONS = TcpOptions(max_buffer=2048, max_total_buffer=4096, max_problems=50)


def seeds() -> Iterable[bytes]:
    for s in _seeds.streams(3000):
        yield s
        # the same with loss, reordering, duplicates and other segmentations
        options, ops = wire.decode_script(s)
        flags = (wire.OP_LOST, wire.OP_LATE, wire.OP_DUP)
        yield wire.encode_script(options | (wire.SEG_TINY << 5),
                                 [(c | flags[i % 3] if i % 4 == 1 else c, p)
                                  for i, (c, p) in enumerate(ops)])
        yield wire.encode_script(options | (wire.SEG_EMPTY << 5), ops)


def expected_streams(data: bytes) -> tuple[bytes, bytes]:
    """Client and broker byte streams the script sends (lost bytes included)."""
    _, ops = wire.decode_script(data)
    c = b"".join(p for ctrl, p in ops if not ctrl & wire.OP_BROKER)
    b = b"".join(p for ctrl, p in ops if ctrl & wire.OP_BROKER)
    return c, b


def _view(ev: object) -> tuple:
    """An event and its connection's state when it was made."""
    conn = ev.conn                                          # type: ignore[attr-defined]
    return (type(ev).__name__,
            tuple(getattr(ev, n) for n in type(ev).__slots__ if n != "conn"),
            tuple(getattr(conn, n) for n in type(conn).__slots__ if n != "sink"))


def _same_without_kernel(pkts: list, events: list, stream: TcpEventStream) -> None:
    saved = stream_mod.ETH_IPV4_TCP
    stream_mod.ETH_IPV4_TCP = None
    try:
        slow = TcpEventStream(pkts, OPTIONS)
        slow_events = [_view(ev) for ev in slow]
    finally:
        stream_mod.ETH_IPV4_TCP = saved
    checks.require(slow_events == events, "the C header kernel changed the events")
    checks.require(slow.stats == stream.stats, "the C header kernel changed the counters")


def one_input(data: bytes) -> None:
    pkts = wire.packet_tuples(wire.script_packets(data))
    stream = TcpEventStream(pkts, OPTIONS)
    events = []
    views = []
    for ev in stream:
        events.append(ev)
        views.append(_view(ev))
    if stream_mod.ETH_IPV4_TCP is not None:
        _same_without_kernel(pkts, views, stream)
    checks.check_tcp_events(events, len(pkts))
    checks.check_problems(stream.stats.problems, "tcp")
    if not data or not data[0] & wire.OPT_HANDSHAKE:
        return
    client, broker = expected_streams(data)
    for ev in events:
        if type(ev) is StreamData:
            from_client = (ev.direction == 0) == (ev.conn.a_is_client is not False)
            want = (client if from_client else broker)[ev.offset:ev.offset + len(ev.data)]
            checks.require(bytes(ev.data) == want,
                           f"dir {ev.direction} offset {ev.offset}: delivered bytes differ "
                           "from the bytes sent")
