"""The decoding core's tests pass on the pure-Python path too.

Where modules and kernels are compiled (CI compiles them), the rest of the suite runs
the compiled path. This test runs the fast tests of the core layers again in a child
pytest with ``KWSNIFF_PURE=1`` (every module from its source, no C kernel: capture
reading, TCP, protocol, records, conversations, engine, output, robustness), so the
path a machine without a C compiler uses stays tested end to end. Slow (about a minute
and a half); skipped where nothing is compiled, since the whole suite then runs the
pure path already.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kwsniff import _compiled

ROOT = Path(__file__).resolve().parents[2]
CORE = ("capture", "tcp", "protocol", "records", "conversation", "engine", "output",
        "robustness")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _compiled.read_manifest(),
                       reason="nothing was compiled: every test runs the pure path"),
]


def test_core_tests_pass_from_source() -> None:
    env = dict(os.environ, KWSNIFF_PURE="1")
    probe = subprocess.run([sys.executable, "-m", "kwsniff.accel"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
    assert "off (KWSNIFF_PURE is set)" in probe.stdout, probe.stdout
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           *(f"tests/{d}" for d in CORE)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    tail = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout.splitlines()[-1], tail
