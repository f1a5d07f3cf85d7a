#!/usr/bin/env python3
"""kwsniff against tshark on three benchmark captures of real Kafka traffic.

    .venv/bin/python benchmarks/run.py                  # everything (builds captures first)
    .venv/bin/python benchmarks/run.py --runs 5 --only chatty
    .venv/bin/python benchmarks/run.py --pairs summary --no-tshark

Builds (once, see ``benchmarks/captures.py``) the *bulk* capture (~150 MB, every codec,
large frames, >100,000 records), the *chatty* capture (>= 1,000,000 small packets) and
the *mixed* capture (~150 MB, a minute of ~2.5 MB/s producer and consumer-group
traffic), then runs on the same files, ``--runs`` times each, interleaved (one of each
command per round, so load changes hit every command alike):

* ``cat FILE > /dev/null`` (the floor),
* ``kwsniff decode`` (summary), ``kwsniff decode -V``, ``kwsniff export``,
* ``tshark -r FILE -d tcp.port==P,kafka -Y kafka`` (summary), ``... -V``, ``... -T json``.

Every command writes to /dev/null. For each it prints the median wall time and its
spread (min-max), median CPU time (user + system), throughput (MB/s, packets/s,
exchanges/s, records/s, from the capture's counts), and peak RSS; then the
tshark/kwsniff time ratio of each pair (summary/summary, -V/-V, export/-T json), of the
medians and of each round, and
kwsniff's peak RSS on growing prefixes of the bulk capture. Results also go to
``benchmarks/data/results-<time>.json``. Details: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import compileall
import datetime as dt
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for extra in (BENCH, ROOT):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import captures  # noqa: E402
from counts import cached_counts  # noqa: E402
from measure import Sample, Summary, load_average, run_once  # noqa: E402

#: (pair name, kwsniff command label, tshark command label, goal: tshark/kwsniff >= goal)
PAIRS = (("summary", "kwsniff decode", "tshark -Y kafka", 2.0),
         ("verbose", "kwsniff decode -V", "tshark -V", 1.0),
         ("json", "kwsniff export", "tshark -T json", None))
#: fractions of the bulk capture decoded to show that memory does not grow with it
PREFIXES = (0.25, 0.5)


def kwsniff_argv(mode: str, path: Path, ports: list[int]) -> list[str]:
    base = [sys.executable, "-m", "kwsniff"]
    port_args = [a for p in ports for a in ("-p", str(p))]
    if mode == "export":
        return base + ["export", *port_args, "-o", os.devnull, str(path)]
    extra = ["-V"] if mode == "verbose" else []
    return base + ["decode", *extra, *port_args, str(path)]


def tshark_argv(tshark: str, mode: str, path: Path, ports: list[int]) -> list[str]:
    argv = [tshark, "-r", str(path)]
    for p in ports:
        argv += ["-d", f"tcp.port=={p},kafka"]
    argv += ["-Y", "kafka"]
    if mode == "verbose":
        argv.append("-V")
    elif mode == "json":
        argv += ["-T", "json"]
    return argv


def commands(path: Path, ports: list[int], pairs: list[str], tshark: str | None
             ) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = [("cat > /dev/null", ["cat", str(path)])]
    mode_of = {"summary": "summary", "verbose": "verbose", "json": "export"}
    for name, kw_label, ts_label, _goal in PAIRS:
        if name not in pairs:
            continue
        out.append((kw_label, kwsniff_argv(mode_of[name], path, ports)))
        if tshark:
            out.append((ts_label, tshark_argv(tshark, name, path, ports)))
    return out


def prefix_capture(src: Path, fraction: float) -> Path:
    """The first ``fraction`` of a classic pcap file's records (cached beside it)."""
    dst = src.with_name(f"{src.stem}-{int(fraction * 100)}pct.pcap")
    if dst.exists() and dst.stat().st_mtime_ns >= src.stat().st_mtime_ns:
        return dst
    with open(src, "rb") as fh:
        data = fh.read(24)
        order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        rec = struct.Struct(order + "IIII")
        target = int(src.stat().st_size * fraction)
        pos = 24
        while pos < target:
            fh.seek(pos)
            head = fh.read(16)
            if len(head) < 16:
                break
            pos += 16 + rec.unpack(head)[2]
    tmp = dst.with_suffix(".part")
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        remaining = pos
        while remaining:
            chunk = fin.read(min(remaining, 1 << 20))
            fout.write(chunk)
            remaining -= len(chunk)
    tmp.replace(dst)
    return dst


def _fmt_rate(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    if value >= 1e3:
        return f"{value / 1e3:.1f} k"
    return f"{value:.0f}"


def table(name: str, info: dict[str, Any], results: dict[str, Summary]) -> list[str]:
    size, c = info["size"], info["counts"]
    lines = [f"### {name}: {size / 1e6:.1f} MB, {c['packets']:,} packets, "
             f"{c['exchanges']:,} exchanges, {c['records']:,} records "
             f"(ports {', '.join(map(str, info['ports']))})", "",
             "| command | wall median (s) | wall min-max (s) | CPU median (s) | MB/s "
             "| packets/s | exchanges/s | records/s | peak RSS (MB) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, summ in results.items():
        if not summ.ok:
            tail = summ.samples[-1].stderr_tail.strip().splitlines()[-1:] if summ.samples else []
            lines.append(f"| {label} | failed: {' '.join(tail)} | | | | | | | |")
            continue
        wall = summ.median("wall")
        lo, hi = summ.spread("wall")
        lines.append(
            f"| {label} | {wall:.2f} | {lo:.2f}-{hi:.2f} | {summ.median('cpu'):.2f} "
            f"| {size / 1e6 / wall:.1f} | {_fmt_rate(c['packets'] / wall)} "
            f"| {_fmt_rate(c['exchanges'] / wall)} | {_fmt_rate(c['records'] / wall)} "
            f"| {summ.peak_rss_mb:.0f} |")
    return lines


def round_ratios(kw: Summary, ts: Summary) -> list[float]:
    """tshark/kwsniff wall time of each round: the commands run interleaved, one of each
    per round, so round ``i`` of both ran in the same minutes (the machine's speed
    drifts between rounds more than the medians show)."""
    return [t.wall / k.wall for k, t in zip(kw.samples, ts.samples) if k.wall > 0]


def ratio_lines(all_results: dict[str, dict[str, Summary]]) -> tuple[list[str], list[dict]]:
    lines = ["| capture | pair | tshark/kwsniff wall | tshark/kwsniff CPU | per round (wall) "
             "| goal | met (medians) | rounds meeting it |",
             "|---|---|---:|---:|---|---:|---|---:|"]
    rows = []
    for cap, results in all_results.items():
        for name, kw_label, ts_label, goal in PAIRS:
            kw, ts = results.get(kw_label), results.get(ts_label)
            if kw is None or ts is None or not kw.ok or not ts.ok:
                continue
            wall = ts.median("wall") / kw.median("wall")
            cpu = ts.median("cpu") / kw.median("cpu")
            rounds = round_ratios(kw, ts)
            met = "-" if goal is None else ("yes" if wall >= goal else "no")
            goal_text = "-" if goal is None else f">= {goal:g}x"
            meeting = "-" if goal is None else \
                f"{sum(r >= goal for r in rounds)} of {len(rounds)}"
            lines.append(f"| {cap} | {kw_label} vs {ts_label} | {wall:.2f}x | {cpu:.2f}x "
                         f"| {', '.join(f'{r:.2f}x' for r in rounds)} | {goal_text} | {met} "
                         f"| {meeting} |")
            rows.append({"capture": cap, "pair": name, "wall_ratio": wall, "cpu_ratio": cpu,
                         "round_ratios": rounds, "goal": goal})
    return lines, rows


def memory_scaling(path: Path, ports: list[int], runs: int) -> list[dict]:
    """kwsniff decode's peak RSS and CPU on growing prefixes of ``path``."""
    rows = []
    for fraction in (*PREFIXES, 1.0):
        p = path if fraction == 1.0 else prefix_capture(path, fraction)
        summ = Summary([run_once(kwsniff_argv("summary", p, ports)) for _ in range(runs)])
        size = p.stat().st_size
        rows.append({"input": p.name, "size": size, "peak_rss_mb": summ.peak_rss_mb,
                     "cpu_median": summ.median("cpu"), "ok": summ.ok})
    return rows


def report(doc: dict[str, Any]) -> list[str]:
    """The Markdown report of a results document (what ``main`` writes as JSON)."""
    started = dt.datetime.fromtimestamp(doc["started"]).isoformat(timespec="seconds")
    load_before, load_after = doc["load_before"], doc["load_after"]
    out: list[str] = ["", "## kwsniff vs tshark", "",
                      f"{started}; {doc['runs']} runs per command; {doc['cpus']} CPUs; "
                      f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; "
                      f"Python {doc['python']}; {doc['tshark'] or 'no tshark'}", ""]
    all_results = {name: {label: Summary([Sample(**s) for s in samples])
                          for label, samples in res.items()}
                   for name, res in doc["results"].items()}
    for name, results in all_results.items():
        out += table(name, doc["captures"][name], results) + [""]
    ratio_text, ratio_rows = ratio_lines(all_results)
    if ratio_rows:
        out += ["### Ratios (above 1: kwsniff is faster)", ""] + ratio_text + [""]
    if doc.get("memory"):
        out += ["### kwsniff decode peak RSS as the capture grows", "",
                "| input | size (MB) | kwsniff decode peak RSS (MB) | CPU median (s) |",
                "|---|---:|---:|---:|"]
        out += [f"| {m['input']} | {m['size'] / 1e6:.1f} | {m['peak_rss_mb']:.0f} "
                f"| {m['cpu_median']:.2f} |" for m in doc["memory"]] + [""]
    return out


def _version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) \
        else "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per command (default 3)")
    ap.add_argument("--only", nargs="+", choices=captures.NAMES, default=list(captures.NAMES))
    ap.add_argument("--pairs", nargs="+", choices=[p[0] for p in PAIRS],
                    default=[p[0] for p in PAIRS], help="which comparisons to run")
    ap.add_argument("--no-tshark", action="store_true", help="kwsniff only")
    ap.add_argument("--no-memory", action="store_true",
                    help="skip the peak-RSS-vs-capture-size runs")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the captures first")
    ap.add_argument("--json", type=Path, help="results file (default: benchmarks/data/"
                                              "results-<time>.json)")
    ap.add_argument("--report", type=Path, metavar="RESULTS",
                    help="only print the report of an earlier results file")
    args = ap.parse_args(argv)
    if args.report is not None:
        try:
            doc = json.loads(args.report.read_text())
        except (OSError, ValueError) as err:
            print(f"run: cannot read {args.report}: {err}", file=sys.stderr)
            return 1
        print("\n".join(report(doc)))
        return 0
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    tshark = None if args.no_tshark else shutil.which("tshark")
    if not args.no_tshark and tshark is None:
        print("run: tshark not found; measuring kwsniff only", file=sys.stderr)

    # Measure kwsniff as installed: with up-to-date bytecode. Environments that set
    # PYTHONDONTWRITEBYTECODE never refresh a stale .pyc, and every run would then pay
    # ~0.1 s compiling edited modules from source.
    compileall.compile_dir(str(ROOT / "kwsniff"), quiet=1)

    infos: dict[str, dict[str, Any]] = {}
    try:
        for name in args.only:
            path, facts = captures.ensure(name, force=args.rebuild)
            infos[name] = {"path": path, "size": path.stat().st_size,
                           "ports": facts["ports"], "facts": facts}
    except captures.CaptureBuildError as err:
        print(f"run: {err}", file=sys.stderr)
        return 1
    for name, info in infos.items():
        print(f"counting {name} with kwsniff (cached after the first time) ...", flush=True)
        info["counts"] = cached_counts(info["path"], tuple(info["ports"]))

    load_before = load_average()
    started = time.time()
    all_results: dict[str, dict[str, Summary]] = {}
    for name, info in infos.items():
        cmds = commands(info["path"], info["ports"], args.pairs, tshark)
        results = {label: Summary() for label, _ in cmds}
        for r in range(args.runs):
            for label, cmd in cmds:
                print(f"[{name} run {r + 1}/{args.runs}] {label} ...", end=" ", flush=True)
                sample = run_once(cmd)
                results[label].samples.append(sample)
                status = "" if sample.returncode == 0 else f" (exit {sample.returncode})"
                print(f"{sample.wall:.2f} s wall, {sample.cpu:.2f} s CPU, "
                      f"{sample.rss_mb:.0f} MB{status}", flush=True)
        all_results[name] = results
    mem_rows: list[dict] = []
    if not args.no_memory and "bulk" in infos:
        print("memory scaling: kwsniff decode on prefixes of the bulk capture ...", flush=True)
        mem_rows = memory_scaling(infos["bulk"]["path"], infos["bulk"]["ports"], 1)
    load_after = load_average()

    doc = {"started": started, "finished": time.time(), "runs": args.runs,
           "load_before": load_before, "load_after": load_after,
           "python": platform.python_version(), "cpus": os.cpu_count(),
           "tshark": _version([tshark, "--version"]) if tshark else None,
           "captures": {n: {"size": i["size"], "ports": i["ports"], "counts": i["counts"],
                            "facts": i["facts"]} for n, i in infos.items()},
           "results": {n: {label: [s.__dict__ if hasattr(s, "__dict__") else
                                   {k: getattr(s, k) for k in s.__slots__}
                                   for s in summ.samples]
                           for label, summ in res.items()} for n, res in all_results.items()},
           "ratios": ratio_lines(all_results)[1], "memory": mem_rows}
    print("\n".join(report(doc)))
    path = args.json or captures.DATA / f"results-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"results: {path}")
    failed = [f"{n}: {label}" for n, res in all_results.items() for label, s in res.items()
              if not s.ok]
    if failed:
        print("run: commands failed: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
