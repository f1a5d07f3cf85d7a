#!/usr/bin/env python3
"""TUI benchmark: time to first screen, to fully loaded, UI responsiveness while loading,
filter/sort/scroll times and memory, on a large capture of real Kafka traffic.

    .venv/bin/python benchmarks/bench_tui.py                       # 100k exchanges
    .venv/bin/python benchmarks/bench_tui.py --exchanges 1000000
    .venv/bin/python benchmarks/bench_tui.py --capture some.pcap

The capture is made by benchmarks/tui_capture.py under benchmarks/data/ (not committed)
on first use. The app runs headless (Textual's test driver, 160x50) with its real
decoder process. Reported:

* first screen: from creating the app to its first paint (wall clock);
* first rows: until the first exchanges are on screen; loaded: until the decoder is done;
* responsiveness while loading: delay of a 10 ms timer on the UI's event loop
  (p50/p99/max), and the time to move the cursor one page (key to cursor moved);
* after loading: one filter of each kind of field (:data:`FILTERS`; wall and UI CPU
  seconds, rows), a sort and rendering one page at the end of the list;
* memory: UI process RSS (now and peak), the store's own estimate, the decoder processes'
  peak RSS (the largest), and the spill bytes on disk; CPU seconds of the UI and of the
  decoder processes (sampled every 0.5 s while loading, and their total at the end);
* with ``--decode``: then the time of ``kwsniff decode -j 1`` on the same capture.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from kwsniff.tui.app import KwsniffApp  # noqa: E402


#: one filter per kind of display-filter field (after loading)
FILTERS = (
    "api == Produce", "latency_ms > 50", 'topic contains "o"', "error", "member",
    "producer_id > 0", "acks == -1", "frame > 1000000", "port == 39092", "tls",
    "problem", 'sasl_mechanism == "PLAIN"', "records > 100 and partition in {0..2}",
)


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child_cpu(pid: int) -> float:
    """User+system CPU seconds of a running process (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


async def run(capture: str, size: tuple[int, int], jobs: int = 1) -> dict[str, object]:
    out: dict[str, object] = {}
    created = time.monotonic()
    app = KwsniffApp(capture=capture, decoders=jobs)
    async with app.run_test(size=size) as pilot:
        lags: list[float] = []
        probing = True

        async def probe() -> None:
            while probing:
                start = time.monotonic()
                await asyncio.sleep(0.01)
                lags.append(time.monotonic() - start - 0.01)

        task = asyncio.create_task(probe())
        while app.first_screen_seconds is None:
            await asyncio.sleep(0.005)
        out["first_screen_s"] = time.monotonic() - created
        table = app.exchanges
        while table.count == 0 and not app.loader.done:
            await asyncio.sleep(0.01)
        out["first_rows_s"] = time.monotonic() - created
        keys: list[float] = []
        child_cpu_s: dict[int, float] = {}
        while not app.loader.done:
            await asyncio.sleep(0.5)
            for proc in list(app.loader._processes):      # one or two decoder processes
                child_cpu_s[proc.pid] = max(child_cpu_s.get(proc.pid, 0.0),
                                            child_cpu(proc.pid))
            table.focus()
            before = table.cursor
            start = time.monotonic()
            table.action_page_down()
            while table.cursor == before and time.monotonic() - start < 5 \
                    and table.count > before + 1:
                await asyncio.sleep(0.001)
            keys.append(time.monotonic() - start)
        out["loaded_s"] = time.monotonic() - created
        out["ui_cpu_loaded_s"] = round(time.process_time(), 1)   # UI CPU until loaded
        probing = False
        await task
        lags.sort()
        if lags:
            out["loop_lag_ms"] = {"p50": round(lags[len(lags) // 2] * 1000, 1),
                                  "p99": round(lags[int(len(lags) * 0.99)] * 1000, 1),
                                  "max": round(lags[-1] * 1000, 1), "samples": len(lags)}
        if keys:
            keys.sort()
            out["page_down_ms"] = {"p50": round(keys[len(keys) // 2] * 1000, 1),
                                   "max": round(keys[-1] * 1000, 1)}
        out["exchanges"] = app.store.count
        out["counters"] = app.loader.counters
        out["error"] = app.loader.error
        out["ui_rss_mib"] = round(rss_mib(), 1)
        out["store_memory"] = app.store.memory()
        out["decoder_processes"] = app.loader.workers
        out["decoder_cpu_s"] = round(sum(child_cpu_s.values()), 1)
        out["decoder_cpu_each_s"] = [round(v, 1) for v in child_cpu_s.values()]

        # after loading: render the last page, filter, sort
        await pilot.pause(0.5)
        table.action_last()
        start = time.perf_counter()
        for y in range(table.size.height):
            table.render_line(y)
        out["render_page_ms"] = round((time.perf_counter() - start) * 1000, 2)
        filters: dict[str, object] = {}
        for expression in FILTERS:
            start = time.monotonic()
            cpu = time.process_time()
            app._apply_filter(expression)
            while app.builder is not None and not app.builder.complete:
                await asyncio.sleep(0.01)
            filters[expression] = {
                "s": round(time.monotonic() - start, 2),
                "cpu_s": round(time.process_time() - cpu, 2),
                "rows": len(app.builder.rows) if app.builder else None}
        out["filters"] = filters
        out["filter_max_s"] = max(f["s"] for f in filters.values())  # type: ignore[index]
        app._apply_filter("")
        start = time.monotonic()
        app._apply_sort("latency", False)
        while app.builder is not None and not app.builder.complete:
            await asyncio.sleep(0.01)
        out["sort_latency_s"] = round(time.monotonic() - start, 2)
    out["ui_peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["decoder_peak_rss_mib"] = round(children.ru_maxrss / 1024, 1)
    out["decoder_cpu_total_s"] = round(children.ru_utime + children.ru_stime, 1)
    out["ui_cpu_s"] = round(time.process_time(), 1)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exchanges", type=int, default=100_000)
    ap.add_argument("--capture", help="an existing capture instead of the generated one")
    ap.add_argument("--size", default="160x50", help="terminal size, WxH")
    ap.add_argument("-j", "--jobs", type=int, choices=(1, 2), default=1,
                    help="decoder processes of the TUI (kwsniff tui -j)")
    ap.add_argument("--decode", action="store_true",
                    help="then time `kwsniff decode -j 1` on the same capture")
    args = ap.parse_args()
    capture = args.capture
    if capture is None:
        from tui_capture import DATA, generate
        path = DATA / f"tui-{args.exchanges}.pcap"
        if not path.exists():
            print(f"generating {path} ...", file=sys.stderr)
            generate(path, args.exchanges)
        capture = str(path)
    w, h = (int(v) for v in args.size.split("x"))
    size_mib = os.path.getsize(capture) / 2**20
    print(f"capture: {capture} ({size_mib:.0f} MiB, {os.path.getsize(capture)} bytes)")
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    result = asyncio.run(run(capture, (w, h), args.jobs))
    for key, value in result.items():
        print(f"{key}: {value}")
    if args.decode:
        # the same capture through ``kwsniff decode -j 1`` (the reference), after the TUI
        # run: its child-process counters must not include it
        import subprocess
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "kwsniff", "decode", "-j", "1", capture],
                       stdout=subprocess.DEVNULL, check=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        print(f"decode_j1_s: {time.monotonic() - start:.1f}")
        print(f"decode_j1_cpu_s: {cpu:.1f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
