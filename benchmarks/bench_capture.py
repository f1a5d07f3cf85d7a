#!/usr/bin/env python3
"""Capture and TCP layer speed: packets/s for iterating, parsing and reassembling a large
capture, next to ``tshark -r FILE -T fields -e frame.number`` on the same file.

    .venv/bin/python benchmarks/bench_capture.py                 # 1M packets
    .venv/bin/python benchmarks/bench_capture.py --packets 200000 --no-tshark
    .venv/bin/python benchmarks/bench_capture.py --profile       # cProfile of reassembly

Each measurement is the best of ``--repeat`` runs; packets/s are per CPU second (user +
system, tshark's included), which stays meaningful on a shared machine.

The capture is generated deterministically (fixed seed) under benchmarks/data/ (not
committed) on first use: Ethernet/IPv4/TCP, many interleaved connections to port 9092
carrying Kafka-framed requests and responses split at a 1448-byte MSS, with ACKs and a
few retransmissions and reordered segments. pcapng and gzip copies are written too.
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import os
import pstats
import random
import resource
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kwsniff.capture import open_capture  # noqa: E402
from kwsniff.capture.writer import PcapngWriter, PcapWriter  # noqa: E402
from kwsniff.tcp import PacketParser, iter_tcp_events  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
MSS = 1448
SEED = 20240917
ETH = bytes.fromhex("020000000002" "020000000001" "0800")
ETH_BACK = bytes.fromhex("020000000001" "020000000002" "0800")


def _packet(eth: bytes, src: bytes, dst: bytes, sport: int, dport: int, seq: int, ack: int,
            flags: int, payload: bytes) -> bytes:
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0x4000, 64, 6, 0, src, dst)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 0x50,
                      flags, 65535, 0, 0)
    return eth + ip + tcp + payload


class _Conn:
    def __init__(self, rng: random.Random, n: int) -> None:
        self.client = bytes([10, 0, (n >> 8) & 255, n & 255])
        self.server = bytes([10, 9, 0, 1])
        self.port = 30000 + n
        self.seq = [rng.getrandbits(32), rng.getrandbits(32)]   # client, server
        self.corr = 0
        self.client_id = f"bench-client-{n}".encode()

    def packet(self, side: int, flags: int, payload: bytes = b"", seq: int | None = None,
               ack: int | None = None) -> bytes:
        """A packet from the client (side 0) or the server (side 1)."""
        if side == 0:
            eth, src, dst, sport, dport = ETH, self.client, self.server, self.port, 9092
        else:
            eth, src, dst, sport, dport = ETH_BACK, self.server, self.client, 9092, self.port
        own = self.seq[side] if seq is None else seq
        return _packet(eth, src, dst, sport, dport, own,
                       self.seq[1 - side] if ack is None else ack, flags, payload)

    def control(self, side: int, flags: int) -> bytes:
        raw = self.packet(side, flags)
        self.seq[side] += 1 if flags & 0x03 else 0
        return raw


def _kafka(rng: random.Random, conn: _Conn, response: bool) -> bytes:
    conn.corr += not response
    if response:
        body = struct.pack("!i", conn.corr) + rng.randbytes(rng.choice((40, 120, 600, 2500, 9000)))
    else:
        api = rng.choice((0, 1, 3, 18))
        body = (struct.pack("!hhih", api, 9, conn.corr, len(conn.client_id)) + conn.client_id
                + rng.randbytes(rng.choice((30, 80, 400, 1200, 5000))))
    return struct.pack("!i", len(body)) + body


def generate(path: Path, packets: int) -> None:
    """Write the benchmark capture (pcap, plus .pcapng and .pcap.gz copies)."""
    rng = random.Random(SEED)
    DATA.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    ng_path = path.with_suffix(".pcapng")
    ng_tmp = ng_path.with_name(ng_path.name + ".tmp")
    conns = [_Conn(rng, n) for n in range(200)]
    ts = 1_700_000_000.0
    written = 0
    with PcapWriter(tmp) as w, PcapngWriter(ng_tmp) as ng:
        ng.add_interface(1)

        def put(raw: bytes) -> None:
            nonlocal ts, written
            ts += 0.000013
            w.write(ts, raw)
            ng.write(ts, raw)
            written += 1

        for conn in conns:
            put(conn.control(0, 0x02))
            put(conn.control(1, 0x12))
            put(conn.control(0, 0x10))
        while written < packets:
            conn = rng.choice(conns)
            for side in (0, 1):
                msg = _kafka(rng, conn, side == 1)
                start = conn.seq[side]
                offsets = list(range(0, len(msg), MSS))
                order = list(range(len(offsets)))
                if len(order) > 2 and rng.random() < 0.05:
                    order[1], order[2] = order[2], order[1]          # reordered
                arrived: set[int] = set()
                contiguous = 0
                for k, idx in enumerate(order):
                    off = offsets[idx]
                    raw = conn.packet(side, 0x18, msg[off:off + MSS], seq=start + off)
                    put(raw)
                    if rng.random() < 0.002:
                        put(raw)                                    # retransmitted
                    arrived.add(idx)
                    while contiguous in arrived:
                        contiguous += 1
                    if k % 2:
                        acked = min(len(msg), offsets[contiguous - 1] + MSS) if contiguous else 0
                        put(conn.packet(1 - side, 0x10, ack=start + acked))
                conn.seq[side] = (start + len(msg)) & 0xFFFFFFFF
                put(conn.packet(1 - side, 0x10))
        for conn in conns:
            put(conn.control(0, 0x11))
            put(conn.control(1, 0x11))
            put(conn.control(0, 0x10))
    tmp.rename(path)
    ng_tmp.rename(ng_path)
    with open(path, "rb") as f, gzip.open(path.with_suffix(".pcap.gz"), "wb", compresslevel=1) as g:
        shutil.copyfileobj(f, g, 1 << 20)


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its finished children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(label: str, fn, repeat: int) -> tuple[str, int, float, float]:
    """Best of ``repeat`` runs, as (label, packets, wall seconds, CPU seconds). The machine
    may be shared: CPU time is the fairer yardstick, the minimum the best estimate."""
    wall = cpu = float("inf")
    count = 0
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), _cpu()
        count = fn()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, _cpu() - start_cpu)
    return label, count, wall, cpu


def iterate(path: Path) -> int:
    n = 0
    with open_capture(path) as src:
        for _ in src:
            n += 1
    return n


def parse(path: Path) -> int:
    parser = PacketParser()
    p = parser.parse
    n = 0
    with open_capture(path) as src:
        for frame, ts, linktype, data, orig_len in src:
            p(frame, ts, linktype, data, orig_len)
            n += 1
    return n


def reassemble(path: Path) -> int:
    with open_capture(path) as src:
        stream = iter_tcp_events(src)
        for _ in stream:
            pass
        stats = stream.stats
    assert stats.gaps == 0, stats
    return stats.packets


def tshark(path: Path) -> int:
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout
    return out.count(b"\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (best is shown)")
    ap.add_argument("--profile", action="store_true", help="cProfile the reassembly run")
    args = ap.parse_args()
    path = DATA / f"kafka-{args.packets}.pcap"
    if not path.exists():
        print(f"generating {path} ...", file=sys.stderr)
        generate(path, args.packets)
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        reassemble(path)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
        return 0
    size = os.path.getsize(path)
    print(f"capture: {path.name} ({size / 1e6:.0f} MB)")
    rep = args.repeat
    rows = [
        _timed("iterate  pcap (mmap)", lambda: iterate(path), rep),
        _timed("iterate  pcapng (mmap)", lambda: iterate(path.with_suffix(".pcapng")), rep),
        _timed("iterate  pcap.gz (stream)", lambda: iterate(path.with_suffix(".pcap.gz")), rep),
        _timed("iterate + parse  pcap", lambda: parse(path), rep),
        _timed("iterate + parse + reassemble pcap", lambda: reassemble(path), rep),
    ]
    if not args.no_tshark and shutil.which("tshark"):
        rows.append(_timed("tshark -r F -T fields -e frame.number", lambda: tshark(path), 1))
    print(f"{'':38s} {'packets':>9s} {'wall s':>7s} {'CPU s':>7s} {'pkt/s (CPU)':>12s}")
    for label, count, wall, cpu in rows:
        print(f"{label:38s} {count:>9d} {wall:7.2f} {cpu:7.2f} {count / cpu:>12,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
