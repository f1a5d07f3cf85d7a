"""Benchmark: ``kwsniff analyze`` on a synthetic export of N exchanges (default 1 million).

The export is made from real exports of pcaps/ (``kwsniff export``), replicated and
perturbed: every copy is shifted in time (so the capture spans hours), gets its own
TCP streams and client ports, a client id variant and a jittered latency. It is written
under /tmp (never committed). The analyze run is a separate process; its wall time and
the peak resident memory of its whole process tree (Python driver, JVM, Python
workers; PSS and RSS sampled every 0.2 s from /proc) are printed with the machine's
load.

    .venv/bin/python tests/spark/bench_analyze.py [--exchanges 1000000] [--master local[2]]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def templates(workdir: Path) -> list[dict]:
    out = []
    for pcap in sorted((ROOT / "pcaps").glob("*.pcap")):
        target = workdir / f"{pcap.stem}.jsonl"
        subprocess.run([sys.executable, "-m", "kwsniff", "export", str(pcap), "-o", str(target),
                        "--no-summary"], check=True, capture_output=True)
        out.extend(json.loads(line) for line in target.read_text().splitlines())
    return sorted(out, key=lambda e: e["ts"])


def generate(path: Path, n: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        base = templates(Path(tmp))
    t0 = base[0]["ts"]
    span = base[-1]["ts"] - t0 + 1.0
    written = 0
    copy = 0
    with open(path, "w", encoding="utf-8") as fh:
        while written < n:
            shift = copy * span
            for ex in base:
                if written >= n:
                    break
                e = dict(ex)
                e["index"] = written + 1
                e["capture"] = "synthetic.pcap"
                e["stream"] = ex["stream"] + 1000 * copy
                host, _, port = ex["client"].rpartition(":")
                e["client"] = f"{host}:{(int(port) + copy) % 64511 + 1024}"
                if ex["client_id"] is not None:
                    e["client_id"] = f"{ex['client_id']}-{copy % 20}"
                e["ts"] = ex["ts"] + shift
                if ex["response_ts"] is not None:
                    e["response_ts"] = ex["response_ts"] + shift
                if ex["latency_ms"] is not None:
                    lat = round(ex["latency_ms"] * rng.uniform(0.5, 2.0), 6)
                    e["latency_ms"] = lat
                    e["response_ts"] = e["ts"] + lat / 1000.0
                fh.write(json.dumps(e, ensure_ascii=False, separators=(",", ":")))
                fh.write("\n")
                written += 1
            copy += 1


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, ()))
    return out


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _tree_memory(root: int, cpu: dict[int, float] | None = None) -> tuple[int, int]:
    """(RSS, PSS) bytes of ``root`` and all its descendants. PSS divides pages shared
    between processes (forked Python workers) among them, so its sum is what the tree
    really occupies; the RSS sum counts shared pages once per process. ``cpu`` collects
    the latest user+system CPU seconds seen per process."""
    rss = pss = 0
    for pid in _descendants(root):
        if cpu is not None:
            used = _cpu_seconds(pid)
            if used is not None:
                cpu[pid] = max(cpu.get(pid, 0.0), used)
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
        except (OSError, ValueError):
            pass
    return rss, pss


def measure(cmd: list[str]) -> tuple[int, float, int, int, float]:
    """Run ``cmd``; (exit code, seconds, peak tree RSS, peak tree PSS in bytes, CPU
    seconds of the tree as last sampled)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak_rss = peak_pss = 0
    cpu: dict[int, float] = {}
    done = threading.Event()

    def sample() -> None:
        nonlocal peak_rss, peak_pss
        while not done.is_set():
            rss, pss = _tree_memory(proc.pid, cpu)
            peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
            done.wait(0.2)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    done.set()
    sampler.join()
    elapsed = time.monotonic() - start
    if proc.returncode:
        sys.stderr.write(err)
    else:
        sys.stderr.write("".join(line + "\n" for line in err.splitlines()
                                 if line.startswith(("analyzed", "skipped"))))
    return proc.returncode, elapsed, peak_rss, peak_pss, sum(cpu.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=1_000_000)
    ap.add_argument("--export", default="/tmp/kwsniff-bench/synthetic.jsonl")
    ap.add_argument("--out", default="/tmp/kwsniff-bench/analysis")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default=None)
    ap.add_argument("--reuse", action="store_true", help="keep an existing export")
    args = ap.parse_args()
    export = Path(args.export)
    export.parent.mkdir(parents=True, exist_ok=True)
    if not (args.reuse and export.exists()):
        t = time.monotonic()
        generate(export, args.exchanges)
        print(f"generated {args.exchanges} exchanges, {export.stat().st_size / 2**20:.0f} MiB "
              f"in {time.monotonic() - t:.0f} s: {export}")
    cmd = [sys.executable, "-m", "kwsniff", "analyze", str(export), "--out", args.out,
           "--master", args.master, "--quiet"]
    if args.driver_memory:
        cmd += ["--driver-memory", args.driver_memory]
    load_before = os.getloadavg()
    code, seconds, rss, pss, cpu = measure(cmd)
    load_after = os.getloadavg()
    print(f"analyze: exit {code}, {seconds:.1f} s wall, {cpu:.0f} CPU s (user+system, "
          f"whole tree); peak memory of the process tree: "
          f"PSS {pss / 2**30:.2f} GiB (RSS sum {rss / 2**30:.2f} GiB); master {args.master}, "
          f"{os.cpu_count()} cores; "
          f"load average before {load_before[0]:.2f}/{load_before[1]:.2f}, "
          f"after {load_after[0]:.2f}/{load_after[1]:.2f} (1/5 min)")
    return code


if __name__ == "__main__":
    sys.exit(main())
