"""Highest rate `kwsniff live` decodes without kernel drops: tcpreplay onto a veth pair.

Not a test (pytest does not collect it; ``test_live_replay.py`` runs one short replay
through it). Run as root, with tcpreplay installed (``apt-get install tcpreplay``):

    .venv/bin/python tests/live/bench_live_replay.py --rates 25000,50000,100000
    .venv/bin/python tests/live/bench_live_replay.py --pcap pcaps/x.pcap --ports 19092 \\
        --packets 0 --rates 2000

The first ``--packets`` packets of ``--pcap`` (default: 300,000 of the chatty benchmark
capture, ``benchmarks/data/chatty.pcap``) are written to a temporary pcap and decoded
from that file once (the reference: exchanges by status, problems, gap bytes). Then,
per rate, the script

1. creates a network namespace of its own (``kwsreplay-<pid>``) holding a veth pair
   (``rp0`` -> ``rp1``, MTU 65535) and its own ``lo``, all up;
2. starts ``kwsniff live -i rp1 -q -p PORTS`` (plus ``--live-args``) in it and waits
   for its banner;
3. replays the slice onto ``rp0`` with ``tcpreplay --pps=RATE`` (``max`` for
   ``--topspeed``). The frames reach ``rp1`` addressed to another host (their
   Ethernet addresses are the capture's), so the capture tap sees them and the IP
   layer drops them: no socket answers, no RST joins the traffic;
4. waits until kwsniff's CPU time stops growing (it has drained the kernel ring),
   stops it with SIGINT and reads its end-of-capture summary;
5. deletes the namespace (always: also on errors, Ctrl-C and SIGTERM; every child
   has a timeout).

One JSON line per rate: the rate tcpreplay reached, packets seen, kernel drops
(libpcap's ``ps_drop``), exchanges and their statuses against the file's, problems,
gap bytes, kwsniff's CPU seconds, the load average, and ``ok`` (no drop and the same
counts as the file); ``--runs N`` replays each rate N times. The last line gives the
highest rate whose every run was ``ok``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_PCAP = ROOT / "benchmarks" / "data" / "chatty.pcap"
DEFAULT_PORTS = "39092-39094"
VETH_TX = "rp0"
VETH_RX = "rp1"
STEP_TIMEOUT = 30.0          # namespace set-up commands, kwsniff start and stop
IDLE_SECONDS = 0.6           # kwsniff idle this long after the replay: the ring is drained
DRAIN_LIMIT = 300.0          # at most this long waiting for kwsniff to catch up


class ReplayError(RuntimeError):
    """The measurement could not run (tool missing, namespace failure, kwsniff failed)."""


def missing_requirements() -> str | None:
    """None when this process can run a replay, else why not (one line)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs, capture)"
    for tool, package in (("tcpreplay", "tcpreplay"), ("ip", "iproute2")):
        if shutil.which(tool) is None:
            return f"{tool} is missing (apt-get install {package})"
    return None


def parse_ports(text: str) -> list[int]:
    ports: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        ports.extend(range(int(low), int(high or low) + 1))
    return ports


def slice_pcap(src: Path, dst: Path, count: int) -> int:
    """Copy the first ``count`` packets (0: all) of the classic pcap ``src``; return how many."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        header = fin.read(24)
        if len(header) < 24:
            raise ReplayError(f"{src}: not a pcap file")
        magic = header[:4]
        if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
            rec = struct.Struct("<IIII")
        elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
            rec = struct.Struct(">IIII")
        else:
            raise ReplayError(f"{src}: not a classic pcap file (pcapng is not sliced here)")
        fout.write(header)
        n = 0
        while not count or n < count:
            head = fin.read(16)
            if len(head) < 16:
                break
            caplen = rec.unpack(head)[2]
            body = fin.read(caplen)
            if len(body) < caplen:
                break
            fout.write(head)
            fout.write(body)
            n += 1
    return n


def file_reference(pcap: Path, ports: list[int]) -> dict[str, Any]:
    """What decoding ``pcap`` from the file gives (the options live mode uses)."""
    from kwsniff.capture import open_capture
    from kwsniff.commands.live import _engine_options
    from kwsniff.engine import Engine
    from kwsniff.output.pipeline import Selection, run_counters

    args = argparse.Namespace(no_detect=False, timeout=60.0, tls_keylog=None)
    engine = Engine(_engine_options(args, tuple(ports)))
    selection = Selection(None, None)
    with open_capture(str(pcap)) as src:
        for _ in selection(engine.run(src)):
            pass
    counters = run_counters(engine.summary, (), selection.problems)
    return {"packets": counters["packets"], "exchanges": counters["exchanges"],
            **_statuses(engine.summary.exchanges),
            "problems": counters["problems"], "gap_bytes": counters["gap_bytes"]}


def _statuses(exchanges: dict[str, int]) -> dict[str, int]:
    from kwsniff.kafka.model import ORPHAN_RESPONSE, PAIRED, UNANSWERED

    return {"paired": exchanges.get(PAIRED, 0), "unanswered": exchanges.get(UNANSWERED, 0),
            "orphans": exchanges.get(ORPHAN_RESPONSE, 0)}


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=STEP_TIMEOUT,
                          check=False)
    if done.returncode != 0:
        raise ReplayError(f"{' '.join(cmd)}: {done.stderr.strip() or done.returncode}")


class Namespace:
    """A network namespace with a veth pair, deleted on exit (context manager)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> Namespace:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True,
                       timeout=STEP_TIMEOUT, check=False)
        _run(["ip", "netns", "add", self.name])
        try:
            ns = ["ip", "-n", self.name]
            _run(ns + ["link", "add", VETH_TX, "type", "veth", "peer", "name", VETH_RX])
            for dev in (VETH_TX, VETH_RX):
                _run(ns + ["link", "set", dev, "mtu", "65535"])
                _run(ns + ["link", "set", dev, "up"])
            _run(ns + ["link", "set", "lo", "up"])
        except BaseException:
            self.delete()
            raise
        return self

    def exec(self, cmd: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *cmd]

    def delete(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True,
                       timeout=STEP_TIMEOUT, check=False)

    def __exit__(self, *exc: object) -> None:
        self.delete()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (0.0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_idle(pid: int) -> None:
    """Return once ``pid`` used no CPU for IDLE_SECONDS (bounded by DRAIN_LIMIT)."""
    give_up = time.monotonic() + DRAIN_LIMIT
    last = _cpu_seconds(pid)
    while time.monotonic() < give_up:
        time.sleep(IDLE_SECONDS)
        now = _cpu_seconds(pid)
        if now - last < 0.02:
            return
        last = now


def _tcpreplay(ns: Namespace, pcap: Path, rate: str, timeout: float) -> dict[str, Any]:
    cmd = ["tcpreplay", "-i", VETH_TX, "-q"]
    cmd += ["--topspeed"] if rate == "max" else [f"--pps={rate}"]
    done = subprocess.run(ns.exec(cmd + [str(pcap)]), capture_output=True, text=True,
                          timeout=timeout, check=False)
    out = done.stdout + done.stderr
    if done.returncode != 0:
        raise ReplayError(f"tcpreplay failed ({done.returncode}): {out.strip()[-500:]}")
    sent = re.search(r"Actual: (\d+) packets .*? in ([\d.]+) seconds", out)
    pps = re.search(r"Rated: .*?, ([\d.]+) pps", out)
    failed = re.search(r"Failed packets:\s+(\d+)", out)
    if not sent:
        raise ReplayError(f"unexpected tcpreplay output: {out.strip()[-500:]}")
    return {"sent": int(sent.group(1)), "send_s": float(sent.group(2)),
            "send_pps": round(float(pps.group(1))) if pps else None,
            "send_failed": int(failed.group(1)) if failed else 0}


_SEEN = re.compile(r"(\d+) packets seen, (\d+) dropped by the kernel, (\d+) dropped by the "
                   r"interface")
_EXCH = re.compile(r"^(\d+) exchanges? \(\d+ shown\) in \d+ Kafka connections?: (\d+) paired, "
                   r"\d+ unpaired \((\d+) unanswered, (\d+) orphan responses\).*?; (\d+) "
                   r"problems, \d+ bytes skipped, (\d+) bytes lost in gaps", re.MULTILINE)


def replay_once(pcap: Path, ports: list[int], rate: str, live_args: list[str],
                ns_name: str, tree: Path = ROOT) -> dict[str, Any]:
    """One replay at ``rate`` (packets/s or ``max``) into ``kwsniff live`` (of the
    source tree ``tree``); its counters."""
    cmd = [sys.executable, "-m", "kwsniff", "live", "-i", VETH_RX, "-q"]
    for port in ports:
        cmd += ["-p", str(port)]
    cmd += live_args
    env = dict(os.environ, PYTHONPATH=str(tree))
    load_before = os.getloadavg()
    with Namespace(ns_name) as ns:
        proc = subprocess.Popen(ns.exec(cmd), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=tree)
        try:
            assert proc.stderr is not None
            banner = proc.stderr.readline()
            if "capturing on" not in banner:
                proc.wait(timeout=STEP_TIMEOUT)
                raise ReplayError(f"kwsniff live did not start: {banner}{proc.stderr.read()}")
            time.sleep(0.3)
            cpu0 = _cpu_seconds(proc.pid)
            packets = sum(1 for _ in _records(pcap))
            limit = 60.0 + (packets / float(rate) * 3 if rate != "max" else 60.0)
            sent = _tcpreplay(ns, pcap, rate, limit)
            _wait_idle(proc.pid)
            cpu = _cpu_seconds(proc.pid) - cpu0
            load_after = os.getloadavg()
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=STEP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate(timeout=STEP_TIMEOUT)
                raise ReplayError("kwsniff live did not stop within "
                                  f"{STEP_TIMEOUT:g} s of SIGINT") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=STEP_TIMEOUT)
    seen = _SEEN.search(err)
    exch = _EXCH.search(err)
    if not seen or not exch:
        raise ReplayError(f"unexpected kwsniff live output (status {proc.returncode}): {err}")
    paired, unanswered, orphans = (int(exch.group(i)) for i in (2, 3, 4))
    return {"rate": rate, **sent, "seen": int(seen.group(1)), "kernel_drops": int(seen.group(2)),
            "if_drops": int(seen.group(3)), "exchanges": int(exch.group(1)), "paired": paired,
            "unanswered": unanswered, "orphans": orphans, "problems": int(exch.group(5)),
            "gap_bytes": int(exch.group(6)), "kwsniff_cpu_s": round(cpu, 2),
            "load_avg_1m": [round(load_before[0], 2), round(load_after[0], 2)]}


def _records(pcap: Path) -> Iterator[int]:
    with open(pcap, "rb") as f:
        header = f.read(24)
        rec = struct.Struct("<IIII" if header[:1] in (b"\xd4", b"\x4d") else ">IIII")
        while True:
            head = f.read(16)
            if len(head) < 16:
                return
            caplen = rec.unpack(head)[2]
            f.seek(caplen, 1)
            yield caplen


COMPARED = ("exchanges", "paired", "unanswered", "orphans", "problems", "gap_bytes")


def verdict(result: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    """Add ``expected`` and ``ok`` (no kernel drop, every packet seen, the file's counts)."""
    result["expected"] = {k: reference[k] for k in COMPARED}
    result["ok"] = (result["kernel_drops"] == 0 and result["if_drops"] == 0
                    and result["seen"] == reference["packets"] == result["sent"]
                    and all(result[k] == reference[k] for k in COMPARED))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pcap", default=str(DEFAULT_PCAP), help="classic pcap to replay")
    ap.add_argument("--packets", type=int, default=300_000,
                    help="replay the first N packets (0: all; default 300000)")
    ap.add_argument("--ports", default=DEFAULT_PORTS, help="Kafka ports, e.g. 39092-39094")
    ap.add_argument("--rates", default="25000,50000,100000",
                    help="packets/s to replay at, comma-separated (max: --topspeed)")
    ap.add_argument("--live-args", default="",
                    help='extra arguments of kwsniff live, e.g. "-B 4"')
    ap.add_argument("--runs", type=int, default=1,
                    help="replays per rate (the machine's load varies; default 1)")
    ap.add_argument("--tree", action="append", default=[],
                    help="kwsniff source tree to run (repeatable: each rate runs every "
                         "tree in turn, for comparisons; default this one)")
    args = ap.parse_args(argv)
    trees = [Path(t).resolve() for t in args.tree] or [ROOT]
    why = missing_requirements()
    if why:
        print(f"bench_live_replay: {why}", file=sys.stderr)
        return 2
    if not Path(args.pcap).is_file():
        hint = " (build it: benchmarks/captures.py --only chatty)" \
            if Path(args.pcap) == DEFAULT_PCAP else ""
        print(f"bench_live_replay: no capture {args.pcap}{hint}", file=sys.stderr)
        return 2
    ports = parse_ports(args.ports)
    ns_name = f"kwsreplay-{os.getpid()}"

    def _terminate(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt   # unwinds through Namespace.__exit__

    signal.signal(signal.SIGTERM, _terminate)
    with tempfile.TemporaryDirectory(prefix="kwsreplay-") as tmp:
        pcap = Path(tmp) / "slice.pcap"
        n = slice_pcap(Path(args.pcap), pcap, args.packets)
        reference = file_reference(pcap, ports)
        print(json.dumps({"file": args.pcap, "packets": n, "reference": reference}), flush=True)
        failed: dict[str, set[str]] = {str(t): set() for t in trees}
        passed: dict[str, set[str]] = {str(t): set() for t in trees}
        for rate in [r.strip() for r in args.rates.split(",")]:
            for _ in range(args.runs):
                for tree in trees:
                    result = replay_once(pcap, ports, rate, args.live_args.split(),
                                         ns_name, tree)
                    if len(trees) > 1:
                        result["tree"] = str(tree)
                    print(json.dumps(verdict(result, reference)), flush=True)
                    (passed if result["ok"] else failed)[str(tree)].add(rate)
        for tree in trees:
            clean = [r for r in passed[str(tree)] - failed[str(tree)] if r != "max"]
            print(json.dumps({"tree": str(tree), "runs_per_rate": args.runs,
                              "highest_rate_ok_every_run": max(map(int, clean), default=None)}),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
