"""Link/IP/TCP parsing and reassembly over arbitrary packets of every link type.

Input: repeated ``[selector][uint16 length][packet bytes]``; the selector picks the link
type (low bits) and whether the packet was cut by the snap length (bit 7).
Invariants: nothing raises; the stream events keep their contract
(:func:`fuzz.checks.check_tcp_events`); problems name a reason.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from fuzz import checks
from fuzz import seeds as _seeds
from kwsniff.capture import linktypes as lt
from kwsniff.tcp import TcpEventStream, TcpOptions

MAX_LEN = 16384
LINKTYPES = (lt.ETHERNET, lt.NULL, lt.RAW, lt.LOOP, lt.LINUX_SLL, lt.IPV4, lt.IPV6,
             lt.LINUX_SLL2, lt.RAW_DLT12, lt.RAW_DLT14, 147, 0xFFFF)
OPTIONS = TcpOptions(max_buffer=4096, max_total_buffer=16384, max_connections=8,
                     max_fragmented=4, max_problems=50)


def encode(packets: Iterable[tuple[int, bytes]]) -> bytes:
    out = bytearray()
    for linktype, data in packets:
        sel = LINKTYPES.index(linktype) if linktype in LINKTYPES else len(LINKTYPES) - 1
        out += bytes([sel]) + struct.pack(">H", len(data[:0xFFFF])) + data[:0xFFFF]
    return bytes(out)


def decode(data: bytes) -> list[tuple[int, float, int, bytes, int]]:
    pkts = []
    pos = 0
    while pos < len(data):
        sel = data[pos]
        n = int.from_bytes(data[pos + 1:pos + 3], "big")
        payload = data[pos + 3:pos + 3 + n]
        pos += 3 + n
        orig = len(payload) + (64 if sel & 0x80 else 0)
        pkts.append((len(pkts) + 1, 1_700_000_000.0 + len(pkts) * 0.001,
                     LINKTYPES[(sel & 0x7F) % len(LINKTYPES)], payload, orig))
    return pkts


def seeds() -> Iterable[bytes]:
    pkts = list(_seeds.packets(12))
    for i in range(0, len(pkts), 12):
        yield encode(pkts[i:i + 12])


def one_input(data: bytes) -> None:
    pkts = decode(data)
    stream = TcpEventStream(pkts, OPTIONS)
    events = list(stream)
    checks.check_tcp_events(events, len(pkts))
    stats = stream.stats
    checks.require(stats.packets == len(pkts), f"{stats.packets} packets counted of {len(pkts)}")
    checks.require(len(stats.problems) <= OPTIONS.max_problems, "problem log over its limit")
    checks.check_problems(stats.problems, "tcp")
