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
bean = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
print(json.dumps(list(bean.getInputArguments())))
spark.stop()
"""


def _jvm_arguments(jit: str, user: str = "") -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run([sys.executable, "-c", PROBE, jit, user],
                          capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_jit_options_reach_the_driver_jvm_before_the_users_options() -> None:
    args = _jvm_arguments(QUICK_JIT, "-XX:TieredStopAtLevel=4 -Dkwsniff.test=1")
    assert "-XX:TieredStopAtLevel=1" in args and "-Dkwsniff.test=1" in args
    # the JVM takes the last one: the user's
    assert args.index("-XX:TieredStopAtLevel=1") < args.index("-XX:TieredStopAtLevel=4")
    assert any(a.startswith("-Dlog4j2.configurationFile=") for a in args)
    assert not any(a.startswith("-XX:TieredStopAtLevel") for a in _jvm_arguments(""))
    assert set(PATIENT_JIT.split()) <= set(_jvm_arguments(PATIENT_JIT))
