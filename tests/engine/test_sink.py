"""The engine's fast path for bytes that only extend a partial Kafka frame
(``Connection.sink``, no ``StreamData`` event): the same exchanges, messages, problems
and counters as delivering every segment as an event, on every sample capture and on
damaged copies of them."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from fuzz.checks import damaged_copy, delivered_bytes, exchange_state, feed_engine
from kwsniff.capture import open_capture
from kwsniff import engine as engine_mod
from kwsniff.engine import Engine

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "pcaps").glob("*.pcap"))


def _decode(packets: list, sink: bool | str) -> tuple[list, Any, list, dict, dict]:
    """``sink``: True (the accelerator's FrameSink where built), "python" (the closure),
    False (no sink: every segment an event)."""
    eng = Engine()
    if not sink:
        eng._sink = lambda conv: None           # type: ignore[method-assign]
    saved = engine_mod._FRAME_SINK
    if sink == "python":
        engine_mod._FRAME_SINK = None
    try:
        out, events, taken, _ = feed_engine(eng, packets)
    finally:
        engine_mod._FRAME_SINK = saved
    summaries = [(c.stream, c.bytes_from_client, c.bytes_from_broker, c.problems, c.statuses,
                  c.skipped_bytes, c.first_ts, c.last_ts) for c in eng.connection_summaries()]
    return ([exchange_state(ex) for ex in out], eng.summary.to_dict(), summaries,
            delivered_bytes(events, taken), taken)


def _packets(capture: Path) -> list:
    with open_capture(str(capture)) as source:
        return list(source)


def _same(packets: list) -> int:
    fast = _decode(packets, True)
    slow = _decode(packets, False)
    assert fast[:4] == slow[:4]
    assert not slow[4]
    if engine_mod._FRAME_SINK is not None:      # the closure too, and the same bytes taken
        closure = _decode(packets, "python")
        assert closure == fast
    return sum(fast[4].values())


@pytest.mark.parametrize("capture", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_sink_changes_nothing(capture: Path) -> None:
    _same(_packets(capture))


def test_sink_takes_the_bytes_of_large_frames() -> None:
    """Multi-segment frames (compressed produce batches, fetch responses) go through it."""
    assert _same(_packets(ROOT / "pcaps" / "rdkafka-produce-codecs.pcap")) > 10_000


@pytest.mark.parametrize("seed", range(12))
def test_sink_changes_nothing_on_damaged_traffic(seed: int) -> None:
    """Lost, duplicated and reordered packets, and packets from late in the capture
    first: the fast path steps aside exactly where the event path would differ."""
    rnd = random.Random(seed)
    packets = _packets(ROOT / "pcaps" / rnd.choice(["rdkafka-produce-codecs.pcap",
                                                    "rdkafka-consumer-group.pcap",
                                                    "aiokafka.pcap"]))
    _same(damaged_copy(packets, rnd))


def test_the_accelerated_sink_is_in_use_when_built() -> None:
    from kwsniff import accel

    if accel.speedups is None:
        pytest.skip(accel.status)
    eng = Engine()
    packets = _packets(ROOT / "pcaps" / "rdkafka-produce-codecs.pcap")
    out, _events, taken, _ = feed_engine(eng, packets)
    assert out and sum(taken.values()) > 10_000
    assert engine_mod._FRAME_SINK is accel.speedups.FrameSink


def test_the_accelerated_sink_calls_its_closure_where_unsure() -> None:
    """Odd argument types go to the Python closure, which decides."""
    from kwsniff import accel

    if accel.speedups is None:
        pytest.skip(accel.status)
    calls = []

    def closure(*args: Any) -> str:
        calls.append(args)
        return "closure"

    class Conv:
        state = "kafka"

    eng = Engine()
    sink = accel.speedups.FrameSink(closure, Conv(), (), eng.ctx.reorder, eng, eng.ctx,
                                    eng.summary, "kafka", "kafka07")
    eng._next_sweep = 10.0
    assert sink(0, 0, b"x", 1, 1.0) == "closure"          # no framer 0
    assert sink(0, 0, bytearray(b"x"), 1, 1.0) == "closure"
    assert len(calls) == 2
    Conv.state = "other"
    assert sink(0, 0, b"x", 1, 1.0) is False              # not Kafka: steps aside itself
    assert len(calls) == 2


def _sink_log(packets: list, accelerated: bool) -> list:
    """What every sink call returned and left behind: the framer's offset, buffer and
    pieces, the run clock (``ctx.now``) and the run's last timestamp."""
    log: list = []
    original = Engine._sink
    saved = engine_mod._FRAME_SINK

    def logged_sink(self: Engine, conv: Any) -> Any:
        inner = original(self, conv)
        framers = conv.framers

        def sink(d: int, offset: int, data: Any, frame: int, ts: float) -> Any:
            result = inner(d, offset, data, frame, ts)
            f = framers[d]
            log.append((result, d, offset, frame, f.last_offset, bytes(f.buf), len(f.segs),
                        self.ctx.now, self.summary.last_ts))
            return result
        return sink

    if not accelerated:
        engine_mod._FRAME_SINK = None
    Engine._sink = logged_sink                   # type: ignore[method-assign]
    try:
        feed_engine(Engine(), packets)
    finally:
        Engine._sink = original                  # type: ignore[method-assign]
        engine_mod._FRAME_SINK = saved
    return log


@pytest.mark.parametrize("capture", ["rdkafka-produce-codecs", "rdkafka-consumer-group"])
def test_the_accelerated_sink_leaves_the_same_state_after_every_call(capture: str) -> None:
    if engine_mod._FRAME_SINK is None:
        pytest.skip("accelerator not in use")
    packets = _packets(ROOT / "pcaps" / f"{capture}.pcap")
    c_log = _sink_log(packets, True)
    assert sum(1 for entry in c_log if entry[0] is True) > 20
    assert c_log == _sink_log(packets, False)
