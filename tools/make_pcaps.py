#!/usr/bin/env python3
"""Regenerate kwsniff's sample captures (pcaps/*.pcap + pcaps/*.json) from real Kafka software.

Usage (as root, from the repository root):

    .venv/bin/python tools/make_pcaps.py              # every scenario
    .venv/bin/python tools/make_pcaps.py --only rdkafka-acks midstream
    .venv/bin/python tools/make_pcaps.py --list

Each scenario runs in its own network namespace (``unshare --net``): a real broker
(librdkafka's mock cluster or Tansu) and real clients (confluent-kafka, kafka-python,
aiokafka) talk over that namespace's loopback while tcpdump captures it. See
pcaps/README.md for the scenarios and the manifest format.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))

from pcapgen import netns  # noqa: E402


def _child(name: str, out_dir: Path, work_dir: Path) -> int:
    """Inside the namespace: run one scenario, write its capture and manifest."""
    from pcapgen.context import ScenarioContext
    from pcapgen.scenarios import all_scenarios

    scenario = all_scenarios()[name]
    netns.setup_loopback()
    ctx = ScenarioContext(name, scenario.description, work_dir)
    # librdkafka logs (debug=protocol: the request log) go to fd 2; keep them in a file.
    log_fd = os.open(ctx.client_log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stderr = sys.stdout
    try:
        scenario.run(ctx)
        ctx.finish(out_dir)
    except Exception:
        traceback.print_exc(file=sys.stdout)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="scenarios to generate")
    parser.add_argument("--list", action="store_true", help="list scenarios and exit")
    parser.add_argument("--out", type=Path, default=ROOT / "pcaps",
                        help="output directory (default: pcaps/)")
    parser.add_argument("--attempts", type=int, default=2,
                        help="tries per scenario before giving up (default 2)")
    parser.add_argument("--keep-work", action="store_true",
                        help="keep each scenario's work directory (logs, raw capture)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        if not netns.inside_private_netns():
            parser.error("--child is internal")
        return _child(args.child, args.out, args.work)

    from pcapgen.scenarios import all_scenarios

    scenarios = all_scenarios()
    if args.list:
        for sc in scenarios.values():
            print(f"{sc.name:28} {sc.description}")
        return 0
    names = args.only or list(scenarios)
    unknown = [n for n in names if n not in scenarios]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)} (see --list)")
    reason = netns.why_no_netns()
    if reason:
        print(f"make_pcaps: cannot capture: {reason}", file=sys.stderr)
        return 2

    failed: list[str] = []
    for name in names:
        ok = False
        for attempt in range(1, args.attempts + 1):
            work = Path(tempfile.mkdtemp(prefix=f"kwsniff-pcapgen-{name}-"))
            print(f"== {name} (attempt {attempt}/{args.attempts})", flush=True)
            rc = netns.run_in_netns([str(Path(__file__).resolve()), "--child", name,
                                     "--out", str(args.out.resolve()), "--work", str(work)])
            if rc == 0:
                ok = True
                if not args.keep_work:
                    shutil.rmtree(work, ignore_errors=True)
                break
            log = work / "client-stderr.log"
            tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
            print(f"!! {name} failed (exit {rc}); work dir kept: {work}", flush=True)
            for line in tail:
                print(f"   | {line}")
        if not ok:
            failed.append(name)
    readme = args.out / "README.md"
    if readme.exists():
        from pcapgen import readme_table

        readme_table.update(readme, args.out, list(scenarios))
    if failed:
        print(f"make_pcaps: FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"make_pcaps: {len(names)} capture(s) written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
