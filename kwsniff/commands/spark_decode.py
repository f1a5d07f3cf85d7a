"""Decode many capture files in parallel on Spark and write exchanges as Parquet.

The captures (files, or directories of them) are read on the executors, their TCP
segments grouped by connection across files (rotated captures from tcpdump -C/-G split
connections), each connection decoded once, and the exchanges written to
OUT/exchanges/ with the export's schema (docs/export-schema.md); OUT/captures/ maps
the global frame numbers back to files. `kwsniff analyze OUT` reads the result. See
docs/spark.md.
"""

from __future__ import annotations

import argparse
import sys
import time

from kwsniff.commands.analyze import _positive_int, add_spark_arguments, session_options
from kwsniff.commands.decode import add_decoding_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("captures", metavar="CAPTURE", nargs="+",
                        help="pcap/pcapng files (optionally compressed) or directories of "
                             "them; rotated files of one capture can be given in any order")
    parser.add_argument("-o", "--out", metavar="DIR", required=True,
                        help="output directory or URI (exchanges/, captures/, run.json)")
    add_decoding_arguments(parser)
    parser.add_argument("--partitions", metavar="N", type=_positive_int, default=None,
                        help="shuffle partitions for the per-connection decode "
                             "(default: 2 x Spark's parallelism, at least one per file)")
    add_spark_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kwsniff.commands.decode import engine_options
    from kwsniff.spark.input_check import check_captures

    check_captures(args.captures)       # before the JVM starts
    from kwsniff.spark.session import session_scope
    from kwsniff.spark.spark_decode import run_spark_decode

    options = engine_options(args)
    started = time.monotonic()
    with session_scope(args.master, "kwsniff spark-decode", **session_options(args)) as spark:
        result = run_spark_decode(spark, list(args.captures), args.out, options,
                                  args.partitions)
    err = sys.stderr
    for f in result.files:
        if f.error:
            print(f"capture: {f.error} (skipped)", file=err)
        for problem in f.problems:
            print(f"capture: {f.path}: {problem}", file=err)
    for problem in result.problems:
        print(f"problem: {problem}", file=err)
    readable = sum(1 for f in result.files if f.rank >= 0)
    print(f"{result.exchanges} exchanges in {result.kafka_connections} Kafka connections "
          f"({result.tcp_connections} TCP), {result.packets} packets from {readable} "
          f"capture file{'s' if readable != 1 else ''}; {result.problem_count} problems; "
          f"{result.skipped_bytes} bytes skipped; {result.gap_bytes} bytes lost in gaps; "
          f"{time.monotonic() - started:.1f} s -> {args.out}/exchanges", file=err)
    return 0
