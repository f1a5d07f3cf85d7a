"""Highest packet rate `kwsniff live` decodes without kernel drops (loopback replay).

Not a test (pytest does not collect it). Run as root:

    .venv/bin/python tests/live/bench_live_decode.py --rates 5000,10000,20000,40000

A real capture (default: pcaps/rdkafka-consumer-group.pcap, a consumer group against a
3-broker mock cluster) is replayed onto ``lo`` through a packet socket, ``--repeat``
times per run, each repetition with fresh client ports (so every repetition is new
connections), at a paced packet rate. The IPv4 header checksum of every replayed packet
is made invalid on purpose so the kernel's IP layer drops them after the capture tap:
no socket sees them and no RST is sent. `kwsniff live -i lo -p <broker ports>` decodes
them as it would real traffic; afterwards the script reports what it sent, the packets
kwsniff saw, the kernel's drop counter and the exchanges decoded versus expected
(exchanges of one decode of the file times the repetitions).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _ip_checksum(header: bytes) -> int:
    total = sum(struct.unpack(f">{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def replay_frames(pcap: Path, broker_ports: set[int], repeat: int) -> list[bytes]:
    """The capture's Ethernet/IPv4/TCP frames, ``repeat`` times with new client ports."""
    from kwsniff.capture import open_capture

    with open_capture(str(pcap)) as src:
        packets = [bytes(p[3]) for p in src if p[2] == 1]
    frames: list[bytes] = []
    next_port = 20000
    for _ in range(repeat):
        mapping: dict[int, int] = {}
        for data in packets:
            if len(data) < 34 or data[12:14] != b"\x08\x00" or data[23] != 6:
                continue
            ihl = (data[14] & 15) * 4
            tcp = 14 + ihl
            sport, dport = struct.unpack_from(">HH", data, tcp)
            client_is_src = sport not in broker_ports
            old = sport if client_is_src else dport
            if old not in mapping:
                mapping[old] = next_port
                next_port = 20000 + (next_port - 20000 + 1) % 40000
            new = mapping[old]
            buf = bytearray(data)
            struct.pack_into(">H", buf, tcp if client_is_src else tcp + 2, new)
            struct.pack_into(">H", buf, 24, 0)
            good = _ip_checksum(bytes(buf[14:14 + ihl]))
            struct.pack_into(">H", buf, 24, good ^ 0x5A5A)     # invalid on purpose
            frames.append(bytes(buf))
    return frames


def send_paced(frames: list[bytes], rate: float | None) -> tuple[int, float]:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind(("lo", 0))
    send = sock.send
    start = time.perf_counter()
    burst = 32
    for i in range(0, len(frames), burst):
        for frame in frames[i:i + burst]:
            send(frame)
        if rate:
            delay = start + (i + burst) / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
    elapsed = time.perf_counter() - start
    sock.close()
    return len(frames), elapsed


def expected_exchanges(pcap: Path, ports: list[int]) -> int:
    from kwsniff.capture import open_capture
    from kwsniff.engine import Engine, EngineOptions

    with open_capture(str(pcap)) as src:
        return sum(1 for _ in Engine(EngineOptions(ports=tuple(ports))).run(src))


def run_one(frames: list[bytes], rate: float | None, ports: list[int], quiet: bool,
            buffer_mib: int) -> dict[str, object]:
    cmd = [sys.executable, "-m", "kwsniff", "live", "-i", "lo", "-B", str(buffer_mib)]
    for p in ports:
        cmd += ["-p", str(p)]
    if quiet:
        cmd.append("-q")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT)
    assert proc.stderr is not None
    banner = proc.stderr.readline()
    if "capturing on" not in banner:
        raise SystemExit(f"kwsniff live did not start: {banner}{proc.stderr.read()}")
    time.sleep(0.3)
    sent, elapsed = send_paced(frames, rate)
    # let it drain: wait until the process is idle (bounded)
    time.sleep(1.0)
    t_stop = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    proc.wait(timeout=600)
    drain = time.perf_counter() - t_stop
    seen = re.search(r"(\d+) packets seen, (\d+) dropped by the kernel", err)
    exch = re.search(r"\n(\d+) exchanges? \(", "\n" + err)
    if not seen or not exch:
        raise SystemExit(f"unexpected kwsniff output: {err}")
    return {"target_pps": rate or "max", "sent": sent, "send_pps": round(sent / elapsed),
            "seen": int(seen.group(1)), "kernel_drop": int(seen.group(2)),
            "exchanges": int(exch.group(1)), "stop_to_exit_s": round(drain, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pcap", default=str(ROOT / "pcaps" / "rdkafka-consumer-group.pcap"))
    ap.add_argument("--ports", default="19092,19093,19094")
    ap.add_argument("--rates", default="5000,10000,20000,40000")
    ap.add_argument("--repeat", type=int, default=200, help="replays of the capture per run")
    ap.add_argument("--buffer-mib", type=int, default=64)
    ap.add_argument("--print", action="store_true",
                    help="let kwsniff print summary lines (to /dev/null) instead of -q")
    args = ap.parse_args()
    ports = [int(p) for p in args.ports.split(",")]
    pcap = Path(args.pcap)
    per_copy = expected_exchanges(pcap, ports)
    frames = replay_frames(pcap, set(ports), args.repeat)
    for rate in args.rates.split(","):
        res = run_one(frames, None if rate == "max" else float(rate), ports,
                      not args.print, args.buffer_mib)
        res["expected_exchanges"] = per_copy * args.repeat
        print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
