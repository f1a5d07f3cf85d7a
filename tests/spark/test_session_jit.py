"""The driver JVM really gets kwsniff's JIT option (and keeps the user's options)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from kwsniff.spark.session import PATIENT_JIT, QUICK_JIT  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from kwsniff.spark.session import spark_session
conf = {"spark.driver.extraJavaOptions": sys.argv[2]} if sys.argv[2] else None
spark = spark_session("local[1]", jit=sys.argv[1], conf=conf)
jvm = spark._jvm
bean = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
hotspot = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
    jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
print(json.dumps({"args": list(bean.getInputArguments()),
                  "code_cache": int(hotspot.getVMOption("ReservedCodeCacheSize").getValue())}))
spark.stop()
"""


def _jvm(jit: str, user: str = "") -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run([sys.executable, "-c", PROBE, jit, user],
                          capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _jvm_arguments(jit: str, user: str = "") -> list[str]:
    return _jvm(jit, user)["args"]


def test_jit_options_reach_the_driver_jvm_before_the_users_options() -> None:
    args = _jvm_arguments(QUICK_JIT, "-XX:TieredStopAtLevel=4 -Dkwsniff.test=1")
    assert "-XX:TieredStopAtLevel=1" in args and "-Dkwsniff.test=1" in args
    # the JVM takes the last one: the user's
    assert args.index("-XX:TieredStopAtLevel=1") < args.index("-XX:TieredStopAtLevel=4")
    assert any(a.startswith("-Dlog4j2.configurationFile=") for a in args)
    assert not any(a.startswith("-XX:TieredStopAtLevel") for a in _jvm_arguments(""))
    assert set(PATIENT_JIT.split()) <= set(_jvm_arguments(PATIENT_JIT))


def test_the_quick_jit_keeps_a_full_size_code_cache() -> None:
    """C1 alone would shrink the code cache to 48 MB, which Spark's generated classes
    fill on 100,000 exchanges (the run then failed); the quick JIT keeps the size the
    JVM gives both compilers."""
    both = _jvm("")["code_cache"]
    assert both >= 240 << 20
    assert _jvm(QUICK_JIT)["code_cache"] >= both
