"""The C kernel of the header parser (:mod:`kwsniff.tcp._headers`) gives exactly what
:meth:`PacketParser.parse` gives: ``eth_ipv4_tcp`` either declines (None) or returns
the very segment tuple the parser makes, on the sample captures, mutated and cut
headers and random bytes; it takes the common case, and any buffer. Skips when the
kernel is not in use (not built, ``KWSNIFF_PURE=1``, or its C file changed since the
build).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwsniff import _compiled
from kwsniff.tcp import packet as packet_mod
from kwsniff.tcp import stream as stream_mod
from kwsniff.tcp.packet import PacketParser

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "pcaps").glob("*.pcap"))
FAST = packet_mod.ETH_IPV4_TCP

pytestmark = pytest.mark.skipif(
    FAST is None, reason="kernel not in use: "
    + _compiled.kernels_unused.get("kwsniff.tcp._headers", "?"))


def test_the_kernel_is_the_path_in_use():
    assert stream_mod.ETH_IPV4_TCP is FAST
    assert FAST.__module__ == "kwsniff.tcp._headers"


def _packets(path: Path) -> list[bytes]:
    from kwsniff.capture import open_capture
    with open_capture(str(path)) as src:
        return [data for _f, _t, lt, data, _o in src if lt == 1]


def _assert_same_parse(data: bytes) -> None:
    """The fast path either declines or gives exactly what the full parser gives."""
    fast = FAST(data)
    if fast is not None:
        assert fast == PacketParser().parse(1, 0.0, 1, data, len(data))


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_fast_parse_same_on_sample_captures(path):
    packets = _packets(path)
    taken = 0
    for data in packets:
        _assert_same_parse(data)
        taken += FAST(data) is not None
    # the fast path is the common case, not a path that never runs
    assert not packets or taken > len(packets) // 2


def test_fast_parse_same_on_mutated_packets():
    rng = random.Random(7)
    packets = [p for path in SAMPLES[:4] for p in _packets(path)[:50]]
    for data in packets:
        for _ in range(20):
            m = bytearray(data)
            for _ in range(rng.randrange(1, 4)):
                # mutate the headers (where the fast path looks), sometimes cut the packet
                m[rng.randrange(min(len(m), 60))] = rng.randrange(256)
            if rng.random() < 0.3:
                del m[rng.randrange(len(m) + 1):]
            _assert_same_parse(bytes(m))


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=120))
def test_fast_parse_same_on_random_bytes(data):
    # an Ethernet/IPv4/TCP prefix now and then, so the fast path's checks are reached
    _assert_same_parse(data)
    prefixed = bytearray(data.ljust(60, b"\0"))
    prefixed[12:15] = b"\x08\x00\x45"
    prefixed[23] = 6
    _assert_same_parse(bytes(prefixed))


def test_fast_parse_accepts_any_buffer():
    data = _packets(SAMPLES[0])[0]
    assert FAST(memoryview(data)) == FAST(bytearray(data)) \
        == FAST(data)
    with pytest.raises(TypeError):
        FAST("not bytes")


def test_events_same_with_and_without_the_kernel(monkeypatch):
    """The whole TCP layer over a sample capture: the same events and counters."""
    from kwsniff.capture import open_capture
    from kwsniff.tcp import TcpEventStream

    def run() -> tuple:
        with open_capture(str(ROOT / "pcaps" / "rdkafka-produce-codecs.pcap")) as src:
            stream = TcpEventStream(src)
            events = [(type(ev).__name__, repr(ev), bytes(getattr(ev, "data", b"")))
                      for ev in stream]
        return events, stream.stats

    with_kernel = run()
    monkeypatch.setattr(stream_mod, "ETH_IPV4_TCP", None)
    assert run() == with_kernel
