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
from kwsniff.engine import Engine

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "pcaps").glob("*.pcap"))


class _NoSink(Engine):
    """An engine that gives connections no sink: every segment is an event."""

    def _sink(self, conv: Any) -> Any:
        return None


def _decode(packets: list, sink: bool) -> tuple[list, Any, list, dict, dict]:
    """``sink``: True (the engine's sink), False (no sink: every segment an event)."""
    # (Engine is an extension type when compiled: a subclass turns the sink off)
    eng = Engine() if sink else _NoSink()
    out, events, taken, _ = feed_engine(eng, packets)
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
