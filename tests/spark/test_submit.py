"""The jobs under ``spark-submit`` (the one shipped in the PySpark package): a separate
JVM and driver, the master given to spark-submit, kwsniff's entry script."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from spark_common import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def spark_submit() -> Path:
    pyspark = pytest.importorskip("pyspark")
    path = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if not path.exists():
        pytest.skip("the PySpark package has no bin/spark-submit")
    return path


def test_analyze_under_spark_submit(export_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    env.pop("PYSPARK_GATEWAY_PORT", None)
    cmd = [str(spark_submit()), "--master", "local[2]", "--driver-memory", "1g",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
           str(ROOT / "kwsniff" / "spark" / "submit.py"), "analyze",
           str(export_dir / "rdkafka-idempotent-txn.jsonl"), "--out", str(out),
           "--charts", "png", "--top", "3"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # spark-submit's PythonRunner merges the driver's stderr into its stdout
    # (redirectErrorStream), so the progress lines come first, then the report.
    progress, sep, report = proc.stdout.partition("Input\n=====")
    assert sep, proc.stdout[-3000:]
    # (the first step line; the number of steps depends on the charts and jobs asked)
    assert re.search(r"^\[ ?1/\d+\] read exports \.\.\. [\d.]+ s$", progress, re.M), progress
    assert "Transactions" in report
    with open(out / "csv" / "transactions_summary.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["transactional_id"], r["committed"], r["aborted"]) for r in rows] == \
        [("kwsniff-txn", "2", "1")]
    assert (out / "charts" / "latency_by_api.png").exists()


def test_analyze_progress_and_quiet_logs_with_the_users_java_options(export_dir: Path,
                                                                     tmp_path: Path) -> None:
    # A fresh driver JVM started by `kwsniff analyze` (not spark-submit): one progress line
    # per step on stderr, no log4j WARN/INFO lines, also when the user passes driver Java
    # options of their own (they used to replace the quiet log set-up).
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    env.pop("PYSPARK_GATEWAY_PORT", None)
    cmd = [sys.executable, "-m", "kwsniff", "analyze",
           str(export_dir / "rdkafka-acks.jsonl"), "-o", str(tmp_path / "out"),
           "--master", "local[2]", "--driver-memory", "1g", "--charts", "none",
           "--conf", "spark.driver.extraJavaOptions=-Dkwsniff.test=1"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    err = proc.stderr.splitlines()
    steps = [line for line in err if line.startswith("[")]
    total = steps[0].split("/")[1].split("]")[0] if steps else "?"
    assert len(steps) == int(total)
    assert steps[0].replace(" ", "").startswith(f"[1/{total}]readexports"), steps[0]
    logs = [line for line in err if " WARN " in line or " INFO " in line]
    assert logs == [], logs[:5]
