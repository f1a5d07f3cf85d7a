"""Reading exports into the DataFrames the analyses use.

Contract:

* :func:`load_exports` reads JSON Lines exports (``kwsniff export``; plain or
  compressed, files or directories of files) and Parquet exchange tables
  (``kwsniff spark-decode`` output directories, or Parquet written with the export
  schema) with the explicit schemas of :mod:`kwsniff.spark.schema`, in **one** scan,
  and returns an :class:`Exports`:

  * ``exchanges`` — one row per exchange line (columns of :data:`EXCHANGE_COLUMNS`;
    ``source`` and ``run`` say which capture the exchange belongs to — one clock, one
    offset space: the file (JSON Lines) or directory (Parquet; the ``spark-decode``
    output for its ``exchanges`` table) it was read from, and its ``capture``);
    ``request``/``response`` keep their JSON text only for the APIs the analyses parse
    (:data:`BODY_APIS`; responses also when they carry error codes; others are null to
    keep the cache small);
  * ``records`` — one row per ``record`` line (:data:`RECORD_COLUMNS`), empty unless
    the export was written with ``--records``;
  * ``rejected`` — counts of lines that were skipped, by reason (not JSON, not a
    ``kwsniff.exchange/1`` line, a ``kind`` other than exchange/record/summary, an
    exchange without ``ts``/``index``).

  Both frames are persisted (memory, spilling to disk), as is anything jobs share
  through :meth:`Exports.derived` (a local checkpoint on a local master); call
  :meth:`Exports.release` at the end.
* Missing local inputs raise :class:`~kwsniff.errors.UserError` before Spark reads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kwsniff.errors import UserError
from kwsniff.spark.schema import SCHEMA_ID, exchange_schema, line_schema
from kwsniff.spark.session import is_local_master
from kwsniff.spark.views import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    CONSUMER_GROUP_HEARTBEAT,
    END_TXN,
    FETCH,
    HEARTBEAT,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_OFFSETS,
    OFFSET_COMMIT,
    PRODUCE,
    SYNC_GROUP,
    TXN_OFFSET_COMMIT,
)

CORRUPT = "_corrupt_record"

#: OffsetFetch (its group id tells the insights which group a connection serves)
OFFSET_FETCH = 9
#: APIs whose bodies some analysis parses (modern protocol).
BODY_APIS = (PRODUCE, FETCH, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT,
             LEAVE_GROUP, SYNC_GROUP, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN,
             ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT, CONSUMER_GROUP_HEARTBEAT)
#: Kafka 0.7 request types whose bodies are parsed (PRODUCE, FETCH, MULTIFETCH, MULTIPRODUCE).
BODY_APIS_07 = (0, 1, 2, 3)

EXCHANGE_COLUMNS = (
    "capture", "index", "stream", "client", "broker", "ts", "response_ts", "latency_ms",
    "api_key", "api_name", "api_version", "correlation_id", "client_id", "status",
    "request", "response", "topics", "error_codes", "error_names", "record_count",
    "request_bytes", "response_bytes", "protocol", "partitions", "groups", "problem_count",
    "source", "run",
)
RECORD_COLUMNS = (
    "capture", "exchange", "api_key", "side", "topic", "partition", "offset", "timestamp",
    "producer_id", "producer_epoch", "sequence", "transactional", "control_type",
    "batch_index", "record_index",
)

PARQUET = "parquet"
JSONL = "jsonl"
FORMATS = ("auto", JSONL, PARQUET)


@dataclass
class Exports:
    """What :func:`load_exports` read (see the module contract)."""

    exchanges: DataFrame
    records: DataFrame
    rejected: dict[str, int] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    record_lines: int = 0
    lines: int = 0
    _persisted: list[DataFrame] = field(default_factory=list)
    _derived: dict[str, DataFrame] = field(default_factory=dict)

    def derived(self, name: str, build: Callable[[Exports], DataFrame]) -> DataFrame:
        """``build(self)``, shared by every job that asks for ``name``. On a local master
        it is a local checkpoint (computed once, at its first use, and kept in memory,
        spilling to disk): the frame has no lineage, so plans built on it start from its
        rows and the (often wide) plan of ``build`` is planned once instead of again
        inside every table derived from it. On a cluster, where an executor that goes
        away would take checkpoint blocks with it, it is persisted instead."""
        df = self._derived.get(name)
        if df is None:
            df = build(self)
            df = df.localCheckpoint(eager=False) \
                if is_local_master(df.sparkSession.sparkContext.master) \
                else df.persist(StorageLevel.MEMORY_AND_DISK)
            self._derived[name] = df
            self._persisted.append(df)
        return df

    def release(self) -> None:
        for df in self._persisted:
            _release(df)
        self._persisted.clear()
        self._derived.clear()


def _release(df: DataFrame) -> None:
    """Unpersist ``df``; for a local checkpoint (:meth:`Exports.derived`), the blocks of
    its checkpointed RDD, which ``unpersist`` does not reach."""
    df.unpersist()
    plan = df._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def detect_format(path: str) -> str:
    """``parquet`` for Parquet files/directories (incl. spark-decode output), else ``jsonl``."""
    p = path.rstrip("/")
    if p.endswith(".parquet"):
        return PARQUET
    if _is_remote(p):
        return PARQUET if p.endswith("/exchanges") else JSONL
    local = _local(p)
    if os.path.isdir(local):
        if os.path.isdir(os.path.join(local, "exchanges")):
            return PARQUET
        names = os.listdir(local)
        if any(n.endswith(".parquet") for n in names):
            return PARQUET
    return JSONL


def parquet_path(path: str) -> str:
    """A spark-decode output directory reads as its ``exchanges`` table."""
    p = path.rstrip("/")
    if not _is_remote(p) and os.path.isdir(os.path.join(_local(p), "exchanges")):
        return p + "/exchanges"
    return p


def check_inputs(paths: list[str]) -> None:
    missing = [p for p in paths if not _is_remote(p) and not os.path.exists(_local(p))]
    if missing:
        raise UserError("no such export: " + ", ".join(missing))


def _body(col: str) -> Any:
    api = F.col("api_key")
    proto = F.col("protocol")
    keep = ((proto == "kafka") & api.isin(*BODY_APIS)) | \
        ((proto == "kafka-0.7") & api.isin(*BODY_APIS_07))
    if col == "response":
        # the error analysis locates error codes in any response that has some
        keep = keep | (F.size(F.col("error_codes")) > 0)
    return F.when(keep, F.col(col)).alias(col)


def _exchange_projection(columns: set[str], source: Any, run: Any) -> list[Any]:
    out = []
    for name in EXCHANGE_COLUMNS:
        if name == "source":
            out.append(source.alias(name))
        elif name == "run":
            out.append(run.alias(name))
        elif name in ("request", "response"):
            out.append(_body(name))
        elif name == "problem_count":
            out.append(F.coalesce(F.size("problems"), F.lit(0)).alias(name)
                       if "problems" in columns else F.lit(0).alias(name))
        else:
            out.append(F.col(name))
    return out


def _record_projection(columns: set[str]) -> list[Any]:
    out = []
    for name in RECORD_COLUMNS:
        if name == "control_type":
            out.append(F.get_json_object("control", "$.type").alias(name)
                       if "control" in columns else F.lit(None).cast("string").alias(name))
        elif name in ("capture", "api_key"):
            continue        # shared with the exchange columns
        elif name in columns:
            out.append(F.col(name).alias(f"r_{name}"))
        else:
            out.append(F.lit(None).alias(f"r_{name}"))
    return out


def _parquet_run() -> Any:
    """The directory a Parquet row was read from (``/exchanges`` stripped: the
    spark-decode output directory)."""
    directory = F.regexp_replace(F.input_file_name(), "/[^/]*$", "")
    return F.regexp_replace(directory, "/exchanges$", "")


def _corrupt_kind() -> Any:
    """Summary lines carry an integer ``problems`` where exchanges have an array, so the
    union schema flags them; they are summaries, not bad input."""
    raw = F.col(CORRUPT)
    return F.when((F.get_json_object(raw, "$.kind") == "summary")
                  & (F.get_json_object(raw, "$.schema") == SCHEMA_ID), F.lit("summary")) \
        .otherwise(F.lit("_invalid"))


def _split(base: DataFrame) -> tuple[DataFrame, DataFrame]:
    exchanges = base.filter((F.col("kind") == "exchange") & F.col("ts").isNotNull()
                            & F.col("index").isNotNull()).select(*EXCHANGE_COLUMNS)
    records = base.filter(F.col("kind") == "record").select(
        "capture", F.col("r_exchange").alias("exchange"), "api_key",
        *[F.col(f"r_{n}").alias(n) for n in RECORD_COLUMNS
          if n not in ("capture", "exchange", "api_key", "control_type")],
        "control_type")
    return exchanges, records


def load_exports(spark: SparkSession, paths: list[str], fmt: str = "auto",
                 storage: StorageLevel = StorageLevel.MEMORY_AND_DISK) -> Exports:
    """Read ``paths`` (see the module contract)."""
    check_inputs(paths)
    jsonl = [p for p in paths if (fmt if fmt != "auto" else detect_format(p)) == JSONL]
    parquet = [parquet_path(p) for p in paths
               if (fmt if fmt != "auto" else detect_format(p)) == PARQUET]
    parts: list[DataFrame] = []
    if jsonl:
        schema = T.StructType([*line_schema().fields, T.StructField(CORRUPT, T.StringType())])
        raw = (spark.read.schema(schema)
               .option("mode", "PERMISSIVE")
               .option("columnNameOfCorruptRecord", CORRUPT)
               .json(jsonl))
        cols = set(raw.columns)
        parts.append(raw.select(
            F.when(F.col(CORRUPT).isNotNull(), _corrupt_kind())
             .when(F.col("schema").isNull() | (F.col("schema") != SCHEMA_ID), F.lit("_foreign"))
             .otherwise(F.col("kind")).alias("kind"),
            *_exchange_projection(cols, F.input_file_name(), F.col("capture")),
            *_record_projection(cols)))
    if parquet:
        want = exchange_schema()
        raw = spark.read.parquet(*parquet)
        have = set(raw.columns)
        absent = [f.name for f in want.fields if f.name not in have and f.name != "problems"]
        if absent:
            raise UserError(f"{', '.join(parquet)}: not a kwsniff exchange table "
                            f"(no column {', '.join(absent[:5])})")
        typed = raw.select(*[F.col(f.name).cast(f.dataType).alias(f.name)
                             for f in want.fields if f.name in have])
        cols = set(typed.columns)
        parts.append(typed.select(F.lit("exchange").alias("kind"),
                                  *_exchange_projection(cols, _parquet_run(), F.col("capture")),
                                  *_record_projection(set())))
    base = parts[0]
    for extra in parts[1:]:
        base = base.unionByName(extra)
    # Rows sorted by kind and API inside each partition: the in-memory cache keeps
    # min/max statistics per batch, so the many per-API filters of the jobs skip most
    # batches instead of scanning every row.
    base = base.sortWithinPartitions("kind", "protocol", "api_key").persist(storage)
    # one action: the lines of every kind and the exchange lines without ts/index
    bad = (F.col("kind") == "exchange") & (F.col("ts").isNull() | F.col("index").isNull())
    by_kind = base.groupBy("kind").agg(F.count(F.lit(1)).alias("n"),
                                       F.sum(F.when(bad, 1).otherwise(0)).alias("bad")).collect()
    counts = {r["kind"]: r["n"] for r in by_kind}
    bad_exchanges = sum(r["bad"] or 0 for r in by_kind)
    exchanges, records = _split(base)
    unknown = sum(n for kind, n in counts.items()
                  if kind not in ("exchange", "record", "summary", "_invalid", "_foreign"))
    rejected = {
        "lines that are not JSON objects": counts.get("_invalid", 0),
        f"lines that are not {SCHEMA_ID}": counts.get("_foreign", 0),
        "lines of an unknown kind": unknown,
        "exchange lines without ts or index": bad_exchanges,
    }
    return Exports(exchanges, records, {k: v for k, v in rejected.items() if v},
                   list(paths), counts.get("record", 0), sum(counts.values()), [base])
