"""Measure packet loss of live-capture backends at high packet rates on loopback.

Not a test (pytest does not collect it). Run as root:

    .venv/bin/python tests/live/bench_loss.py --rates 50000,100000,200000,max

For every backend and rate it starts a capture process (filter ``udp dst port P``),
then a generator process that sends ``--count`` UDP datagrams of ``--size`` bytes to
127.0.0.1:P at the given rate (``max``: as fast as one Python process can), waits for
the capture to settle, stops it with SIGINT and prints what was sent, what the backend
delivered (as packet tuples, like kwsniff's sources) and the kernel's drop counter.

Backends: ``ctypes`` (kwsniff.capture.live, default TPACKET_V3 batching),
``ctypes-immediate`` (immediate mode), ``pcapy`` / ``pcapy-batch`` (pcapy-ng's
``dispatch`` and ``next_batch``; needs ``--pcapy-python`` pointing at an interpreter
with pcapy-ng installed) and ``scapy`` (scapy's ``sniff`` with ``store=False``).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


# -- capture side (runs in a child process) ----------------------------------------------

def _wait_for_go(deferred: bool) -> float:
    """In deferred mode block until SIGUSR1 (everything sent); return the start time."""
    if deferred:
        signal.sigwait({signal.SIGUSR1})
    return time.perf_counter()


def capture_ctypes(port: int, buffer_mib: int, immediate: bool,
                   deferred: bool) -> dict[str, float]:
    sys.path.insert(0, str(ROOT))
    from kwsniff.capture.live import open_live

    if deferred:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    src = open_live("lo", bpf_filter=f"udp dst port {port}", buffer_mib=buffer_mib,
                    immediate=immediate)
    signal.signal(signal.SIGINT, lambda *_: src.stop())
    print("ready", flush=True)
    t0 = _wait_for_go(deferred)
    t_last = t0
    seen = 0
    nbytes = 0
    for batch in src.batches(0.1):
        for pkt in batch:
            seen += 1
            nbytes += len(pkt[3])
        if batch:
            t_last = time.perf_counter()
    st = src.stats()
    src.close()
    return {"seen": seen, "kernel_drop": st.dropped, "bytes": nbytes,
            "drain_pps": seen / (t_last - t0) if deferred and t_last > t0 else 0}


def capture_pcapy(port: int, buffer_mib: int, batch: bool, deferred: bool) -> dict[str, float]:
    import struct

    import pcapy  # type: ignore[import-not-found]

    if deferred:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})

    cap = pcapy.create("lo")
    cap.set_snaplen(262144)
    cap.set_promisc(False)
    cap.set_timeout(50)
    cap.set_buffer_size(buffer_mib * 1024 * 1024)
    cap.activate()
    cap.setfilter(f"udp dst port {port}")
    # Non-blocking + select: a blocking read never returns on an idle TPACKET_V3 ring.
    cap.setnonblock(1)
    fd = cap.getfd()
    stop = [False]
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__(0, True))
    print("ready", flush=True)
    t0 = _wait_for_go(deferred)
    t_last = t0
    out: list[tuple[int, float, int, bytes, int]] = []
    seen = 0
    nbytes = 0
    if batch:
        meta_rec = struct.Struct("=IIII")
        while not stop[0]:
            select.select([fd], [], [], 0.1)
            pkts, meta = cap.next_batch(4096)
            if meta:
                t_last = time.perf_counter()
            out = []
            for sec, usec, off, caplen in meta_rec.iter_unpack(meta):
                seen += 1
                out.append((seen, sec + usec * 1e-6, 1, pkts[off:off + caplen], caplen))
                nbytes += caplen
    else:
        counter = [0, 0]

        def on_packet(hdr: object, data: bytes) -> None:
            counter[0] += 1
            sec, usec = hdr.getts()  # type: ignore[attr-defined]
            out.append((counter[0], sec + usec * 1e-6, 1, data, hdr.getlen()))  # type: ignore[attr-defined]
            counter[1] += len(data)

        while not stop[0]:
            select.select([fd], [], [], 0.1)
            if cap.dispatch(4096, on_packet) > 0:
                t_last = time.perf_counter()
            out.clear()
        seen, nbytes = counter
    _recv, drop, _ifdrop = cap.stats()
    return {"seen": seen, "kernel_drop": drop, "bytes": nbytes,
            "drain_pps": seen / (t_last - t0) if deferred and t_last > t0 else 0}


def capture_scapy(port: int, buffer_mib: int, seconds: float | None) -> dict[str, int]:
    from scapy.all import conf, sniff  # type: ignore[import-untyped]

    conf.bufsize = buffer_mib * 1024 * 1024
    counter = [0, 0]

    def on_packet(pkt: object) -> None:
        counter[0] += 1
        counter[1] += len(bytes(pkt))  # type: ignore[call-overload]

    print("ready", flush=True)
    # scapy may not get to a KeyboardInterrupt while it dissects a backlog: it stops
    # by itself after ``seconds`` (SIGINT ends it earlier when it does).
    try:
        sniff(iface="lo", filter=f"udp dst port {port}", prn=on_packet, store=False,
              timeout=seconds)
    except KeyboardInterrupt:
        pass
    return {"seen": counter[0], "kernel_drop": -1, "bytes": counter[1]}


# -- generator side ----------------------------------------------------------------------

def generate(port: int, count: int, size: int, rate: float | None) -> dict[str, float]:
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", port))          # no ICMP port-unreachable for each datagram
    sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"k" * size
    dest = ("127.0.0.1", port)
    send = tx.sendto
    burst = 64
    start = time.perf_counter()
    sent = 0
    while sent < count:
        n = min(burst, count - sent)
        for _ in range(n):
            send(payload, dest)
        sent += n
        if rate:
            due = start + sent / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
    elapsed = time.perf_counter() - start
    return {"sent": sent, "seconds": elapsed, "rate": sent / elapsed}


# -- driver ------------------------------------------------------------------------------

def run_one(backend: str, rate: str, args: argparse.Namespace, port: int) -> dict[str, object]:
    python = args.pcapy_python if backend.startswith("pcapy") else sys.executable
    budget = args.count / (float(rate) if rate != "max" else 100000.0) + args.settle + 3.0
    cap = subprocess.Popen([python, __file__, "--capture", backend, "--port", str(port),
                            "--buffer-mib", str(args.buffer_mib), "--seconds", str(budget)]
                           + (["--deferred"] if args.deferred else []),
                           stdout=subprocess.PIPE, text=True)
    assert cap.stdout is not None
    line = cap.stdout.readline().strip()
    if line != "ready":
        cap.kill()
        raise SystemExit(f"{backend}: capture did not start ({line!r})")
    time.sleep(0.3)
    gen = subprocess.run([sys.executable, __file__, "--generate", "--port", str(port),
                          "--count", str(args.count), "--size", str(args.size),
                          "--rate", rate], capture_output=True, text=True, check=True)
    sent = json.loads(gen.stdout)
    if args.deferred:
        cap.send_signal(signal.SIGUSR1)
    time.sleep(args.settle)
    if backend == "scapy":
        out, _ = cap.communicate(timeout=budget + 120)     # stops by itself
    else:
        cap.send_signal(signal.SIGINT)
        out, _ = cap.communicate(timeout=120)
    got = json.loads(out.strip().splitlines()[-1])
    lost = sent["sent"] - got["seen"]
    return {"backend": backend, "target": rate, "achieved_pps": round(sent["rate"]),
            "sent": sent["sent"], "seen": got["seen"], "lost": lost,
            "loss_pct": round(100.0 * lost / sent["sent"], 3), "kernel_drop": got["kernel_drop"],
            **({"drain_pps": round(got["drain_pps"])} if args.deferred else {})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="ctypes,ctypes-immediate,pcapy,pcapy-batch,scapy")
    ap.add_argument("--rates", default="50000,100000,200000,max")
    ap.add_argument("--count", type=int, default=200000)
    ap.add_argument("--size", type=int, default=100, help="UDP payload bytes")
    ap.add_argument("--buffer-mib", type=int, default=64)
    ap.add_argument("--settle", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--deferred", action="store_true",
                    help="read nothing until everything is sent, then time the drain "
                         "(the backend's own packets/s; needs a buffer holding all packets)")
    ap.add_argument("--pcapy-python", default=os.environ.get("PCAPY_PYTHON", sys.executable))
    ap.add_argument("--port", type=int, default=47390)
    ap.add_argument("--capture", help=argparse.SUPPRESS)
    ap.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rate", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.capture:
        kind = args.capture
        if kind in ("ctypes", "ctypes-immediate"):
            res = capture_ctypes(args.port, args.buffer_mib, kind == "ctypes-immediate",
                                 args.deferred)
        elif kind in ("pcapy", "pcapy-batch"):
            res = capture_pcapy(args.port, args.buffer_mib, kind == "pcapy-batch", args.deferred)
        elif kind == "scapy":
            res = capture_scapy(args.port, args.buffer_mib, args.seconds)
        else:
            raise SystemExit(f"unknown backend {kind}")
        print(json.dumps(res), flush=True)
        return 0
    if args.generate:
        rate = None if args.rate == "max" else float(args.rate)
        print(json.dumps(generate(args.port, args.count, args.size, rate)))
        return 0

    port = args.port
    for _ in range(args.repeat):
        for rate in args.rates.split(","):
            for backend in args.backends.split(","):
                port += 1
                print(json.dumps(run_one(backend, rate, args, port)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
