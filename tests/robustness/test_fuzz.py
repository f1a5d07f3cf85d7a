"""The fuzz targets: every seed and every stored reproducer passes (fast, always run);
each target fuzzed for a bounded time under atheris (``@pytest.mark.fuzz``, run with
``--all``; ``KWSNIFF_FUZZ_SECONDS`` per target, default 35)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fuzz import run as fuzz_run
from fuzz.targets import TARGETS, load
from kwsniff.kafka.protocol import cprogram

REGRESSIONS = Path(__file__).resolve().parents[2] / "fuzz" / "regressions"
#: seconds of seed replay per target in the fast suite
REPLAY_BUDGET = 3.0


@pytest.mark.parametrize("name", TARGETS)
def test_seeds_and_reproducers_pass(name: str) -> None:
    target = load(name)
    inputs = [p.read_bytes() for p in sorted((REGRESSIONS / name).glob("*"))]
    deadline = time.monotonic() + REPLAY_BUDGET
    for data in inputs:
        target.one_input(data)
    for i, seed in enumerate(target.seeds()):
        target.one_input(bytes(seed)[:target.MAX_LEN])
        if i >= 5 and time.monotonic() > deadline:
            break


def test_every_target_has_seeds_and_limits() -> None:
    for name in TARGETS:
        target = load(name)
        assert target.MAX_LEN >= 256
        assert any(True for _ in target.seeds()), name


LOG = """\
INFO: Seed: 1
#2\tINITED cov: 11 ft: 12 corp: 1/1b exec/s: 0 rss: 49Mb
#16384\tpulse  cov: 280 ft: 880 corp: 84/986b lim: 92 exec/s: 8192 rss: 53Mb
#54974\tDONE   cov: 283 ft: 965 corp: 105/1761b lim: 309 exec/s: 9162 rss: 55Mb
Done 54974 runs in 6 second(s)
"""


def test_log_parsing() -> None:
    r = fuzz_run.FuzzResult("x", returncode=0)
    fuzz_run.parse_log(r, LOG)
    assert (r.executions, r.cov, r.ft, r.corpus, r.finding) == (54974, 283, 965, 105, None)
    crash = LOG.replace("Done 54974", " === Uncaught Python exception: ===\nValueError: x\n"
                        "artifact_prefix='a/'; Test unit written to a/crash-123\nDone 54974")
    r = fuzz_run.FuzzResult("x", returncode=1)
    fuzz_run.parse_log(r, crash)
    assert r.finding and "Uncaught Python exception" in r.finding
    assert r.artifacts == ["a/crash-123"]
    r = fuzz_run.FuzzResult("x", returncode=-9)
    fuzz_run.parse_log(r, "")
    assert r.finding == "fuzzer exited with status -9"


@pytest.fixture(scope="session")
def fuzz_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = os.environ.get("KWSNIFF_FUZZ_WORKDIR")
    return Path(env) if env else tmp_path_factory.mktemp("fuzz")


@pytest.mark.fuzz
@pytest.mark.parametrize("name", TARGETS)
def test_fuzz_target(name: str, fuzz_workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("atheris")
    if name == "fields" and cprogram.decode_fields is None:
        pytest.skip("the fields target compares the field-decoder kernel, which is not in use")
    # A fixed seed, but not a reproducible campaign: it is bounded by time and libFuzzer
    # under atheris does not repeat itself exactly (docs/robustness.md); exploring
    # campaigns before a change lands run with ``python -m fuzz.run``.
    seed = int(os.environ.get("KWSNIFF_FUZZ_SEED", "1"))
    result = fuzz_run.run_target(name, workdir=fuzz_workdir, seed=seed)
    with capsys.disabled():     # executions and coverage belong in the CI log
        print(f"\nfuzz: {result.line()}")
    assert result.executions > 0, f"{name} did not run; log {result.log}"
    assert result.finding is None, (f"{name}: {result.finding}; log {result.log}; "
                                    f"reproducers {result.artifacts}")
