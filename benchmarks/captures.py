#!/usr/bin/env python3
"""Build the benchmark captures (bulk, chatty, mixed) from real Kafka software.

    .venv/bin/python benchmarks/captures.py              # build what is missing or stale
    .venv/bin/python benchmarks/captures.py --force      # rebuild all three
    .venv/bin/python benchmarks/captures.py --only chatty

Each capture is written to ``benchmarks/data/<name>.pcap`` with ``<name>.json`` beside
it (generator version, parameters, what the clients did, tcpdump counters). A capture is
rebuilt when it is missing or its parameters changed. Its content is deterministic
(seeded records, fixed clients, ports and counts); packet timing and segmentation come
from the real clients and the kernel, so two builds are alike, not byte-identical.

Needs root (a private network namespace via ``unshare --net`` and tcpdump), like
``tools/make_pcaps.py``, whose building blocks (``tools/pcapgen``) this reuses.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DATA = BENCH / "data"
for extra in (ROOT / "tools", BENCH, ROOT):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from pcapgen import netns  # noqa: E402

#: bump when a scenario changes in a way the parameters do not show
GENERATOR_VERSION = 2
NAMES = ("bulk", "chatty", "mixed")
#: what a finished capture must satisfy (the issues' definitions of the captures): size
#: in bytes, records produced, packets, and the average capture rate (file bytes per
#: second of capture, MB/s)
LIMITS: dict[str, dict[str, Any]] = {
    "bulk": {"min_bytes": 120_000_000, "max_bytes": 200_000_000, "min_records": 100_001},
    "chatty": {"min_packets": 1_000_000},
    "mixed": {"min_bytes": 120_000_000, "max_bytes": 200_000_000, "min_records": 30_000,
              "min_mb_per_s": 1.5, "max_mb_per_s": 4.0},
}


class CaptureBuildError(RuntimeError):
    """A benchmark capture could not be built."""


def scenario(name: str) -> ModuleType:
    if name == "bulk":
        from capgen import bulk as mod
    elif name == "chatty":
        from capgen import chatty as mod
    elif name == "mixed":
        from capgen import mixed as mod
    else:
        raise CaptureBuildError(f"unknown benchmark capture {name!r}")
    return mod


def paths(name: str, out: Path = DATA) -> tuple[Path, Path]:
    return out / f"{name}.pcap", out / f"{name}.json"


def wanted_identity(name: str) -> dict[str, Any]:
    mod = scenario(name)
    return {"generator_version": GENERATOR_VERSION, "name": name, "params": mod.PARAMS,
            "ports": mod.PORTS}


def load_facts(name: str, out: Path = DATA) -> dict[str, Any] | None:
    """The facts of an up-to-date capture, or None when it must be (re)built."""
    pcap, meta = paths(name, out)
    if not pcap.exists() or not meta.exists():
        return None
    try:
        facts = json.loads(meta.read_text())
    except (OSError, ValueError):
        return None
    identity = wanted_identity(name)
    if any(facts.get(k) != v for k, v in identity.items()):
        return None
    if facts.get("file_size") != pcap.stat().st_size:
        return None
    return facts


def _check(name: str, facts: dict[str, Any]) -> None:
    lim = LIMITS[name]
    problems = []
    if facts["tcpdump_dropped"]:
        problems.append(f"tcpdump dropped {facts['tcpdump_dropped']} packets")
    if "min_bytes" in lim and not lim["min_bytes"] <= facts["file_size"] <= lim["max_bytes"]:
        problems.append(f"size {facts['file_size']} outside "
                        f"[{lim['min_bytes']}, {lim['max_bytes']}]")
    if facts.get("records_produced", 0) < lim.get("min_records", 0):
        problems.append(f"only {facts['records_produced']} records")
    if facts["tcpdump_captured"] < lim.get("min_packets", 0):
        problems.append(f"only {facts['tcpdump_captured']} packets")
    if "min_mb_per_s" in lim:
        rate = facts["file_size"] / 1e6 / max(facts["duration_s"], 1e-9)
        if not lim["min_mb_per_s"] <= rate <= lim["max_mb_per_s"]:
            problems.append(f"{rate:.2f} MB/s outside "
                            f"[{lim['min_mb_per_s']}, {lim['max_mb_per_s']}]")
    if problems:
        raise CaptureBuildError(f"{name}: " + "; ".join(problems))


def _child(name: str, out: Path) -> int:
    """Inside the private namespace: run the scenario, write the capture and facts."""
    from capgen.session import CaptureSession

    mod = scenario(name)
    netns.setup_loopback(getattr(mod, "LOOPBACK_MTU", netns.LOOPBACK_MTU))
    pcap, meta = paths(name, out)
    part = out / f".{name}.pcap.part"
    try:
        facts = mod.run(lambda ports: CaptureSession(part, ports))
        facts["file_size"] = part.stat().st_size
        facts["description"] = mod.DESCRIPTION
        facts.update(wanted_identity(name))
        _check(name, facts)
    except Exception:
        traceback.print_exc()
        part.unlink(missing_ok=True)
        return 1
    os.replace(part, pcap)
    tmp = meta.with_suffix(".json.part")
    tmp.write_text(json.dumps(facts, indent=1) + "\n")
    os.replace(tmp, meta)
    print(f"{name}: {pcap} ({facts['file_size']:,} bytes, {facts['tcpdump_captured']:,} "
          f"packets, 0 dropped)", flush=True)
    return 0


def build(name: str, out: Path = DATA, attempts: int = 2) -> dict[str, Any]:
    """Build ``name`` (in a fresh network namespace); return its facts."""
    reason = netns.why_no_netns()
    if reason:
        raise CaptureBuildError(f"cannot build benchmark captures: {reason}")
    out.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, attempts + 1):
        print(f"== building {name} capture (attempt {attempt}/{attempts}); this takes "
              f"a few minutes", flush=True)
        rc = netns.run_in_netns([str(Path(__file__).resolve()), "--child", name,
                                 "--out", str(out.resolve())])
        facts = load_facts(name, out) if rc == 0 else None
        if facts is not None:
            return facts
    raise CaptureBuildError(f"{name}: capture build failed {attempts} times")


def ensure(name: str, out: Path = DATA, force: bool = False) -> tuple[Path, dict[str, Any]]:
    """The path and facts of an up-to-date ``name`` capture, building it if needed."""
    facts = None if force else load_facts(name, out)
    if facts is None:
        facts = build(name, out)
    return paths(name, out)[0], facts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", choices=NAMES, help="captures to build")
    ap.add_argument("--force", action="store_true", help="rebuild even if up to date")
    ap.add_argument("--out", type=Path, default=DATA, help="directory (default: %(default)s)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        if not netns.inside_private_netns():
            ap.error("--child is internal")
        return _child(args.child, args.out)
    try:
        for name in args.only or NAMES:
            path, facts = ensure(name, args.out, args.force)
            print(f"{name}: {path} {facts['file_size']:,} bytes, "
                  f"{facts['tcpdump_captured']:,} packets")
    except CaptureBuildError as err:
        print(f"captures: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
