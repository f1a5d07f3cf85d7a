"""The captures of real Kafka software in pcaps/ reassemble with no unexplained gaps,
and every TCP stream equals the one rebuilt independently from tshark's per-segment output."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from tcp_helpers import check_contract, tshark_streams

from kwsniff.capture import open_capture
from kwsniff.tcp import StreamData, StreamGap, iter_tcp_events

PCAPS = Path(__file__).resolve().parents[2] / "pcaps"
CAPTURES = sorted(p for p in PCAPS.glob("*.pcap*") if not p.name.endswith(".json"))


def manifest(path: Path) -> dict:
    meta = path.with_name(path.name.split(".pcap")[0] + ".json")
    return json.loads(meta.read_text()) if meta.exists() else {}


def test_the_sample_captures_exist():
    assert CAPTURES, f"no captures in {PCAPS}"


def decode(path):
    with open_capture(path) as src:
        stream = iter_tcp_events(src)
        events = list(stream)
        problems = list(src.problems)
    check_contract(events)
    return events, stream.stats, problems


def explained(gap: StreamGap, meta: dict) -> bool:
    """A gap is explained by the capture's own record of what it lost or cut."""
    cap = meta.get("capture", {})
    if gap.reason == "snaplen":
        return cap.get("snaplen", 262144) < 65535
    # packets the capture itself lost (a shaper dropping packets on the wire is not one:
    # TCP retransmits them and the capture sees the retransmission)
    dropped = (cap.get("packets_dropped_by_kernel") or 0) + (cap.get("packets_dropped_by_interface")
                                                              or 0)
    return dropped > 0


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_real_capture_has_no_unexplained_gaps(path):
    events, stats, problems = decode(path)
    meta = manifest(path)
    assert problems == []
    assert stats.problems == ()
    assert stats.connections > 0
    gaps = [e for e in events if isinstance(e, StreamGap)]
    unexplained = [g for g in gaps if not explained(g, meta)]
    assert unexplained == []
    if meta.get("capture", {}).get("starts_mid_stream") is False:
        assert all(e.conn.a_is_client is not None for e in events)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_real_capture_streams_equal_tshark_segments(path):
    events, _, _ = decode(path)
    ours: dict[tuple, bytearray] = defaultdict(bytearray)
    for e in events:
        if isinstance(e, StreamData):
            ip, port = e.conn.endpoints(e.direction)[0]
            ours[e.conn.index, ip, port] += e.data
    expected = tshark_streams(path)
    assert {k: bytes(v) for k, v in ours.items()} == expected
