"""Run every fuzz target (or some) for a bounded time and report what happened.

Usage::

    python -m fuzz.run                       # every target, KWSNIFF_FUZZ_SECONDS each
    python -m fuzz.run --seconds 3600 --workdir fuzz-work records protocol
    python -m fuzz.run --jobs 2              # two targets at a time

Contract: :func:`run_target` starts ``python -m fuzz.main TARGET`` in a subprocess with
a fresh seed directory (from the real captures), a persistent corpus directory under
the work directory (so longer runs build on earlier ones), libFuzzer's
``-max_total_time``, a per-input ``-timeout`` (a hang is a finding) and an RSS limit
(a memory blow-up is a finding). It returns a :class:`FuzzResult` with executions,
coverage (libFuzzer's ``cov``/``ft``), corpus size and the finding, if any, whose
reproducer libFuzzer wrote to ``<workdir>/artifacts/``. Exit status of the command: 0
when no target found anything, 1 otherwise.

Environment: ``KWSNIFF_FUZZ_SECONDS`` (default 35 per target), ``KWSNIFF_FUZZ_WORKDIR``
(default: a new temporary directory), ``KWSNIFF_FUZZ_JOBS`` (default 1).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SECONDS = 35
#: seconds one input may take before libFuzzer calls it a hang
INPUT_TIMEOUT = 30
#: resident memory (MB) beyond which libFuzzer calls it an out-of-memory finding
RSS_LIMIT_MB = 2048
#: extra wall-clock seconds allowed for start-up and seed loading
GRACE = 120

_STATS = re.compile(r"^#(\d+)\s+(\w+)\s+cov: (\d+) ft: (\d+) corp: (\d+)/")
_DONE = re.compile(r"^Done (\d+) runs in (\d+) second")
_FINDING = re.compile(r"(Uncaught Python exception|==\d+== ERROR: libFuzzer|"
                      r"ERROR: libFuzzer|ALARM: working on the last Unit|out-of-memory)")
_ARTIFACT = re.compile(r"Test unit written to (\S+)")


@dataclass
class FuzzResult:
    """What one bounded run of one target did."""

    target: str
    seconds: float = 0.0            # wall-clock time of the run
    executions: int = 0
    cov: int = 0                    # coverage counters reached (libFuzzer "cov")
    ft: int = 0                     # features (libFuzzer "ft")
    corpus: int = 0                 # inputs in the corpus at the end
    seeds: int = 0
    returncode: int | None = None
    finding: str | None = None      # None: nothing found
    artifacts: list[str] = field(default_factory=list)
    log: str = ""

    @property
    def execs_per_second(self) -> float:
        return self.executions / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        verdict = "ok" if self.finding is None else f"FINDING: {self.finding}"
        return (f"{self.target:<15} {self.executions:>9} execs {self.execs_per_second:>7.0f}/s "
                f"cov {self.cov:>5} ft {self.ft:>6} corpus {self.corpus:>5} "
                f"({self.seconds:.0f} s) {verdict}")


def default_seconds() -> float:
    return float(os.environ.get("KWSNIFF_FUZZ_SECONDS", DEFAULT_SECONDS))


def write_seeds(target: str, directory: Path) -> int:
    """Write the target's seeds (named by content hash) into ``directory``."""
    from fuzz.targets import load
    mod = load(target)
    directory.mkdir(parents=True, exist_ok=True)
    n = 0
    for seed in mod.seeds():
        seed = bytes(seed)[:mod.MAX_LEN]
        (directory / ("seed-" + hashlib.sha1(seed).hexdigest()[:16])).write_bytes(seed)
        n += 1
    return n


def write_dictionary(target: str, path: Path) -> bool:
    from fuzz.targets import load
    tokens = getattr(load(target), "DICTIONARY", None)
    if not tokens:
        return False
    lines = []
    for tok in tokens:
        raw = tok.encode() if isinstance(tok, str) else bytes(tok)
        lines.append('"' + "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\x{b:02x}"
                                   for b in raw) + '"')
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return True


def parse_log(result: FuzzResult, text: str) -> None:
    """Fill executions, coverage, corpus and finding from libFuzzer's output."""
    for line in text.splitlines():
        m = _STATS.match(line)
        if m:
            result.executions = int(m.group(1))
            result.cov, result.ft, result.corpus = int(m.group(3)), int(m.group(4)), int(m.group(5))
            continue
        m = _DONE.match(line)
        if m:
            result.executions = int(m.group(1))
            continue
        m = _ARTIFACT.search(line)
        if m:
            result.artifacts.append(m.group(1))
        if result.finding is None:
            m = _FINDING.search(line)
            if m:
                result.finding = line.strip()[:300]
    if result.finding is None and result.returncode not in (0, None):
        result.finding = f"fuzzer exited with status {result.returncode}"


def run_target(target: str, seconds: float | None = None, workdir: Path | None = None, *,
               extra: list[str] | None = None, seed: int | None = None) -> FuzzResult:
    """Fuzz ``target`` for ``seconds`` (see the module contract).

    ``seed`` fixes libFuzzer's random seed and Python's hash seed; two runs still
    differ (the run is bounded by time, and atheris' libFuzzer does not repeat itself
    exactly: docs/robustness.md); without it they differ from the first input on.
    """
    secs = default_seconds() if seconds is None else seconds
    work = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="kwsniff-fuzz-"))
    from fuzz.targets import load
    mod = load(target)
    seeds_dir = work / "seeds" / target
    corpus_dir = work / "corpus" / target
    artifacts = work / "artifacts"
    logs = work / "logs"
    for d in (corpus_dir, artifacts, logs):
        d.mkdir(parents=True, exist_ok=True)
    result = FuzzResult(target)
    result.seeds = write_seeds(target, seeds_dir)
    cmd = [sys.executable, "-m", "fuzz.main", target, str(corpus_dir), str(seeds_dir),
           f"-max_total_time={max(1, int(secs))}", f"-max_len={mod.MAX_LEN}",
           f"-timeout={INPUT_TIMEOUT}", f"-rss_limit_mb={RSS_LIMIT_MB}",
           f"-artifact_prefix={artifacts}/{target}-", "-print_final_stats=1"]
    dict_path = work / "dict" / f"{target}.dict"
    if write_dictionary(target, dict_path):
        cmd.append(f"-dict={dict_path}")
    cmd.extend(extra or [])
    env = dict(os.environ)
    if seed is not None:
        cmd.append(f"-seed={seed}")
        env["PYTHONHASHSEED"] = str(seed)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    log_path = logs / f"{target}.log"
    started = time.monotonic()
    with open(log_path, "w") as log:
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  timeout=secs + GRACE, check=False)
            result.returncode = proc.returncode
        except subprocess.TimeoutExpired:
            result.finding = f"the fuzzer did not stop within {secs + GRACE:.0f} s"
    result.seconds = time.monotonic() - started
    result.log = str(log_path)
    parse_log(result, log_path.read_text(errors="replace"))
    return result


def run_all(targets: list[str], seconds: float, workdir: Path, jobs: int = 1
            ) -> list[FuzzResult]:
    def one(t: str) -> FuzzResult:
        r = run_target(t, seconds, workdir)
        print(r.line(), flush=True)
        return r

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(one, targets))
    (workdir / "results.json").write_text(json.dumps(
        [asdict(r) | {"execs_per_second": round(r.execs_per_second, 1)} for r in results],
        indent=2))
    return results


def main(argv: list[str] | None = None) -> int:
    from fuzz.targets import TARGETS
    parser = argparse.ArgumentParser(prog="python -m fuzz.run", description=__doc__.split("\n")[0])
    parser.add_argument("targets", nargs="*", metavar="TARGET",
                        help=f"targets to run (default: all of {', '.join(TARGETS)})")
    parser.add_argument("--seconds", type=float, default=default_seconds(),
                        help="fuzzing time per target (default: $KWSNIFF_FUZZ_SECONDS or "
                             f"{DEFAULT_SECONDS})")
    parser.add_argument("--workdir", type=Path, default=os.environ.get("KWSNIFF_FUZZ_WORKDIR"),
                        help="keeps corpora, artifacts, logs and results.json (default: a "
                             "new temporary directory)")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("KWSNIFF_FUZZ_JOBS", 1)),
                        help="targets run at the same time")
    args = parser.parse_args(argv)
    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        parser.error(f"unknown target(s): {', '.join(unknown)}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kwsniff-fuzz-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"fuzzing {len(args.targets or TARGETS)} target(s) for {args.seconds:g} s each; "
          f"work directory {workdir}", flush=True)
    results = run_all(list(args.targets or TARGETS), args.seconds, workdir, args.jobs)
    found = [r for r in results if r.finding]
    total = sum(r.executions for r in results)
    print(f"{total} executions in total; {len(found)} target(s) with findings", flush=True)
    for r in found:
        print(f"  {r.target}: {r.finding}; log {r.log}; reproducers: "
              f"{', '.join(r.artifacts) or 'none'}", flush=True)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
