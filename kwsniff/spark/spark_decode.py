"""``kwsniff spark-decode``: decode many capture files in parallel into a Parquet table.

Pipeline (:func:`run_spark_decode`):

1. **Survey** (one task per file): packet counts and first timestamps; files are put in
   capture order and numbered as one concatenated capture (``mergecap -a`` order:
   :mod:`kwsniff.spark.capture_files`).
2. **Read** (one task per file): link/IP/TCP headers are parsed on the executors and
   every TCP segment is keyed by its direction-independent 4-tuple.
3. **Shuffle**: segments are partitioned by 4-tuple and sorted by ``(4-tuple, time,
   frame)``, so each TCP connection — even one that a rotated capture (``tcpdump -C/-G``)
   split over several files — arrives whole and in order at one task.
4. **Decode** (:mod:`kwsniff.spark.connection_decoder`): one engine per 4-tuple, the
   same decoding as ``kwsniff export``; an exchange spanning two files is decoded once.
5. **Number**: ``stream`` is the rank of the connection's first frame among all TCP
   connections and ``index`` the rank of the exchange's first byte — what a single run
   over the concatenated files gives; topic ids named on other connections are resolved
   (:mod:`kwsniff.spark.topic_fixup`).
6. **Write** ``OUT/exchanges/`` (Parquet with the export's exchange schema, in index
   order), ``OUT/captures/`` (one row per input file: ``capture, position, rank,
   packets, first_frame, last_frame, first_ts, last_ts, problems, error``; global frame
   ``F`` of a file is its local frame ``F - first_frame + 1``) and, on a local ``OUT``,
   ``OUT/run.json`` (the counters below).

``capture`` of an exchange is the file holding the first byte of its first message;
``request_frames``/``response_frames`` are global frame numbers. The driver holds one
integer per TCP connection (stream numbering) and the topic-id table; everything else
stays distributed.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import zlib
from array import array
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import SparkSession

from kwsniff.engine import EngineOptions
from kwsniff.errors import UserError
from kwsniff.spark.capture_files import (
    CaptureFile,
    FrameMap,
    number_files,
    read_segments,
    survey,
)
from kwsniff.spark.connection_decoder import FIELDS, POS, decode_sorted
from kwsniff.spark.output import is_remote, local_path
from kwsniff.spark.schema import exchange_schema
from kwsniff.spark.topic_fixup import resolve_row

MAX_PROBLEMS = 1000
_CONNECTION = re.compile(r"\bconnection (\d+)\b")


@dataclass
class DecodeResult:
    """Counters of one run (also written to ``OUT/run.json``)."""

    files: list[CaptureFile]
    exchanges: int = 0
    tcp_connections: int = 0
    kafka_connections: int = 0
    segments: int = 0
    skipped_bytes: int = 0
    gap_bytes: int = 0
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    topic_ids: int = 0

    @property
    def packets(self) -> int:
        return sum(f.packets for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {"captures": [f.as_row() for f in self.files], "packets": self.packets,
                "tcp_segments": self.segments, "tcp_connections": self.tcp_connections,
                "kafka_connections": self.kafka_connections, "exchanges": self.exchanges,
                "skipped_bytes": self.skipped_bytes, "gap_bytes": self.gap_bytes,
                "problems": self.problem_count, "problem_messages": list(self.problems),
                "topic_ids_learned": self.topic_ids}


def expand_inputs(paths: list[str]) -> list[str]:
    """Directories become their regular, non-hidden files (sorted); files stay."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            names = sorted(n for n in os.listdir(p) if not n.startswith("."))
            out.extend(os.path.join(p, n) for n in names if os.path.isfile(os.path.join(p, n)))
        else:
            out.append(p)
    return out


def _partition_of(key: tuple[bytes, float, int]) -> int:
    return zlib.crc32(key[0])


def _rewrite(text: str, connections: list[int], streams: array) -> str:
    """``connection N`` (N-th of its 4-tuple) -> the global stream number."""
    if not connections:
        return text

    def sub(m: re.Match[str]) -> str:
        n = int(m.group(1))
        if n < len(connections):
            return f"connection {bisect.bisect_left(streams, connections[n])}"
        return m.group(0)
    return _CONNECTION.sub(sub, text)


def run_spark_decode(spark: SparkSession, paths: list[str], out: str,
                     options: EngineOptions | None = None, partitions: int | None = None
                     ) -> DecodeResult:
    """Decode ``paths`` into ``out`` (see the module contract)."""
    engine_options = options or EngineOptions()
    sc = spark.sparkContext
    inputs = expand_inputs(paths)
    if not inputs:
        raise UserError("no capture files given")
    missing = [p for p in inputs if not os.path.exists(p)]
    if missing:
        raise UserError("no such capture: " + ", ".join(missing))
    surveyed = sc.parallelize(list(enumerate(inputs)), len(inputs)) \
        .map(lambda item: survey(item[0], item[1])).collect()
    files = number_files(sorted(surveyed, key=lambda f: f.position))
    readable = [f for f in files if f.rank >= 0]
    if not readable:
        raise UserError("no readable capture: " + "; ".join(f.error or f.path for f in files))
    result = DecodeResult(files)
    tcp = engine_options.tcp
    n = partitions or max(2 * sc.defaultParallelism, len(readable))
    frame_files = sc.broadcast(readable)

    def capture_lookup() -> Any:
        return FrameMap(list(frame_files.value)).capture_of

    segments = sc.parallelize(readable, len(readable)) \
        .flatMap(lambda f: read_segments(f, tcp))
    shuffled = segments.repartitionAndSortWithinPartitions(n, partitionFunc=_partition_of)
    decoded = shuffled.mapPartitions(
        lambda items: decode_sorted(items, engine_options, capture_lookup())) \
        .persist(StorageLevel.MEMORY_AND_DISK)
    try:
        meta = decoded.filter(lambda r: r[0] != "X").collect()
        firsts = sorted({r[1] for r in meta if r[0] == "C"})
        streams = array("q", firsts)
        names: dict[str, tuple[str, int]] = {}
        for r in meta:
            if r[0] == "T":
                known = names.get(r[1])
                if known is None or r[3] < known[1]:
                    names[r[1]] = (r[2], r[3])
            elif r[0] == "S":
                s = r[1]
                result.segments += s["segments"]
                result.exchanges += s["exchanges"]
                result.kafka_connections += s["kafka_connections"]
                result.skipped_bytes += s["skipped_bytes"]
                result.gap_bytes += s["gap_bytes"]
                result.problem_count += s["problems"] + s["exchange_problems"]
            elif r[0] == "P":
                if not r[2]:
                    result.problem_count += 1       # file-level: not counted per key
                if len(result.problems) < MAX_PROBLEMS:
                    result.problems.append(_rewrite(r[1], r[2], streams))
        result.tcp_connections = len(streams)
        result.topic_ids = len(names)
        for f in files:
            result.problem_count += len(f.problems) + (1 if f.error else 0)
        b_streams = sc.broadcast(streams)
        b_names = sc.broadcast(names)
        stream_at = POS["stream"]

        def finish(record: tuple) -> tuple:
            _, order, conn_first, values, fix = record
            values[stream_at] = bisect.bisect_left(b_streams.value, conn_first)
            if fix:
                resolve_row(values, fix, POS, b_names.value)
            return order, values

        index_at = POS["index"]

        def numbered(pair: tuple) -> tuple:
            (_, values), i = pair
            values[index_at] = i + 1
            return tuple(values)

        rows = (decoded.filter(lambda r: r[0] == "X").map(finish)
                .sortBy(lambda r: r[0], numPartitions=n)
                .zipWithIndex().map(numbered))
        df = spark.createDataFrame(rows, exchange_schema())
        root = out.rstrip("/")
        df.write.mode("overwrite").parquet(f"{root}/exchanges")
        spark.createDataFrame([f.as_row() for f in files], _captures_schema()) \
            .coalesce(1).write.mode("overwrite").parquet(f"{root}/captures")
        if not is_remote(out):
            with open(os.path.join(local_path(out), "run.json"), "w", encoding="utf-8") as fh:
                json.dump(result.to_dict(), fh, indent=1)
                fh.write("\n")
    finally:
        decoded.unpersist()
    return result


def _captures_schema() -> Any:
    from pyspark.sql import types as T
    return T.StructType([
        T.StructField("capture", T.StringType()), T.StructField("position", T.LongType()),
        T.StructField("rank", T.LongType()), T.StructField("packets", T.LongType()),
        T.StructField("first_frame", T.LongType()), T.StructField("last_frame", T.LongType()),
        T.StructField("first_ts", T.DoubleType()), T.StructField("last_ts", T.DoubleType()),
        T.StructField("problems", T.ArrayType(T.StringType())),
        T.StructField("error", T.StringType()),
    ])


__all__ = ["FIELDS", "DecodeResult", "expand_inputs", "run_spark_decode"]
