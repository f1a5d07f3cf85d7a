"""Starting (or joining) the SparkSession the kwsniff jobs run on.

Contract:

* :func:`spark_session` returns the active session when there is one (tests, notebooks,
  a second job in one process) and never stops it; otherwise it builds one. The master is
  ``master`` when given, else the one ``spark-submit`` passed (the JVM already runs), else
  ``local[*]``.
* Local masters get kwsniff's defaults: this Python for the workers, UTC session time,
  ``shuffle_partitions`` shuffle partitions (default: 2 x cores), no web UI, and
  ``driver_memory`` (which is also the executors' memory in local mode). Every
  ``conf`` entry is applied last and wins. Adaptive query execution is on (with
  partition coalescing) on every master.
* Logs: with ``quiet`` (the default) a driver JVM started here gets a log4j2
  configuration (:data:`QUIET_LOG4J2`, through ``-Dlog4j2.configurationFile``) that
  prints only errors, and the session's level is ERROR; ``quiet=False`` (``--verbose``)
  keeps Spark's own configuration at WARN. A ``spark.driver.extraJavaOptions`` of the
  user's (``--conf``) is kept, with the quiet set-up added unless it names a log4j
  configuration itself. The JVM's own start-up notes (e.g. "Using
  incubator modules") are not log4j output and still appear.
* ``jit``: JIT compiler options (:func:`jit_for`: :data:`QUICK_JIT` for a short local
  run, only the JVM's quick C1 compiler; :data:`PATIENT_JIT` for a long one, C2 only for
  the hottest code) for a driver JVM started here on a local master. They come first in
  ``spark.driver.extraJavaOptions``, so a user's own ``-XX`` option of the same name wins.
* On a non-local master the kwsniff package is zipped and shipped to the executors
  (``addPyFile``), so workers need only Python and kwsniff's own dependencies
  (cramjam, lz4, zstandard, crc32c for ``spark-decode``; nothing extra for ``analyze``).
* Spark failing to start (no Java, bad master URL) raises
  :class:`~kwsniff.errors.UserError` with Spark's reason in one line.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kwsniff.errors import UserError

DEFAULT_MASTER = "local[*]"
DEFAULT_LOCAL_DRIVER_MEMORY = "4g"
QUIET_LOG4J2 = """\
# kwsniff: Spark's log lines go to standard error, errors only (--verbose: Spark's own).
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
# the level Spark gives an interactive (PySpark) driver: configured, so Spark neither
# lowers it to WARN nor prints "Setting default log level"
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


def quiet_log4j2_file() -> str:
    """A file holding :data:`QUIET_LOG4J2` (written once per process)."""
    global _QUIET_FILE
    if _QUIET_FILE is None or not os.path.exists(_QUIET_FILE):
        fd, path = tempfile.mkstemp(prefix="kwsniff-log4j2-", suffix=".properties")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(QUIET_LOG4J2)
        _QUIET_FILE = path
    return _QUIET_FILE


_QUIET_FILE: str | None = None


def driver_java_options(user: str, quiet: str, jit: str = "") -> str:
    """The driver JVM options for a user's ``spark.driver.extraJavaOptions`` when kwsniff
    also wants its quiet log set-up (``quiet``) and/or its JIT option (``jit``, may be
    empty): ``jit`` first (the JVM takes the last of repeated ``-XX`` options, so the
    user's win), then the user's, then ``quiet`` unless the user names a log4j2
    configuration of their own (theirs wins)."""
    if "log4j2.configurationFile" in user or "log4j.configuration" in user:
        quiet = ""
    return " ".join(part for part in (jit.strip(), user.strip(), quiet.strip()) if part)


def is_local_master(master: str | None) -> bool:
    return master is None or master == "local" or master.startswith("local[") \
        or master.startswith("local-cluster[")


def _under_spark_submit() -> bool:
    # spark-submit starts the JVM first and hands Python the gateway's port.
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _local_cores(master: str) -> int:
    inner = master[master.find("[") + 1:master.find("]")] if "[" in master else "1"
    if inner.split(",")[0] == "*":
        return os.cpu_count() or 1
    try:
        return max(1, int(inner.split(",")[0]))
    except ValueError:
        return os.cpu_count() or 1


#: The driver JVM options of a short local run: no C2 (optimizing) JIT compiler. Measured
#: on the 109-exchange sample (analyze, 2 cores): the C2 compiler thread alone took 20 s
#: of CPU, about a quarter of the run's; without it the run used 20-30 % less CPU.
#: With C1 alone the JVM reserves only a 48 MB code cache (a client VM's); Spark's
#: generated classes filled it on 100,000 exchanges ("CodeCache is full. Compiler has
#: been disabled", then a fatal "Out of space in CodeCache" that failed the run), so
#: the code cache keeps the size it has with both compilers (240 MB, reserved, not
#: committed until used).
QUICK_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
#: Local input size up to which :func:`jit_for` picks QUICK_JIT. On 1,000,000 exchanges
#: (1.4 GB) C2 pays for itself: without it the tasks took 60 % more CPU.
QUICK_JIT_BYTES = 256 << 20
#: The driver JVM options of a longer local run: C2 compiles a method only after 10x its
#: default invocation counts (loops still by their back-edge counts). On 1,000,000
#: exchanges the C2 thread took 56-57 s of CPU instead of 71-76 s, the tasks no more.
PATIENT_JIT = ("-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
               "-XX:Tier4CompileThreshold=60000")


def jit_for(input_bytes: int | None, master: str | None) -> str:
    """The JIT options for a run over ``input_bytes`` of local input on ``master``: on a
    local master (the tasks run in the driver JVM) with a JVM started here (not under
    spark-submit) and input of a known size, QUICK_JIT up to QUICK_JIT_BYTES, else
    PATIENT_JIT; otherwise none (``""``)."""
    if input_bytes is None or not is_local_master(master) or _under_spark_submit():
        return ""
    return QUICK_JIT if input_bytes <= QUICK_JIT_BYTES else PATIENT_JIT


#: Input bytes per shuffle partition when sizing them to the data (local mode).
BYTES_PER_PARTITION = 64 << 20


def partitions_for(input_bytes: int | None, master: str | None) -> int | None:
    """Shuffle partitions for ``input_bytes`` of input on a local master: one per
    BYTES_PER_PARTITION, at least 1, at most 2 x cores (None: not local, or size
    unknown — Spark's/kwsniff's default applies)."""
    if input_bytes is None or not is_local_master(master) \
            or (master is None and _under_spark_submit()):
        return None
    cores = _local_cores(master or DEFAULT_MASTER)
    return max(1, min(2 * cores, -(-input_bytes // BYTES_PER_PARTITION)))


def spark_session(master: str | None = None, app_name: str = "kwsniff", *,
                  conf: dict[str, str] | None = None, shuffle_partitions: int | None = None,
                  driver_memory: str | None = None, quiet: bool = True,
                  jit: str = "") -> Any:
    """The SparkSession to run on (see the module contract)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name)
    chosen = master
    if chosen is None and not _under_spark_submit():
        chosen = DEFAULT_MASTER
    if chosen is not None:
        builder = builder.master(chosen)
    effective = chosen
    local = is_local_master(effective) if effective is not None else False
    if effective is None:
        # spark-submit decided; ask its configuration.
        from pyspark import SparkConf
        effective = SparkConf().get("spark.master", DEFAULT_MASTER)
        local = is_local_master(effective)
    settings: dict[str, str] = {"spark.sql.session.timeZone": "UTC",
                                "spark.sql.adaptive.enabled": "true",
                                "spark.sql.adaptive.coalescePartitions.enabled": "true"}
    quiet_opt = f"-Dlog4j2.configurationFile=file:{quiet_log4j2_file()}" \
        if quiet and not _under_spark_submit() else ""
    jit_opt = jit if local and not _under_spark_submit() else ""
    if quiet_opt or jit_opt:
        settings["spark.driver.extraJavaOptions"] = driver_java_options("", quiet_opt, jit_opt)
        if conf and "spark.driver.extraJavaOptions" in conf:
            conf = dict(conf)       # the user's options, and kwsniff's with them
            conf["spark.driver.extraJavaOptions"] = driver_java_options(
                conf["spark.driver.extraJavaOptions"], quiet_opt, jit_opt)
    if local:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings.update({
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": str(shuffle_partitions
                                                or 2 * _local_cores(effective)),
        })
        if not _under_spark_submit():
            settings["spark.driver.memory"] = driver_memory or DEFAULT_LOCAL_DRIVER_MEMORY
    elif shuffle_partitions:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    if driver_memory and not local:
        settings["spark.driver.memory"] = driver_memory
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as err:  # noqa: BLE001 - Py4J/launcher errors have many types
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"cannot start Spark (master {effective}): {first}; Spark needs "
                        "Java 17 or later (JAVA_HOME or java on PATH)") from None
    spark.sparkContext.setLogLevel("ERROR" if quiet else "WARN")
    if not local:
        ship_package(spark)
    return spark


def package_zip(directory: str | os.PathLike[str] | None = None) -> Path:
    """Zip the ``kwsniff`` package (sources and data files, no caches) for executors."""
    root = Path(__file__).resolve().parent.parent
    target_dir = Path(directory) if directory is not None else Path(tempfile.mkdtemp(
        prefix="kwsniff-pyfiles-"))
    target = target_dir / "kwsniff.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            zf.write(path, Path("kwsniff") / path.relative_to(root))
    return target


def ship_package(spark: Any) -> None:
    """Make ``import kwsniff`` work on the executors of a cluster."""
    spark.sparkContext.addPyFile(str(package_zip()))


@contextmanager
def session_scope(master: str | None = None, app_name: str = "kwsniff", **kwargs: Any
                  ) -> Iterator[Any]:
    """:func:`spark_session` for the duration of a command; a session this call started
    is stopped at the end, an already active one is left running."""
    from pyspark.sql import SparkSession

    existed = SparkSession.getActiveSession() is not None
    spark = spark_session(master, app_name, **kwargs)
    try:
        yield spark
    finally:
        if not existed:
            spark.stop()
