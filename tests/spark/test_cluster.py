"""A real Spark standalone cluster: a master and two workers started from the installed
PySpark (``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``),
on loopback only, each under ``timeout`` (a bounded lifetime even if this test dies) and
stopped by pid. ``spark-decode`` of every capture in pcaps/ and ``analyze`` of its output
run on it as separate kwsniff processes with ``--master spark://127.0.0.1:PORT``; every
table must equal the same two commands run in local mode (docs/spark.md shows these
commands)."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from spark_common import PCAPS, ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LIFETIME = 900          # seconds any daemon of this test may live
WORKERS = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class() -> Path:
    pyspark = pytest.importorskip("pyspark")
    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not path.exists():
        pytest.skip("the PySpark package has no bin/spark-class")
    return path


def daemon_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOCAL_HOSTNAME="localhost",
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_DAEMON_MEMORY="256m", SPARK_LOG_DIR=str(tmp / "logs"),
               SPARK_WORKER_DIR=str(tmp / "work"), PYTHONPATH=str(ROOT))
    env.pop("PYSPARK_GATEWAY_PORT", None)
    return env


def alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as resp:
            return int(json.load(resp).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


@contextmanager
def standalone_cluster(tmp: Path) -> Iterator[str]:
    """A master and WORKERS workers (1 core, 1 GiB each) on 127.0.0.1; yields the URL."""
    env = daemon_env(tmp)
    port, ui = free_port(), free_port()
    procs: list[subprocess.Popen[bytes]] = []
    logs = tmp / "daemon-logs"
    logs.mkdir()

    def start(name: str, args: list[str]) -> None:
        out = open(logs / f"{name}.log", "wb")     # noqa: SIM115 - closed with the process
        procs.append(subprocess.Popen(["timeout", str(LIFETIME), str(spark_class()), *args],
                                      env=env, stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, cwd=tmp))
    try:
        start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                         "--port", str(port), "--webui-port", str(ui)])
        url = f"spark://127.0.0.1:{port}"
        for i in range(WORKERS):
            start(f"worker{i}", ["org.apache.spark.deploy.worker.Worker", url,
                                 "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                                 "--webui-port", str(free_port()),
                                 "--work-dir", str(tmp / f"work{i}")])
        deadline = time.monotonic() + 180
        while alive_workers(ui) < WORKERS:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                text = "\n".join((logs / f).read_text(errors="replace")[-1500:]
                                 for f in sorted(os.listdir(logs)))
                pytest.fail(f"the standalone cluster did not come up:\n{text}")
            time.sleep(1)
        yield url
    finally:
        for p in procs:                 # stopped by pid: timeout passes SIGTERM on
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)


def kwsniff(args: list[str], tmp: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "kwsniff", *args], env=daemon_env(tmp),
                          capture_output=True, text=True, timeout=LIFETIME - 60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def canonical(value: object) -> object:
    """Rows compared across runs: floats to 9 significant digits (sums and means may add
    in another order on other executors), lists and dicts recursively."""
    if isinstance(value, float):
        return float(f"{value:.9g}") if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def read_tables(spark, out: Path) -> dict[str, list[str]]:  # noqa: ANN001
    tables = {}
    for table in sorted((out / "parquet").iterdir()):
        rows = [r.asDict(recursive=True) for r in spark.read.parquet(str(table)).collect()]
        for row in rows:
            row.pop("source", None)   # the insight tables' input directory: differs by run
        tables[table.name] = sorted(json.dumps(canonical(row), sort_keys=True, default=str)
                                    for row in rows)
    return tables


def test_standalone_cluster_equals_local(spark, tmp_path: Path) -> None:  # noqa: ANN001
    captures = sorted(str(p) for p in PCAPS.glob("*.pcap"))
    runs = {}
    for mode in ("local", "cluster"):
        runs[mode] = (tmp_path / f"{mode}-decoded", tmp_path / f"{mode}-analysis")
    common = ["--driver-memory", "1g", "--conf", "spark.ui.enabled=false"]
    kwsniff(["spark-decode", *captures, "--out", str(runs["local"][0]), "--master", "local[2]",
             *common], tmp_path)
    kwsniff(["analyze", str(runs["local"][0]), "--out", str(runs["local"][1]), "--master",
             "local[2]", "--charts", "none", "-q", *common], tmp_path)
    started = time.monotonic()
    with standalone_cluster(tmp_path) as url:
        cluster = ["--master", url, "--conf", "spark.executor.memory=512m",
                   "--conf", "spark.executor.cores=1", *common]
        err = kwsniff(["spark-decode", *captures, "--out", str(runs["cluster"][0]), *cluster],
                      tmp_path)
        assert f"from {len(captures)} capture files" in err
        err = kwsniff(["analyze", str(runs["cluster"][0]), "--out", str(runs["cluster"][1]),
                       "--charts", "none", "-q", *cluster], tmp_path)
        assert "analyzed" in err
    print(f"standalone cluster part: {time.monotonic() - started:.1f} s")
    # the executors really ran on the workers
    assert list((tmp_path / "work0").glob("app-*")) and list((tmp_path / "work1").glob("app-*"))
    local, remote = (read_tables(spark, runs[m][1]) for m in ("local", "cluster"))
    assert set(local) == set(remote) and len(local) >= 24
    assert sum(len(rows) for rows in local.values()) > 1000
    for name in local:
        assert remote[name] == local[name], name
    decoded = {m: spark.read.parquet(str(runs[m][0] / "exchanges")).count() for m in runs}
    assert decoded["local"] == decoded["cluster"] > 500
