"""The accelerator's copy of the reassembler's in-order path (``_speedups.tcp_feed``,
used through :meth:`TcpReassembler.fast_path`) changes nothing: the same events, the
same connection and direction state after every packet, the same sink calls, on every
sample capture and on damaged copies, with and without consumer sinks and with
``gap_on_ack`` off. Skips when the accelerator is not in use."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from fuzz.checks import damaged_copy
from kwsniff import accel
from kwsniff.capture import open_capture
from kwsniff.tcp import ConnectionOpened, TcpEventStream, TcpOptions
from kwsniff.tcp import reassembly

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "pcaps").glob("*.pcap"))

pytestmark = pytest.mark.skipif(reassembly._FAST_FEED is None,
                                reason=f"accelerator not in use: {accel.status}")


def _slots(obj: Any, skip: tuple[str, ...] = ()) -> tuple:
    return tuple((name, getattr(obj, name, "<unset>")) for name in type(obj).__slots__
                 if name not in skip)


def _conn_state(conn: Any) -> tuple:
    return _slots(conn, ("sink",))


def _run(packets: list, fast: bool, sink_every: int, gap_on_ack: bool = True
         ) -> tuple[list, list, list, Any, int]:
    """(events and state after each packet, sink calls, final flows, stats, segments the
    fast path handled)."""
    handled = [0]
    original = reassembly._FAST_FEED

    def counting(*args: Any) -> Any:
        out = original(*args)
        if out is not None:
            handled[0] += 1
        return out

    calls: list = []

    def sink_for(conn: Any) -> Any:
        def sink(d: int, offset: int, data: Any, frame: int, ts: float) -> bool:
            calls.append((conn.index, d, offset, bytes(data), frame, ts))
            return (offset // 7 + frame) % sink_every == 0
        return sink

    saved = reassembly._FAST_FEED
    reassembly._FAST_FEED = counting if fast else None
    try:
        stream = TcpEventStream(iter(packets), TcpOptions(gap_on_ack=gap_on_ack))
        seen = []
        for ev in stream:
            if isinstance(ev, ConnectionOpened) and sink_every:
                ev.conn.sink = sink_for(ev.conn)
            seen.append((type(ev).__name__, ev.conn.index,
                         _slots(ev, ("conn",)), _conn_state(ev.conn)))
        flows = [(_conn_state(f.conn), f.closed, [_slots(d) for d in f.dirs])
                 for f in stream.reassembler._flows.values()]
        return seen, calls, flows, stream.stats, handled[0]
    finally:
        reassembly._FAST_FEED = saved


def _packets(capture: Path) -> list:
    with open_capture(str(capture)) as source:
        return list(source)


def _damaged(seed: int) -> list:
    rnd = random.Random(seed)
    packets = _packets(ROOT / "pcaps" / rnd.choice(["rdkafka-produce-codecs.pcap",
                                                    "rdkafka-consumer-group.pcap",
                                                    "aiokafka.pcap", "tansu-admin.pcap"]))
    return damaged_copy(packets, rnd)


def _same(packets: list, sink_every: int, gap_on_ack: bool = True) -> int:
    fast = _run(packets, True, sink_every, gap_on_ack)
    slow = _run(packets, False, sink_every, gap_on_ack)
    assert fast[:4] == slow[:4]
    assert slow[4] == 0
    return fast[4]


@pytest.mark.parametrize("capture", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_fast_feed_changes_nothing(capture: Path) -> None:
    packets = _packets(capture)
    for sink_every in (0, 1, 3):
        _same(packets, sink_every)


@pytest.mark.parametrize("seed", range(10))
def test_fast_feed_changes_nothing_on_damaged_traffic(seed: int) -> None:
    packets = _damaged(seed)
    _same(packets, 2)
    _same(packets, 0, gap_on_ack=False)


def test_fast_feed_handles_most_segments_of_a_clean_capture() -> None:
    packets = _packets(ROOT / "pcaps" / "rdkafka-produce-codecs.pcap")
    assert _same(packets, 0) > len(packets) * 0.6


def test_a_sink_error_propagates_from_the_fast_path() -> None:
    """An exception in a consumer's sink leaves the stream as it does without C."""
    packets = _packets(ROOT / "pcaps" / "rdkafka-produce-codecs.pcap")

    def run(fast: bool) -> tuple:
        saved = reassembly._FAST_FEED
        reassembly._FAST_FEED = saved if fast else None
        try:
            stream = TcpEventStream(iter(packets))
            count = 0

            def sink(*args: Any) -> bool:
                raise RuntimeError("consumer bug")

            with pytest.raises(RuntimeError, match="consumer bug"):
                for ev in stream:
                    count += 1
                    if isinstance(ev, ConnectionOpened):
                        ev.conn.sink = sink
            return count, stream.packets, [_conn_state(f.conn)
                                           for f in stream.reassembler._flows.values()]
        finally:
            reassembly._FAST_FEED = saved

    assert run(True) == run(False)


def test_a_refused_rebinding_leaves_the_binding_whole() -> None:
    """tcp_setup/sink_setup find every slot before keeping any: a call that fails part
    way (here after a class whose slots sit at other offsets) changes nothing."""
    from kwsniff import engine as engine_mod
    from kwsniff.engine import RunSummary
    from kwsniff.kafka.conv_state import Context
    from kwsniff.kafka.framing import Framer
    from kwsniff.kafka.ordering import Reorderer

    speedups = accel.speedups

    class Shifted:
        __slots__ = ("a", "b", "c", "closed", "dirs", "conn", "want_end", "last_offset",
                     "buf", "segs")

    class Unslotted:
        pass

    with pytest.raises((TypeError, AttributeError)):
        speedups.tcp_setup(Shifted, reassembly._Direction, Unslotted, 7, 16)
    with pytest.raises((TypeError, AttributeError)):
        speedups.sink_setup(Shifted, Reorderer, Context, Unslotted)
    packets = _packets(ROOT / "pcaps" / "rdkafka-produce-codecs.pcap")
    # same results, and the C path still recognises the segments it did (offsets of
    # another class would make it decline them, or read the wrong memory)
    assert _same(packets, 3) > len(packets) * 0.6
    assert engine_mod._FRAME_SINK is not None
    # the engine's sink too: still the closure's results (test_sink compares in full)
    speedups.sink_setup(Framer, Reorderer, Context, RunSummary)


def test_events_are_made_as_the_class_makes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """tcp_feed allocates StreamData events itself only while the class's __init__ is the
    one it bound; a patched __init__ makes every event."""
    from kwsniff.tcp import StreamData
    packets = _packets(ROOT / "pcaps" / "rdkafka-produce-codecs.pcap")
    original = StreamData.__init__
    made = [0]

    def init(self: Any, *args: Any) -> None:
        made[0] += 1
        original(self, *args)

    def data_events() -> list:
        return [(ev.conn.index, ev.direction, ev.offset, bytes(ev.data), ev.frame, ev.ts)
                for ev in TcpEventStream(iter(packets)) if type(ev) is StreamData]

    direct = data_events()
    monkeypatch.setattr(StreamData, "__init__", init)
    patched = data_events()
    assert made[0] == len(patched) > 100
    monkeypatch.undo()
    made[0] = 0
    assert data_events() == patched == direct and made[0] == 0
