#!/usr/bin/env python3
"""A large capture of real Kafka traffic for the TUI benchmark (not committed).

Replicates the packets of sample captures from ``pcaps/`` (recorded from real clients
and brokers) many times: copy ``k`` gets its own loopback-like address ``10.a.b.c``
(both ends, as in the original loopback capture), its timestamps shifted by
``k * spacing`` seconds, and the copies are merged in time order, so thousands of
connections overlap like a busy network. IPv4 and TCP checksums are fixed for the new
addresses. Sequence numbers are kept (each copy is a distinct connection by address).

    .venv/bin/python benchmarks/tui_capture.py --exchanges 100000
    .venv/bin/python benchmarks/tui_capture.py --exchanges 1000000 --out benchmarks/data/x.pcap

Prints the path, packets and the number of Kafka exchanges of one copy times copies.
"""

from __future__ import annotations

import argparse
import heapq
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kwsniff.capture import open_capture  # noqa: E402
from kwsniff.capture.writer import PcapWriter  # noqa: E402
from kwsniff.engine import Engine  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
SOURCES = ("pcaps/rdkafka-acks.pcap", "pcaps/rdkafka-consumer-group.pcap",
           "pcaps/rdkafka-produce-codecs.pcap", "pcaps/tansu-admin.pcap",
           "pcaps/kafka-python-0.11.pcap", "pcaps/rdkafka-idempotent-txn.pcap")
ETH = 14


def _fold(total: int) -> int:
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def _adjust(checksum: int, old: bytes, new: bytes) -> int:
    """RFC 1624 incremental checksum update for replaced 16-bit words."""
    total = (~checksum) & 0xFFFF
    for i in range(0, len(old), 2):
        total += (~int.from_bytes(old[i:i + 2], "big")) & 0xFFFF
        total += int.from_bytes(new[i:i + 2], "big")
    return (~_fold(total)) & 0xFFFF


def _rewrite(data: bytes, addr: bytes) -> bytes:
    """The packet with both IPv4 addresses replaced by ``addr``; other packets unchanged."""
    if len(data) < ETH + 20 or data[12:14] != b"\x08\x00" or data[ETH] >> 4 != 4:
        return data
    ihl = (data[ETH] & 0x0F) * 4
    buf = bytearray(data)
    old = bytes(buf[ETH + 12:ETH + 20])
    new = addr + addr
    buf[ETH + 12:ETH + 20] = new
    ip_sum = struct.unpack_from("!H", buf, ETH + 10)[0]
    struct.pack_into("!H", buf, ETH + 10, _adjust(ip_sum, old, new))
    tcp = ETH + ihl
    if buf[ETH + 9] == 6 and len(buf) >= tcp + 18:
        tcp_sum = struct.unpack_from("!H", buf, tcp + 16)[0]
        struct.pack_into("!H", buf, tcp + 16, _adjust(tcp_sum, old, new))
    return bytes(buf)


def _load(path: str) -> tuple[list[tuple[float, bytes]], int]:
    with open_capture(str(ROOT / path)) as src:
        packets = [(ts, bytes(data)) for _f, ts, _lt, data, _ol in src]
    engine = Engine()
    with open_capture(str(ROOT / path)) as src:
        exchanges = sum(1 for _ in engine.run(src))
    t0 = packets[0][0]
    return [(ts - t0, data) for ts, data in packets], exchanges


def _copy(packets: list[tuple[float, bytes]], k: int, start: float) -> Iterator[tuple[float, bytes]]:
    addr = bytes([10, (k >> 16) & 0xFF, (k >> 8) & 0xFF, (k & 0xFF) or 1])
    for ts, data in packets:
        yield start + ts, _rewrite(data, addr)


def generate(out: Path, exchanges: int, spacing: float = 0.02) -> tuple[int, int]:
    """Write ``out``; return ``(packets, exchanges)`` (exchanges as decoded per copy)."""
    sources = [_load(p) for p in SOURCES]
    copies: list[Iterator[tuple[float, bytes]]] = []
    total = 0
    k = 0
    base = 1_700_000_000.0
    while total < exchanges:
        packets, n = sources[k % len(sources)]
        copies.append(_copy(packets, k + 1, base + k * spacing))
        total += n
        k += 1
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    written = 0
    with PcapWriter(tmp) as w:
        for ts, data in heapq.merge(*copies, key=lambda p: p[0]):
            w.write(ts, data)
            written += 1
    tmp.replace(out)
    return written, total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exchanges", type=int, default=100_000)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--spacing", type=float, default=0.02,
                    help="seconds between the starts of two copies")
    args = ap.parse_args()
    out = args.out or DATA / f"tui-{args.exchanges}.pcap"
    packets, total = generate(out, args.exchanges, args.spacing)
    print(f"{out}: {packets} packets, {total} exchanges")
    return 0


if __name__ == "__main__":
    sys.exit(main())
