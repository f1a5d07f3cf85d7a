#!/usr/bin/env python3
"""Do kwsniff and tshark see the same Kafka traffic in a benchmark capture?

    .venv/bin/python benchmarks/agree.py mixed        # or bulk, chatty

A benchmark only compares like with like if both tools decode the same exchanges. This
runs ``kwsniff export`` and ``tshark -T fields`` (the capture's broker ports decoded as
Kafka) once each and reports:

* requests per API key (kwsniff: exchanges with a request; tshark: Kafka PDUs that are
  not responses), which must be equal;
* request/response pairs (tshark's ``kafka.request_frame``): every tshark pair must be a
  kwsniff exchange (kwsniff may pair more: where tshark's dissector throws, it loses the
  correlation id);
* kwsniff's exchanges with a problem whose frames tshark does not mark (malformed or an
  expert note): there must be none, or kwsniff finds faults tshark does not;
* tshark's malformed frames, by API, for the record.

Exit status 0 when the three must-hold checks pass, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for extra in (BENCH, ROOT):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import captures  # noqa: E402


def tshark_view(tshark: str, path: Path, ports: list[int]) -> dict[str, Any]:
    """Requests per API key, pairs and marked frames, from one ``tshark -T fields`` run."""
    cmd = [tshark, "-n", "-r", str(path)]
    for p in ports:
        cmd += ["-d", f"tcp.port=={p},kafka"]
    cmd += ["-Y", "kafka", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,",
            "-e", "frame.number", "-e", "kafka.api_key", "-e", "kafka.request_frame",
            "-e", "_ws.malformed", "-e", "_ws.expert.message"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    requests: Counter[int] = Counter()
    malformed: Counter[str] = Counter()
    pairs: set[tuple[int, int]] = set()
    marked: set[int] = set()
    for line in out.splitlines():
        frame, keys, request_frames, bad, expert = (line.split("\t") + [""] * 5)[:5]
        number = int(frame)
        api_keys = [int(k) for k in keys.split(",") if k]
        if request_frames:
            pairs.update((int(r), number) for r in request_frames.split(","))
        else:
            requests.update(api_keys)
        if bad or expert:
            marked.add(number)
        if bad:
            malformed[str(api_keys[0]) if api_keys else "?"] += 1
    return {"requests": requests, "pairs": pairs, "marked": marked, "malformed": malformed}


def kwsniff_view(path: Path, ports: list[int]) -> dict[str, Any]:
    """Requests per API key, pairs and the exchanges with problems, from ``kwsniff export``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "x.jsonl"
        cmd = [sys.executable, "-m", "kwsniff", "export", "-o", str(out), str(path)]
        cmd[4:4] = [a for p in ports for a in ("-p", str(p))]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        subprocess.run(cmd, check=True, env=env, stderr=subprocess.DEVNULL)
        requests: Counter[int] = Counter()
        statuses: Counter[str] = Counter()
        pairs: set[tuple[int, int]] = set()
        problems: list[dict[str, Any]] = []
        with open(out) as fh:
            for line in fh:
                ex = json.loads(line)
                if ex.get("kind") != "exchange":
                    continue
                statuses[ex["status"]] += 1
                if ex["request_frames"]:
                    requests[ex["api_key"]] += 1
                if ex["request_frames"] and ex["response_frames"]:
                    pairs.add((ex["request_frames"][1], ex["response_frames"][1]))
                if ex["problems"]:
                    problems.append(ex)
    return {"requests": requests, "pairs": pairs, "problems": problems, "statuses": statuses}


def unexplained(problem_exchanges: list[dict[str, Any]], marked: set[int],
                tshark_pairs: set[tuple[int, int]]) -> list[str]:
    """kwsniff's problems on exchanges none of whose frames tshark marks. An exchange cut
    off by its connection closing has no response frame for tshark to mark: it counts as
    explained when tshark has no response paired with its request either."""
    answered = {request for request, _response in tshark_pairs}
    out = []
    for ex in problem_exchanges:
        frames = set(ex["request_frames"] or ()) | set(ex["response_frames"] or ())
        if frames & marked:
            continue
        if ex["status"] == "unanswered" and (ex["request_frames"] or [0, 0])[1] not in answered:
            continue
        out.append(f"exchange {ex['index']} ({ex['api_name']} v{ex['api_version']}, frames "
                   f"{sorted(frames)}): {'; '.join(ex['problems'])}")
    return out


def compare(name: str) -> int:
    facts = captures.load_facts(name)
    path = captures.paths(name)[0]
    if facts is None:
        print(f"agree: {path} is missing or stale (benchmarks/captures.py --only {name})",
              file=sys.stderr)
        return 1
    tshark = shutil.which("tshark")
    if tshark is None:
        print("agree: tshark not found", file=sys.stderr)
        return 1
    ports = facts["ports"]
    ts = tshark_view(tshark, path, ports)
    kw = kwsniff_view(path, ports)
    ok = True
    print(f"## {name}: kwsniff and tshark ({path.name})\n")
    print("| API key | kwsniff requests | tshark requests |\n|---:|---:|---:|")
    for key in sorted(set(kw["requests"]) | set(ts["requests"])):
        print(f"| {key} | {kw['requests'][key]:,} | {ts['requests'][key]:,} |")
    same = kw["requests"] == ts["requests"]
    ok &= same
    print(f"\nrequests: kwsniff {sum(kw['requests'].values()):,}, tshark "
          f"{sum(ts['requests'].values()):,} ({'equal' if same else 'DIFFERENT'}); kwsniff "
          f"statuses {dict(kw['statuses'])}")
    missing = ts["pairs"] - kw["pairs"]
    ok &= not missing
    print(f"pairs: tshark {len(ts['pairs']):,}, kwsniff {len(kw['pairs']):,}; tshark pairs "
          f"kwsniff lacks: {len(missing)} {sorted(missing)[:10]}; kwsniff pairs tshark lacks: "
          f"{len(kw['pairs'] - ts['pairs'])} {sorted(kw['pairs'] - ts['pairs'])[:10]}")
    kinds = Counter(f"{ex['api_name']}: {ex['problems'][0][:70]}" for ex in kw["problems"])
    print(f"kwsniff exchanges with problems: {len(kw['problems'])}")
    for text, n in kinds.most_common():
        print(f"  {n:6,} {text}")
    alone = unexplained(kw["problems"], ts["marked"], ts["pairs"])
    ok &= not alone
    print(f"kwsniff problems on frames tshark does not mark: {len(alone)}")
    for line in alone[:20]:
        print(f"  {line}")
    print(f"tshark malformed frames by API key: {dict(ts['malformed'])}")
    print(f"\nagree: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", choices=captures.NAMES, help="benchmark capture")
    return compare(ap.parse_args(argv).name)


if __name__ == "__main__":
    sys.exit(main())
