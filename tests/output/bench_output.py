#!/usr/bin/env python3
"""Speed of the output layer on real traffic: summary lines, -V trees, export, stats.

    .venv/bin/python tests/output/bench_output.py              # 200 copies of pcaps/*
    .venv/bin/python tests/output/bench_output.py --copies 50 --no-tshark

The benchmark capture is the sample captures of pcaps/ (real clients and brokers)
replicated ``--copies`` times, each copy moved to its own 127.x.y.1 address and shifted
in time, written to /tmp. Each view runs in-process, output to /dev/null; "engine only"
is the decoding cost without any output, so the difference is the output layer's.
tshark (summary and -V) is timed on the same file for scale, when installed.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kwsniff.capture import open_capture  # noqa: E402
from kwsniff.capture.writer import PcapWriter  # noqa: E402


def build_capture(copies: int, out: Path) -> tuple[Path, list[int]]:
    pcaps = sorted((ROOT / "pcaps").glob("*.pcap"))
    ports: set[int] = set()
    packets: list[tuple[float, bytes]] = []
    start = None
    for pcap in pcaps:
        manifest = pcap.with_suffix(".json")
        if manifest.exists():
            ports.update(json.loads(manifest.read_text())["capture"]["ports"])
        with open_capture(str(pcap)) as src:
            for _, ts, linktype, data, _ in src:
                if linktype != 1:
                    continue
                start = ts if start is None else start
                packets.append((ts, bytes(data)))
    if not packets:
        raise SystemExit("no Ethernet sample captures in pcaps/")
    t0 = min(ts for ts, _ in packets)
    span = max(ts for ts, _ in packets) - t0 + 0.01
    with PcapWriter(out) as writer:
        for k in range(copies):
            ip = bytes([127, 1 + (k >> 8), k & 255, 1])
            for ts, data in packets:
                frame = bytearray(data)
                if frame[12:14] == b"\x08\x00":          # IPv4: move both ends
                    frame[26:30] = ip
                    frame[30:34] = ip
                writer.write(ts + k * span, frame)
    return out, sorted(ports)


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(label: str, fn, packets: int, exchanges: int) -> float:
    """Run ``fn``; print wall and CPU time (CPU time is what to compare on a busy host)."""
    t, c = time.perf_counter(), _cpu()
    fn()
    dt, dc = time.perf_counter() - t, _cpu() - c
    print(f"{label:<40} wall {dt:7.2f} s  cpu {dc:7.2f} s  {packets / dc:9.0f} packets/s  "
          f"{dc / exchanges * 1e6:7.0f} µs/exchange")
    return dc


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=200)
    ap.add_argument("--no-tshark", action="store_true")
    args = ap.parse_args()
    path, ports = build_capture(args.copies, Path(f"/tmp/kwsniff-bench-output-{args.copies}.pcap"))
    port_args = [a for p in ports for a in ("-p", str(p))]

    from kwsniff.cli import main as cli
    from kwsniff.engine import Engine, EngineOptions

    with open_capture(str(path)) as src:
        n_packets = sum(1 for _ in src)
    eng = Engine(EngineOptions(ports=tuple(ports)))
    with open_capture(str(path)) as src:
        n_ex = sum(1 for _ in eng.run(src))
    print(f"capture {path}: {n_packets} packets, {n_ex} exchanges, "
          f"{path.stat().st_size / 1e6:.1f} MB")

    def engine_only() -> None:
        e = Engine(EngineOptions(ports=tuple(ports)))
        with open_capture(str(path)) as s:
            for _ in e.run(s):
                pass

    def run(argv: list[str]) -> None:
        saved = sys.stdout, sys.stderr
        with open("/dev/null", "w") as null:
            sys.stdout = sys.stderr = null
            try:
                cli(argv)
            finally:
                sys.stdout, sys.stderr = saved

    timed("engine only (no output)", engine_only, n_packets, n_ex)
    timed("decode (summary lines)", lambda: run(["decode", str(path), *port_args]),
          n_packets, n_ex)
    timed("decode -Y 'error or latency_ms > 100'",
          lambda: run(["decode", str(path), *port_args, "-Y", "error or latency_ms > 100"]),
          n_packets, n_ex)
    timed("decode -V", lambda: run(["decode", str(path), *port_args, "-V"]), n_packets, n_ex)
    timed("decode -x", lambda: run(["decode", str(path), *port_args, "-x"]), n_packets, n_ex)
    timed("export", lambda: run(["export", str(path), *port_args, "-o", "/dev/null"]),
          n_packets, n_ex)
    timed("export --records", lambda: run(["export", str(path), *port_args, "-o", "/dev/null",
                                           "--records"]), n_packets, n_ex)
    timed("stats", lambda: run(["stats", str(path), *port_args]), n_packets, n_ex)
    if not args.no_tshark and shutil.which("tshark"):
        decode_as = [a for p in ports for a in ("-d", f"tcp.port=={p},kafka")]
        for label, extra in (("tshark (summary)", []), ("tshark -V", ["-V"])):
            timed(label, lambda extra=extra: subprocess.run(
                ["tshark", "-n", "-r", str(path), *decode_as, "-Y", "kafka", *extra],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False),
                n_packets, n_ex)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
