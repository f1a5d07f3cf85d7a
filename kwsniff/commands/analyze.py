"""Run the PySpark analysis jobs over JSON Lines exports.

Reads exports written by `kwsniff export` (JSON Lines, plain or compressed; with
--records the producer analysis also sees every batch's producer id) or the Parquet
output of `kwsniff spark-decode`, with the export's explicit schema, and computes:
latency percentiles per API/version, client id, broker and topic; throughput over time
per topic and partition; errors by code, API, topic and client; consumer groups
(membership, generations, rebalance durations, committed offsets, lag); producers
(producer ids, idempotent and transactional activity, transaction outcomes); the
client <-> broker <-> topic matrix. Tables go to OUT/parquet/ and OUT/csv/, a summary
is printed (and saved as OUT/summary.txt), charts go to OUT/charts/*.png and
OUT/report.html. Local Spark by default; --master sends the jobs to a cluster (see
docs/spark.md).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any

from kwsniff.errors import UserError

DEFAULT_OUT = "out/analysis"


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE: {text!r}")
    return key.strip(), value


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    """--master, --conf, --shuffle-partitions, --driver-memory (shared with spark-decode)."""
    group = parser.add_argument_group("spark")
    group.add_argument("--master", metavar="URL", default=None,
                       help="Spark master URL (default local[*]; under spark-submit the "
                            "master spark-submit was given)")
    group.add_argument("--conf", metavar="KEY=VALUE", type=_conf, action="append", default=[],
                       help="extra Spark configuration (repeatable)")
    group.add_argument("--shuffle-partitions", metavar="N", type=_positive_int, default=None,
                       help="spark.sql.shuffle.partitions (default in local mode: 2 x cores)")
    group.add_argument("--driver-memory", metavar="SIZE", default=None,
                       help="driver memory when Spark is started here, e.g. 8g (local mode "
                            "default 4g; in local mode the driver also runs the tasks)")
    group.add_argument("--verbose", action="store_true",
                       help="show the JVM's and Spark's warnings (default: errors only)")


def session_options(args: argparse.Namespace) -> dict[str, object]:
    return {"conf": dict(args.conf), "shuffle_partitions": args.shuffle_partitions,
            "driver_memory": args.driver_memory, "quiet": not args.verbose}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("exports", metavar="EXPORT", nargs="+",
                        help="JSON Lines export (file or directory), or a spark-decode "
                             "output directory / Parquet table")
    parser.add_argument("-o", "--out", metavar="DIR", default=DEFAULT_OUT,
                        help=f"output directory or URI (default {DEFAULT_OUT})")
    parser.add_argument("--bucket", metavar="SECONDS", type=_positive_float, default=1.0,
                        help="time bucket of the throughput tables (default 1)")
    parser.add_argument("--format", choices=("auto", "jsonl", "parquet"), default="auto",
                        help="input format (default: by file name / directory content)")
    parser.add_argument("--charts", choices=("png", "html", "both", "none"), default="both",
                        help="charts as PNG files, a self-contained HTML report, both "
                             "(default) or none")
    parser.add_argument("--report-dir", metavar="DIR", default=None,
                        help="local directory for summary.txt, charts and report.html when "
                             "--out is a remote URI (hdfs://, s3a://, ...)")
    parser.add_argument("--top", metavar="N", type=_positive_int, default=10,
                        help="rows per table in the printed summary (default 10)")
    parser.add_argument("--accuracy", metavar="N", type=_positive_int, default=10_000,
                        help="percentile accuracy: rank error about 1/N (default 10000)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="do not print the summary (it is still written to OUT)")
    add_spark_arguments(parser)


def _preload_charts() -> None:
    """Import the chart module (matplotlib: most of a second of one core) in a background
    thread, while the JVM starts; drawing later finds it imported. An import error is
    left for the drawing step to raise."""
    def load() -> None:
        try:
            import kwsniff.spark.charts  # noqa: F401
        except Exception:  # noqa: BLE001 - raised again, in order, when charts are drawn
            pass
    threading.Thread(target=load, name="kwsniff-import-charts", daemon=True).start()


def run(args: argparse.Namespace) -> int:
    from kwsniff.spark.input_check import check_exports, local_input_bytes

    # Before PySpark is imported and the JVM started: a wrong input costs one line.
    check_exports(args.exports, args.format)
    if args.out in ("", "-"):
        raise UserError("--out needs a directory")
    from kwsniff.spark.analyze import run_analysis
    from kwsniff.spark.jobs import AnalysisOptions
    from kwsniff.spark.progress import Progress
    from kwsniff.spark.session import jit_for, partitions_for, session_scope

    options = AnalysisOptions(bucket=args.bucket, accuracy=args.accuracy)
    started = time.monotonic()
    settings = session_options(args)
    size = local_input_bytes(args.exports)
    if settings["shuffle_partitions"] is None \
            and "spark.sql.shuffle.partitions" not in settings["conf"]:
        # small inputs, few partitions: each one is a task per stage of every job
        settings["shuffle_partitions"] = partitions_for(size, args.master)
    # the JIT compilers' options for a short or a long local run
    settings["jit"] = jit_for(size, args.master)
    if args.charts != "none":
        _preload_charts()
    print("starting Spark ...", file=sys.stderr, flush=True)
    from pyspark.sql import SparkSession

    # a session of the caller (in-process runs) is left running; one started here is
    # stopped while the charts are drawn (run_analysis's spark_done), else at the end
    owned = SparkSession.getActiveSession() is None
    released: list[threading.Thread | None] = []

    def spark_done(result: Any) -> None:
        result.release()
        stopper = threading.Thread(target=spark.stop, name="kwsniff-stop-spark") \
            if owned else None
        if stopper is not None:
            stopper.start()
        released.append(stopper)

    with session_scope(args.master, "kwsniff analyze", **settings) as spark:
        print(f"Spark started in {time.monotonic() - started:.1f} s", file=sys.stderr,
              flush=True)
        try:
            result = run_analysis(spark, list(args.exports), args.out, options, fmt=args.format,
                                  charts=args.charts, top=args.top, report_dir=args.report_dir,
                                  progress=Progress(0), spark_done=spark_done)
        except UserError:
            _join(released)
            raise
        except Exception as err:  # noqa: BLE001 - Spark errors: report their first line
            _join(released)
            if type(err).__name__ in ("AnalysisException", "PySparkException",
                                      "Py4JJavaError", "SparkRuntimeException"):
                first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                raise UserError(f"Spark job failed: {first}") from None
            raise
        try:
            if not args.quiet:
                sys.stdout.write(result.summary)
                sys.stdout.flush()
            n = result.counts.get("exchanges", 0)
            print(f"analyzed {n} exchange{'s' if n != 1 else ''} from "
                  f"{len(args.exports)} export{'s' if len(args.exports) != 1 else ''} in "
                  f"{time.monotonic() - started:.1f} s; {len(result.written)} tables in "
                  f"{args.out}/parquet and {args.out}/csv"
                  + (f", {len(result.charts)} charts" if result.charts else ""),
                  file=sys.stderr)
            for reason, count in result.counts.get("rejected", {}).items():
                print(f"skipped {count} {reason}", file=sys.stderr)
        finally:
            if not released:
                result.release()
            _join(released)
    return 0


def _join(released: list[threading.Thread | None]) -> None:
    """Wait for the Spark stop :func:`run`'s ``spark_done`` started, if it did."""
    if released and released[0] is not None:
        released[0].join()
