"""Helpers for the sample-capture tests: paths, manifests, a minimal pcap reader.

The pcap reader here is deliberately independent of kwsniff's own capture layer: these
tests check the fixture files themselves, not the decoder.
"""

from __future__ import annotations

import json
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[2]
PCAPS = ROOT / "pcaps"
TOOLS = ROOT / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

# The capture names are a contract: README, docs and other tests refer to them.
EXPECTED = [
    "rdkafka-consumer-group",
    "rdkafka-produce-codecs",
    "rdkafka-acks",
    "rdkafka-idempotent-txn",
    "kafka-python-0.8.2",
    "kafka-python-0.9",
    "kafka-python-0.10",
    "kafka-python-0.11",
    "aiokafka",
    "tansu-admin",
    "tansu-sasl",
    "midstream",
    "plugins-avro-protobuf-json",   # tools/make_plugin_pcap.py (plugin tests)
    "insights-groups",              # cross-exchange insights (tests/insights)
    "insights-idempotent-retry",
    "insights-session-timeout",
]

MAX_BYTES = 1024 * 1024


def manifest(name: str) -> dict[str, Any]:
    return json.loads((PCAPS / f"{name}.json").read_text())


@dataclass(slots=True)
class PcapFile:
    linktype: int
    snaplen: int
    frames: list[tuple[float, int, bytes]]  # (ts, orig_len, data)
    trailing_bytes: int


def read_pcap(path: Path) -> PcapFile:
    raw = path.read_bytes()
    magic = raw[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        raise AssertionError(f"{path.name}: not a classic pcap file")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    _maj, _min, _tz, _sig, snaplen, linktype = struct.unpack_from(e + "HHiIII", raw, 4)
    frames: list[tuple[float, int, bytes]] = []
    pos = 24
    while pos + 16 <= len(raw):
        sec, frac, incl, orig = struct.unpack_from(e + "IIII", raw, pos)
        pos += 16
        if pos + incl > len(raw):
            pos -= 16
            break
        frames.append((sec + frac / (1e9 if nano else 1e6), orig, raw[pos:pos + incl]))
        pos += incl
    return PcapFile(linktype, snaplen, frames, len(raw) - pos)


@dataclass(slots=True)
class Segment:
    src_port: int
    dst_port: int
    flags: int
    seq: int
    payload: bytes


def tcp_segments(pcap: PcapFile) -> Iterator[Segment]:
    """TCP over IPv4 over Ethernet (what tcpdump writes for Linux loopback)."""
    for _ts, _orig, f in pcap.frames:
        assert f[12:14] == b"\x08\x00", "not IPv4"
        assert f[23] == 6, "not TCP"
        ihl = (f[14] & 0x0F) * 4
        total = struct.unpack_from(">H", f, 16)[0]
        t = 14 + ihl
        sport, dport, seq = struct.unpack_from(">HHI", f, t)
        off = (f[t + 12] >> 4) * 4
        yield Segment(sport, dport, f[t + 13], seq, f[t + off:14 + total])


SYN, FIN, RST = 0x02, 0x01, 0x04
