"""``kwsniff analyze``: run every analysis job, write the tables, summary and charts.

Contract: :func:`run_analysis` reads the exports (:func:`kwsniff.spark.load.load_exports`),
computes the tables of every job in :data:`JOBS` (the jobs run side by side, one driver
thread each; a table is persisted when Spark reads it more than once), and with
``out`` set writes them (:mod:`kwsniff.spark.output`), the text summary
(``OUT/summary.txt``), PNG charts (``OUT/charts/*.png``) and a self-contained HTML
report (``OUT/report.html``) per ``charts`` (``png``, ``html``, ``both`` or ``none``).
It returns an :class:`AnalysisResult`; its ``tables`` stay usable until
:meth:`AnalysisResult.release`. Charts and the HTML report need a local ``out`` (the
driver draws them); with a remote ``out`` they go to ``report_dir`` when given.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import math
import os
import shutil
import textwrap
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kwsniff.spark import driver_agg, output
from kwsniff.spark.jobs import (
    AnalysisOptions,
    errors,
    groups,
    insights,
    latency,
    matrix,
    producers,
    traffic,
)
from kwsniff.spark.load import Exports, load_exports
from kwsniff.spark.progress import Progress
from kwsniff.spark.tables import SORT_SCRIPT, html_table, text_table

JOBS = (latency, traffic, errors, groups, producers, matrix, insights)
CHART_MODES = ("png", "html", "both", "none")
MAX_POINTS = 600          # time-series points per chart line
WRITERS = 4               # tables written concurrently
HTML_ROWS = 5000          # rows per table in report.html (the printed summary shows --top)
TOP_SERIES = 8            # lines per time-series chart
E2E_PERCENTILES = (0.5, 0.9, 0.99)  # lines of the end-to-end latency chart


@dataclass
class Section:
    """One summary table: ``rows`` are the first rows of the table (up to HTML_ROWS: the
    HTML report shows them all), ``total`` its row count, ``top`` how many the text
    summary prints."""

    title: str
    columns: list[str]
    rows: list[tuple[Any, ...]]
    total: int
    top: int | None = None


@dataclass
class AnalysisResult:
    tables: dict[str, DataFrame]
    sections: list[Section]
    summary: str
    counts: dict[str, Any]
    charts: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    exports: Exports | None = None

    def release(self) -> None:
        for df in self.tables.values():
            df.unpersist()
        if self.exports is not None:
            self.exports.release()


# ------------------------------------------------------------------------------ summary

#: A section's own order: per key the columns it sorts by (their sum when several) and
#: whether descending; Spark's null placement (first ascending, last descending).
Order = tuple[tuple[tuple[str, ...], bool], ...]


def _order(*keys: str | tuple[tuple[str, ...], bool]) -> Order:
    return tuple(((k,), False) if isinstance(k, str) else k for k in keys)


def _desc(*columns: str) -> tuple[tuple[str, ...], bool]:
    return (columns, True)


def _spark_order(df: DataFrame, order: Order) -> DataFrame:
    """``df`` ordered by ``order`` in Spark (:func:`driver_agg.sort_rows` on the driver)."""
    cols = []
    for columns, desc in order:
        expr = F.col(columns[0])
        for c in columns[1:]:
            expr = expr + F.col(c)
        cols.append(expr.desc() if desc else expr.asc())
    return df.orderBy(*cols)


SUMMARY: tuple[tuple[str, str, tuple[str, ...], Order | None], ...] = (
    ("Latency by API and version (paired exchanges, ms)", "latency_by_api",
     ("api_name", "api_version", "exchanges", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"),
     None),
    ("Latency by broker (ms)", "latency_by_broker",
     ("broker", "exchanges", "p50_ms", "p90_ms", "p99_ms", "max_ms"), None),
    ("Latency by client id (ms)", "latency_by_client",
     ("client_id", "exchanges", "p50_ms", "p90_ms", "p99_ms", "max_ms"), None),
    ("Latency by topic (ms)", "latency_by_topic",
     ("topic", "exchanges", "p50_ms", "p90_ms", "p99_ms", "max_ms"), None),
    ("Busiest partitions (whole capture)", "partition_totals",
     ("direction", "topic", "partition", "requests", "records", "bytes", "first_ts", "last_ts"),
     _order(_desc("bytes"), _desc("records"), "direction", "topic", "partition")),
    ("Errors by code", "errors_by_code",
     ("error_name", "error_code", "exchanges", "occurrences", "apis", "first_ts", "last_ts"),
     None),
    ("Errors by API, topic and client", "errors",
     ("error_name", "api_name", "topic", "client_id", "occurrences", "first_ts", "last_ts"),
     None),
    ("Consumer group generations (rebalances)", "group_generations",
     ("group_id", "generation", "members", "protocol", "join_start", "sync_end",
      "rebalance_ms"), None),
    ("Group membership events", "group_events",
     ("ts", "group_id", "event", "member_id", "generation", "error_name", "client_id"), None),
    ("Consumer lag at commit time", "consumer_lag_summary",
     ("group_id", "topic", "partition", "commits", "last_lag", "max_lag", "last_ts"), None),
    ("Producers (every client that sent Produce requests)", "producing_clients",
     ("client_id", "topics", "produce_requests", "records", "bytes", "batches", "acks",
      "codecs", "producer_ids", "epochs"), None),
    ("Producer ids (idempotent and transactional)", "producers",
     ("producer_id", "kind", "transactional_ids", "epochs", "client_ids", "produce_requests",
      "records", "commits", "aborts", "first_ts"), None),
    ("Transactions", "transactions_summary",
     ("transactional_id", "transactions", "committed", "aborted", "open", "mean_duration_ms",
      "max_duration_ms"), None),
    ("Client <-> broker", "client_broker",
     ("client_id", "client_host", "broker", "exchanges", "connections", "topics",
      "request_bytes", "response_bytes"), None),
    # insights (kwsniff.spark.jobs.insights): per capture, never joined across captures
    ("End-to-end latency per group, topic, partition (ms, Produce sent -> 1st delivery)",
     "e2e_latency",
     ("capture", "group", "topic", "partition", "batches", "records", "p50_ms", "p90_ms",
      "p99_ms", "max_ms"),
     _order("capture", "group", "topic", "partition")),
    ("Records produced in the capture but never seen fetched", "e2e_never_fetched",
     ("capture", "topic", "partition", "records"),
     _order(_desc("records"), "capture", "topic", "partition")),
    ("Consumer lag at the end of each capture (lag: high watermark - committed offset)",
     "lag_partitions",
     ("capture", "group", "topic", "partition", "high_watermark", "committed", "position",
      "lag", "position_lag", "max_lag", "commits"),
     _order(_desc("lag"), "capture", "group", "topic", "partition")),
    ("Rebalances (generations per group)", "rebalance_generations",
     ("capture", "group", "generation", "start_ts", "duration_ms", "protocol",
      "leader_client_id", "member_count", "trigger"),
     _order("capture", "group", "generation")),
    ("Producer health (idempotent and transactional producers)", "producer_health",
     ("capture", "producer_id", "client_id", "transactional_id", "batches", "retries",
      "out_of_order", "unanswered_requests", "written_twice", "error_count"),
     _order(_desc("retries", "out_of_order", "written_twice", "error_count"), "capture",
            "producer_id")),
)
INSIGHT_SECTIONS = ("e2e_latency", "e2e_never_fetched", "lag_partitions",
                    "rebalance_generations", "producer_health")
NO_INSIGHTS = ("none of the captures has exchanges the insights read (Produce, Fetch, "
               "ListOffsets, consumer-group or transaction requests with decoded bodies): "
               "the end-to-end latency, lag, rebalance and producer-health tables are empty")


def _overview(exports: Exports, tables: dict[str, DataFrame],
              collected_statuses: Any = None) -> tuple[Section, dict[str, Any]]:
    """The *Input* section and the run's counts; the statuses from
    ``collected_statuses`` (the ``statuses`` table already collected as Arrow: no Spark
    job) when given, else from the table."""
    ex = exports.exchanges
    row = ex.agg(F.count(F.lit(1)).alias("exchanges"), F.min("ts").alias("first_ts"),
                 F.max("ts").alias("last_ts"),
                 F.countDistinct("capture").alias("captures"),
                 F.countDistinct(F.struct("capture", "stream")).alias("connections"),
                 F.sum("problem_count").alias("problems")).collect()[0]
    records = exports.record_lines
    if collected_statuses is not None:
        status_rows = zip(collected_statuses.column("status").to_pylist(),
                          collected_statuses.column("exchanges").to_pylist())
    else:
        status_rows = ((r["status"], r["exchanges"]) for r in tables["statuses"].collect())
    statuses: dict[str, int] = {}
    for status, exchanges in status_rows:
        statuses[status] = statuses.get(status, 0) + exchanges
    counts = {"exchanges": row["exchanges"], "records": records, "captures": row["captures"],
              "connections": row["connections"], "first_ts": row["first_ts"],
              "last_ts": row["last_ts"], "problems": row["problems"] or 0,
              "statuses": statuses, "rejected": dict(exports.rejected)}
    rows: list[tuple[Any, ...]] = [
        ("exports", ", ".join(exports.inputs)),
        ("captures", row["captures"]), ("exchanges", row["exchanges"]),
        ("record lines", records), ("TCP connections", row["connections"]),
        ("first exchange", _utc(row["first_ts"])), ("last exchange", _utc(row["last_ts"])),
        ("decode problems", row["problems"] or 0),
    ]
    rows.extend((f"status {k}", v) for k, v in sorted(statuses.items()))
    rows.extend((f"skipped: {k}", v) for k, v in exports.rejected.items())
    return Section("Input", ["what", "value"], rows, len(rows)), counts


def _utc(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] \
        + " UTC"


def _section(spec: tuple[str, str, tuple[str, ...], Order | None],
             df: DataFrame, top: int) -> Section:
    """One summary table: its first max(top, HTML_ROWS) rows in one action (a count
    only when there are more)."""
    title, _name, columns, order = spec
    ordered = _spark_order(df, order) if order is not None else df
    limit = max(top, HTML_ROWS)
    rows = [tuple(r[c] for c in columns)
            for r in ordered.select(*columns).limit(limit + 1).collect()]
    total = len(rows) if len(rows) <= limit else df.count()
    return Section(title, list(columns), rows[:limit], total, top)


#: Column types whose Arrow values (``to_pylist``) equal the values of collected Rows.
_PLAIN_TYPES = (T.StringType, T.LongType, T.IntegerType, T.ShortType, T.ByteType,
                T.DoubleType, T.FloatType, T.BooleanType)


def _plain(dtype: T.DataType) -> bool:
    if isinstance(dtype, T.ArrayType):
        return _plain(dtype.elementType)
    return isinstance(dtype, _PLAIN_TYPES)


def _section_of(spec: tuple[str, str, tuple[str, ...], Order | None],
                df: DataFrame, table: Any, top: int) -> Section | None:
    """:func:`_section` from ``table``, the whole of ``df`` collected as Arrow (no Spark
    action; a section with its own order sorted on the driver); None when it shows or
    sorts by a column whose Arrow values differ from a Row's (structs, maps,
    timestamps), or when its order has ties (:func:`driver_agg.sort_rows`)."""
    title, _name, columns, order = spec
    types = {f.name: f.dataType for f in df.schema.fields}
    keys = [c for cols, _descending in order or () for c in cols]
    if not all(_plain(types[c]) for c in (*columns, *keys)):
        return None
    limit = max(top, HTML_ROWS)
    if order is None:
        rows = list(zip(*(table.column(c).slice(0, limit).to_pylist() for c in columns)))
    else:
        ordered = driver_agg.sort_rows(driver_agg.rows(table, (*columns, *keys)), order)
        if ordered is None:
            return None
        rows = [tuple(r[c] for c in columns) for r in ordered[:limit]]
    return Section(title, list(columns), rows, table.num_rows, top)


# ------------------------------------------------------------------------------- charts

def chart_step(span: float | None, bucket: float) -> float:
    """Seconds per chart point: ``bucket``, or a multiple of it keeping a line over
    ``span`` seconds (the whole capture) under MAX_POINTS points."""
    if not span or span <= 0:
        return bucket
    return max(bucket, math.ceil(span / MAX_POINTS / bucket) * bucket)


def _per(step: float) -> str:
    return f"{step:g} s" if step < 120 else f"{step / 60:g} min" if step < 7200 \
        else f"{step / 3600:g} h"


def _spark_agg(agg: driver_agg.Agg) -> Any:
    """The Spark aggregate of a :data:`driver_agg.Agg`."""
    kind, column = agg[0], agg[1]
    if kind == "pct":
        return F.percentile_approx(column, agg[2], agg[3])
    return {"sum": F.sum, "max": F.max, "count": F.count}[kind](column)


def _ranked(df: DataFrame, keys: list[str], key: str, epoch: str, step: float,
            **values: driver_agg.Agg) -> DataFrame:
    """The one Spark aggregation behind a chart: ``df`` aggregated per ``keys`` (the
    chart's panels, may be empty), ``key`` (its series) and per ``step`` seconds of
    ``epoch`` (column ``_x``), one column per keyword of ``values`` (name -> aggregate,
    :data:`driver_agg.Agg`), cut to the series that are among the top TOP_SERIES of at
    least one value column by total (nulls count nothing, ties by ``key``, a missing key
    last); column ``_r_<name>`` is that series' rank for ``<name>`` (:func:`_top_series`
    reads it). :func:`driver_agg.ranked` computes the same rows on the driver."""
    coarse = df.withColumn("_x", F.floor(F.col(epoch) / step) * step) \
        .groupBy(*keys, key, "_x").agg(*[_spark_agg(agg).alias(name)
                                         for name, agg in values.items()])
    totals = coarse.groupBy(*keys, key).agg(*[F.sum(name).alias(f"_t_{name}")
                                              for name in values])
    for name in values:
        order = Window.partitionBy(*keys).orderBy(F.desc(f"_t_{name}"),
                                                  F.col(key).asc_nulls_last())
        totals = totals.withColumn(f"_r_{name}", F.row_number().over(order))
    ranks = [f"_r_{name}" for name in values]
    best = F.least(*ranks) if len(ranks) > 1 else F.col(ranks[0])
    leaders = totals.filter(best <= TOP_SERIES).select(*keys, key, *ranks)
    # null-safe: a series without a name (a null key) keeps its line
    same = [F.col(f"c.{k}").eqNullSafe(F.col(f"l.{k}")) for k in (*keys, key)]
    return coarse.alias("c").join(F.broadcast(leaders.alias("l")), same) \
        .select("c.*", *[F.col(f"l.{r}") for r in ranks])


def _top_series(rows: list[Any], key: str, value: str,
                skip_null: bool = False) -> dict[str, tuple[list[float], list[float]]]:
    """The top series for ``value`` of collected :func:`_ranked` ``rows``, in rank order,
    each one's points ordered by ``_x``; a null ``value`` is drawn as 0, or left out with
    ``skip_null`` (a series with only nulls then has no line)."""
    rank = f"_r_{value}"
    chosen = sorted((r for r in rows if r[rank] <= TOP_SERIES
                     and not (skip_null and r[value] is None)),
                    key=lambda r: (r[rank], r["_x"]))
    out: dict[str, tuple[list[float], list[float]]] = {}
    for r in chosen:
        xs, ys = out.setdefault(str(r[key]), ([], []))
        xs.append(float(r["_x"]))
        ys.append(float(r[value] or 0))
    return out


def _split(rows: list[Any], column: str) -> dict[Any, list[Any]]:
    """Collected ``rows`` grouped by the value of ``column``."""
    out: dict[Any, list[Any]] = {}
    for r in rows:
        out.setdefault(r[column], []).append(r)
    return out


def _heatmap_pairs(pairs: DataFrame, clients: int, brokers: int) -> DataFrame:
    """``client_broker`` exchanges per client id and broker, cut to the rows of the top
    ``clients`` client ids or the top ``brokers`` brokers by exchanges (ties by name, a
    missing one first); ``_rc``/``_rb`` are their ranks (one Spark action to collect;
    :func:`driver_agg.heatmap_pairs` on the driver)."""
    cells = pairs.groupBy("client_id", "broker").agg(F.sum("exchanges").alias("exchanges"))
    out = cells.withColumn("_total", F.sum("exchanges").over(Window.partitionBy("client_id")))
    out = out.withColumn("_rc", F.dense_rank().over(
        Window.orderBy(F.desc("_total"), F.col("client_id").asc_nulls_first())))
    out = out.withColumn("_total", F.sum("exchanges").over(Window.partitionBy("broker")))
    out = out.withColumn("_rb", F.dense_rank().over(
        Window.orderBy(F.desc("_total"), F.col("broker").asc_nulls_first())))
    return out.filter((F.col("_rc") <= clients) | (F.col("_rb") <= brokers)).drop("_total")


def _leaders(cells: list[Any], column: str, rank: str, n: int) -> list[Any]:
    """The ``column`` values of the first ``n`` ranks (``rank``) of collected
    :func:`_heatmap_pairs` ``cells``, in rank order."""
    first = {r[rank]: r[column] for r in cells if r[rank] <= n}
    return [first[k] for k in sorted(first)]


#: The tables the charts read (:func:`_chart_data`). With a local ``out`` they are read
#: from their collected Arrow copies (persisted first only when the input is too big
#: for every table to be sure to be collected); the overview (:func:`_overview`) reads
#: ``statuses`` from its collected copy.
REREAD = frozenset({"throughput", "fetch_lag", "committed_offsets",
                    "client_broker", "e2e_deliveries", "lag_timeline", "latency_by_api",
                    "requests_over_time", "errors_by_code", "group_generations",
                    "transactions_summary"})


def _series_key(kind: str, r: dict[str, Any]) -> str:
    """A chart line's name, as the ``series`` columns of :func:`_chart_sources`."""
    c = driver_agg.concat
    if kind == "lag":
        client = r["client_id"] if r["client_id"] is not None else "-"
        return driver_agg.concat_ws(" ", client, c(r["topic"], "[", _str(r["partition"]), "]"))
    if kind == "commits":
        return driver_agg.concat_ws(" ", r["group_id"],
                                    c(r["topic"], "[", _str(r["partition"]), "]"))
    if kind == "e2e":
        return driver_agg.concat_ws(" ", r["group"], r["topic"])
    return driver_agg.concat_ws(" ", r["group"], c(r["topic"], "[", _str(r["partition"]), "]"))


def _str(value: Any) -> str | None:
    """Spark's cast of a long to string."""
    return None if value is None else str(value)


def _chart_sources(tables: dict[str, DataFrame]) -> dict[str, DataFrame]:
    """The frames the time-series charts aggregate, with their ``series`` columns."""
    return {
        "lag": tables["fetch_lag"].withColumn(
            "series", F.concat_ws(" ", F.coalesce("client_id", F.lit("-")),
                                  F.concat("topic", F.lit("["),
                                           F.col("partition").cast("string"), F.lit("]")))),
        "commits": tables["committed_offsets"].filter(F.col("error_name").isNull())
        .withColumn("series", F.concat_ws(" ", "group_id",
                                          F.concat("topic", F.lit("["),
                                                   F.col("partition").cast("string"),
                                                   F.lit("]")))),
        "e2e": tables["e2e_deliveries"].withColumn("series", F.concat_ws(" ", "group", "topic")),
        "lag_timeline": tables["lag_timeline"].withColumn(
            "series", F.concat_ws(" ", "group", F.concat("topic", F.lit("["),
                                                         F.col("partition").cast("string"),
                                                         F.lit("]")))),
    }


def _chart_queries(tables: dict[str, DataFrame], step: float,
                   accuracy: int) -> dict[str, tuple[str, Any, Any]]:
    """Per chart query: the table it reads, its Spark query (a callable returning the
    collected rows) and its driver-side twin (a callable taking the rows of the
    collected table, returning the same rows or None: :mod:`driver_agg`)."""
    src = _chart_sources(tables)
    e2e_values = {f"p{i}": ("pct", "latency_ms", p, accuracy)
                  for i, p in enumerate(E2E_PERCENTILES)}
    timeline_values = {"lag": ("max", "lag"), "position_lag": ("max", "position_lag")}

    def first(name: str, n: int) -> tuple[str, Any, Any]:
        return (name, lambda: tables[name].limit(n).collect(), lambda rows: rows[:n])

    def with_series(kind: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if kind == "commits":
            rows = [r for r in rows if r["error_name"] is None]
        for r in rows:
            r["series"] = _series_key(kind, r)
        return rows

    def generations(rows: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        ordered = driver_agg.sort_rows([r for r in rows if r["rebalance_ms"] is not None],
                                       _order("join_start"))
        return None if ordered is None else ordered[:30]

    def ranked(table: str, source: DataFrame, groups: list[str], key: str, epoch: str,
               values: dict[str, driver_agg.Agg], kind: str | None = None
               ) -> tuple[str, Any, Any]:
        """A ranked-series query, in Spark and on the driver (``kind``: the rows get
        their series key, :func:`_series_key`, before ranking)."""
        def local(rows: list[dict[str, Any]]) -> Any:
            if kind is not None:
                rows = with_series(kind, rows)
            return driver_agg.ranked(rows, groups, key, epoch, step, values, TOP_SERIES)
        return (table, lambda: _ranked(source, groups, key, epoch, step, **values).collect(),
                local)

    return {
        "latency": first("latency_by_api", 20),
        "requests": ranked("requests_over_time", tables["requests_over_time"], [], "api_name",
                           "bucket_epoch", {"_y": ("sum", "requests")}),
        "thr": ranked("throughput", tables["throughput"], ["direction"], "topic",
                      "bucket_epoch", {"_y": ("sum", "records")}),
        "errors": first("errors_by_code", 20),
        "lag": ranked("fetch_lag", src["lag"], [], "series", "bucket_epoch",
                      {"_y": ("max", "max_lag")}, "lag"),
        "commits": ranked("committed_offsets", src["commits"], [], "series", "ts",
                          {"_y": ("max", "committed_offset")}, "commits"),
        "generations": ("group_generations",
                        lambda: tables["group_generations"]
                        .filter(F.col("rebalance_ms").isNotNull()).orderBy("join_start")
                        .limit(30).collect(), generations),
        "transactions": first("transactions_summary", 30),
        "e2e": ranked("e2e_deliveries", src["e2e"], [], "series", "delivery_ts", e2e_values,
                      "e2e"),
        "lag_timeline": ranked("lag_timeline", src["lag_timeline"], [], "series", "ts",
                               timeline_values, "lag_timeline"),
        "pairs": ("client_broker", lambda: _heatmap_pairs(tables["client_broker"], 15, 12)
                  .collect(), lambda rows: driver_agg.heatmap_pairs(rows, 15, 12)),
    }


#: The columns each chart query's driver-side twin reads.
_CHART_COLUMNS = {
    "latency_by_api": ("api_name", "api_version", "p50_ms", "p90_ms", "p99_ms", "max_ms"),
    "requests_over_time": ("api_name", "bucket_epoch", "requests"),
    "throughput": ("direction", "topic", "bucket_epoch", "records"),
    "errors_by_code": ("error_name", "occurrences"),
    "fetch_lag": ("client_id", "topic", "partition", "bucket_epoch", "max_lag"),
    "committed_offsets": ("group_id", "topic", "partition", "error_name", "ts",
                          "committed_offset"),
    "group_generations": ("group_id", "generation", "join_start", "rebalance_ms"),
    "transactions_summary": ("transactional_id", "committed", "aborted", "open"),
    "e2e_deliveries": ("group", "topic", "delivery_ts", "latency_ms"),
    "lag_timeline": ("group", "topic", "partition", "ts", "lag", "position_lag"),
    "client_broker": ("client_id", "broker", "exchanges"),
}


def _chart_rows(tables: dict[str, DataFrame], step: float, accuracy: int = 10_000,
                collected: dict[str, Any] | None = None) -> dict[str, Any]:
    """The rows every chart query returns: from the collected Arrow copy of its table
    (``collected``: name -> pyarrow Table) on the driver where there is one and the
    driver can promise Spark's result (:mod:`driver_agg`), else by a Spark action
    (several at once from a few threads: each is small and mostly latency)."""
    queries = _chart_queries(tables, step, accuracy)
    data: dict[str, Any] = {}
    for name, (table, _spark, local) in queries.items():
        arrow = (collected or {}).get(table)
        if arrow is not None:
            got = local(driver_agg.rows(arrow, _CHART_COLUMNS[table]))
            if got is not None:
                data[name] = got
    rest = [name for name in queries if name not in data]
    if rest:
        with ThreadPoolExecutor(WRITERS, thread_name_prefix="kwsniff-charts") as pool:
            futures = {name: pool.submit(queries[name][1]) for name in rest}
            data.update({name: future.result() for name, future in futures.items()})
    return data


def _chart_data(tables: dict[str, DataFrame], step: float, accuracy: int = 10_000,
                collected: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the charts draw: :func:`_chart_rows` shaped by :func:`_chart_shape`."""
    return _chart_shape(_chart_rows(tables, step, accuracy, collected))


def _chart_shape(rows: dict[str, Any]) -> dict[str, Any]:
    """The rows of the chart queries (:func:`_chart_rows`) as :func:`_charts` draws them."""
    data = dict(rows)
    data["requests"] = _top_series(data["requests"], "api_name", "_y")
    for name in ("lag", "commits"):
        data[name] = _top_series(data[name], "series", "_y")
    thr_rows = _split(data.pop("thr"), "direction")
    for d in ("produce", "fetch", "replica-fetch"):
        data[f"thr-{d}"] = _top_series(thr_rows.get(d, []), "topic", "_y")
    e2e_rows = data["e2e"]
    data["e2e"] = {p: _top_series(e2e_rows, "series", f"p{i}")
                   for i, p in enumerate(E2E_PERCENTILES)}
    timeline = data["lag_timeline"]
    data["lag_timeline"] = {c: _top_series(timeline, "series", c, skip_null=True)
                            for c in ("lag", "position_lag")}
    cells = data["pairs"]
    data["clients"] = _leaders(cells, "client_id", "_rc", 15)
    data["brokers"] = _leaders(cells, "broker", "_rb", 12)
    data["pairs"] = [r for r in cells if r["_rb"] <= 12 and r["broker"] is not None]
    return data


def _chart_step(counts: dict[str, Any], bucket: float) -> float:
    first, last = counts.get("first_ts"), counts.get("last_ts")
    return chart_step(last - first if first is not None and last is not None else None, bucket)


def _charts(data: dict[str, Any], directory: str, step: float) -> list[str]:
    """Draw the charts from ``data`` (:func:`_chart_data`) into ``directory``."""
    from kwsniff.spark import charts

    os.makedirs(directory, exist_ok=True)
    made: list[str | None] = []
    lat = data["latency"]
    made.append(charts.latency_bars(
        [f"{r['api_name']} v{r['api_version']}" if r["api_version"] is not None
         else str(r["api_name"]) for r in lat],
        [r["p50_ms"] for r in lat], [r["p90_ms"] for r in lat], [r["p99_ms"] for r in lat],
        [r["max_ms"] for r in lat], os.path.join(directory, "latency_by_api.png")))
    made.append(charts.time_series(
        data["requests"], os.path.join(directory, "requests_over_time.png"),
        f"Requests per {_per(step)} by API", "requests", step=step))
    panels = {f"records produced per {_per(step)}, by topic": data["thr-produce"],
              f"records fetched by consumers per {_per(step)}, by topic": data["thr-fetch"],
              f"records replicated to followers per {_per(step)}, by topic":
                  data["thr-replica-fetch"]}
    made.append(charts.time_series({}, os.path.join(directory, "throughput.png"),
                                   "Throughput", "records", panels=panels, step=step))
    err = data["errors"]
    made.append(charts.bars([str(r["error_name"]) for r in err],
                            [r["occurrences"] for r in err],
                            os.path.join(directory, "errors.png"), "Errors by code",
                            "occurrences"))
    made.append(charts.time_series({}, os.path.join(directory, "consumers.png"), "Consumers",
                                   "messages", panels={
        f"consumer fetch lag (high watermark - fetch offset), max per {_per(step)}":
            data["lag"],
        f"committed offsets, highest per {_per(step)}": data["commits"]},
        step=step, fill="hold"))
    gens = data["generations"]
    made.append(charts.bars([f"{r['group_id']} gen {r['generation']}" for r in gens],
                            [r["rebalance_ms"] for r in gens],
                            os.path.join(directory, "rebalances.png"),
                            "Rebalance duration (first JoinGroup -> last SyncGroup)", "ms"))
    made.append(charts.time_series({}, os.path.join(directory, "e2e_latency.png"),
                                   "End-to-end latency", "ms", panels={
        f"end-to-end latency p{round(p * 100)} per {_per(step)} (Produce sent -> first "
        f"Fetch delivery), by group and topic": series
        for p, series in data["e2e"].items()}, step=step, fill="hold"))
    made.append(charts.time_series({}, os.path.join(directory, "lag.png"), "Consumer lag",
                                   "messages", panels={
        f"lag (high watermark - committed offset), max per {_per(step)}, by group and "
        "partition": data["lag_timeline"]["lag"],
        f"position lag (high watermark - fetch position), max per {_per(step)}":
            data["lag_timeline"]["position_lag"]}, step=step, fill="hold"))
    txn = data["transactions"]
    made.append(charts.stacked_bars(
        [str(r["transactional_id"]) for r in txn],
        {"committed": [r["committed"] for r in txn], "aborted": [r["aborted"] for r in txn],
         "open": [r["open"] for r in txn]},
        os.path.join(directory, "transactions.png"), "Transactions by transactional id",
        "transactions"))
    clients, brokers = data["clients"], data["brokers"]
    cells: dict[tuple[Any, Any], float] = {}
    for r in data["pairs"]:
        if r["client_id"] in clients:
            key = (r["client_id"], r["broker"])
            cells[key] = cells.get(key, 0) + r["exchanges"]
    made.append(charts.heatmap([str(c) for c in clients], brokers,
                               [[cells.get((c, b), 0) for b in brokers] for c in clients],
                               os.path.join(directory, "client_broker.png"),
                               "Exchanges: client id x broker", "exchanges"))
    return [m for m in made if m]


# ------------------------------------------------------------------------------ reports

def render_text(sections: list[Section]) -> str:
    return "\n\n".join(text_table(s.title, s.columns, s.rows[:s.top] if s.top else s.rows,
                                   s.total) for s in sections) + "\n"


def render_html(sections: list[Section], pngs: list[str], title: str) -> str:
    """A self-contained HTML page: tables and charts (PNG inlined as data URIs)."""
    style = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
             "table{border-collapse:collapse;margin-bottom:1.5em;font-size:13px}"
             "th,td{border:1px solid #ccc;padding:3px 8px}th{background:#f0f0f0}"
             "td.num{text-align:right;font-variant-numeric:tabular-nums}"
             "div.scroll{max-height:32em;overflow:auto;margin-bottom:1.5em;display:inline-block}"
             "div.scroll table{margin-bottom:0}th{position:sticky;top:0;cursor:pointer}"
             "img{max-width:100%;border:1px solid #eee;margin:0.5em 0 1.5em}"
             "p.more,p.none{color:#777;font-size:12px}")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
             f"</title><style>{style}</style></head><body><h1>{html.escape(title)}</h1>"]
    if pngs:
        parts.append("<h2>Charts</h2>")
        for path in pngs:
            with open(path, "rb") as fh:
                data = base64.b64encode(fh.read()).decode("ascii")
            name = os.path.splitext(os.path.basename(path))[0].replace("_", " ")
            parts.append(f"<figure><img alt='{html.escape(name)}' "
                         f"src='data:image/png;base64,{data}'></figure>")
    parts.append("<h2>Tables</h2>")
    parts.extend(html_table(s.title, s.columns, s.rows, s.total) for s in sections)
    parts.append(f"<script>{SORT_SCRIPT}</script></body></html>")
    return "\n".join(parts)


# --------------------------------------------------------------------------------- run

JOB_TITLES = {latency: "latency", traffic: "throughput", errors: "errors",
              groups: "consumer groups", producers: "producers", matrix: "client x broker matrix",
              insights: "insights (e2e latency, lag, rebalances, producer health)"}


def _count_steps(out: str | None, charts: str, report_dir: str | None) -> int:
    steps = 1 + len(JOBS) + 1            # read, jobs, overview
    if out is None:
        return steps
    steps += 1                           # write tables
    if output.is_remote(out) and report_dir is None:
        return steps
    return steps + (1 if charts != "none" else 0) + (1 if charts in ("html", "both") else 0)


def run_analysis(spark: SparkSession, inputs: list[str], out: str | None,
                 options: AnalysisOptions | None = None, *, fmt: str = "auto",
                 charts: str = "both", top: int = 10, report_dir: str | None = None,
                 progress: Progress | None = None,
                 spark_done: Callable[[AnalysisResult], None] | None = None
                 ) -> AnalysisResult:
    """Run all jobs over ``inputs`` (see the module contract); ``progress`` reports one
    line per step (reading, each job, summary, writing, charts, report). With a local
    report directory ``spark_done`` (when given) is called with the result as soon as
    Spark is no longer needed — the tables are written and the charts' data is in,
    before the charts are drawn — and may release the result and stop Spark while the
    driver draws (the result's ``tables`` are then unusable); otherwise it is not
    called."""
    opts = options or AnalysisOptions()
    steps = progress if progress is not None else Progress.off()
    steps.total = _count_steps(out, charts, report_dir)
    with steps.step("read exports"):
        exports = load_exports(spark, inputs, fmt)
    tables: dict[str, DataFrame] = {}
    result = AnalysisResult(tables, [], "", {}, exports=exports)
    specs = {spec[1]: spec for spec in SUMMARY}
    sections: dict[str, Section] = {}
    # Each job runs in its own thread: its plans are built (persist() plans the query
    # on the driver, which for these wide plans costs more than running them on small
    # inputs) and its summary tables collected while the other jobs do the same; Spark
    # runs the jobs of several threads side by side. A job's step ends when its
    # summary tables are in, so its time is what waiting for it added after the steps
    # before it.

    # With a local ``out`` each table of up to output.DRIVER_ROWS rows is collected once
    # (Arrow); its summary section comes from that copy when it can, and the write step
    # writes it from the driver (one small collect costs far less than two Spark writes).
    collect = out is not None and not output.is_remote(out)
    collected: dict[str, Any] = {}
    # On an input of more lines than that, a persisted table is counted (filling its
    # cache) before it is collected, so one over the cap is not collected for nothing.
    big = exports.lines > output.DRIVER_ROWS

    def run_job(job: Any) -> tuple[dict[str, DataFrame], dict[str, Section], dict[str, Any]]:
        mine: dict[str, DataFrame] = {}
        done: dict[str, Section] = {}
        got: dict[str, Any] = {}
        for name, df in job.compute(exports, opts).items():
            # names this table's Spark jobs (event log, UI): thread-local
            spark.sparkContext.setJobDescription(f"{JOB_TITLES[job]}: {name}")
            # Persisted when Spark reads it again: without a local ``out`` (the
            # caller's tables), when it is too big to collect (Spark writes it; the
            # charts or its section then query it) and, on an input too big for every
            # table to be collected, up front when the charts or a section with its own
            # order read it (its count fills the cache). A collected table serves the
            # charts, the overview and its section from its Arrow copy.
            again = big and (name in REREAD or (name in specs and specs[name][3] is not None))
            mine[name] = df.persist(StorageLevel.MEMORY_AND_DISK) if again or not collect \
                else df
            table = output.collect_small(mine[name], count_first=again) \
                if collect else None
            if table is not None:
                got[name] = table
            elif not again and collect:
                mine[name] = df.persist(StorageLevel.MEMORY_AND_DISK)
            if name in specs:
                section = _section_of(specs[name], mine[name], table, top) \
                    if table is not None else None
                done[name] = section or _section(specs[name], mine[name], top)
        return mine, done, got

    with ThreadPoolExecutor(len(JOBS) + 1, thread_name_prefix="kwsniff-jobs") as pool:
        futures = [pool.submit(run_job, job) for job in JOBS]
        overview_future = None
        for job, future in zip(JOBS, futures):
            with steps.step(JOB_TITLES[job]):
                mine, done, got = future.result()
                tables.update(mine)
                sections.update(done)
                collected.update(got)
            if overview_future is None and "statuses" in tables:
                overview_future = pool.submit(_overview, exports, dict(tables),
                                              collected.get("statuses"))
        assert overview_future is not None, "no job made the statuses table"
        with steps.step("input overview"):
            overview, counts = overview_future.result()
    result.counts = counts
    result.sections = [overview] + [sections[spec[1]] for spec in SUMMARY]
    if all(sections[name].total == 0 for name in INSIGHT_SECTIONS):
        note = [(line,) for line in textwrap.wrap(NO_INSIGHTS, 48, break_on_hyphens=False)]
        result.sections.append(Section("Insights", ["note"], note, len(note)))
    result.summary = render_text(result.sections)
    if out is None:
        return result
    local_dir = report_dir if output.is_remote(out) else output.local_path(out)
    draw = local_dir is not None and charts != "none"
    step = _chart_step(counts, opts.bucket)
    with ThreadPoolExecutor(1, thread_name_prefix="kwsniff-chart-data") as side:
        # The charts' data is computed while the tables are written: on the driver from
        # the collected tables, else by small Spark actions (mostly latency).
        chart_data = side.submit(_chart_data, tables, step, opts.accuracy,
                                 dict(collected)) if draw else None
        with steps.step(f"write {len(tables)} tables (Parquet, CSV)"):
            # Several small write jobs at once: each is mostly scheduling and commit
            # latency, which overlaps; Spark runs jobs of several threads side by side.
            # The collected tables are written by the driver; a bigger one (or any, on a
            # remote ``out``) by Spark, its Parquet and CSV halves at once.
            with ThreadPoolExecutor(WRITERS, thread_name_prefix="kwsniff-write") as pool:
                writes = [(name, [pool.submit(output.write_collected, collected.pop(name),
                                              out, name)] if name in collected else
                           [pool.submit(output.write_parquet, df, out, name),
                            pool.submit(output.write_csv, df, out, name)])
                          for name, df in tables.items()]
                for name, halves in writes:
                    for half in halves:
                        half.result()
                    result.written.append(name)
        if local_dir is None:
            return result
        os.makedirs(local_dir, exist_ok=True)
        with open(os.path.join(local_dir, "summary.txt"), "w", encoding="utf-8") as fh:
            fh.write(result.summary)
        chart_dir = os.path.join(local_dir, "charts")
        shutil.rmtree(chart_dir, ignore_errors=True)
        report = os.path.join(local_dir, "report.html")
        if os.path.exists(report):
            os.remove(report)
        if chart_data is not None:
            with steps.step("charts"):
                data = chart_data.result()
                if spark_done is not None:
                    spark_done(result)
                result.charts = _charts(data, chart_dir, step)
        elif spark_done is not None:
            spark_done(result)
    if charts in ("html", "both"):
        with steps.step("HTML report"):
            with open(report, "w", encoding="utf-8") as fh:
                fh.write(render_html(result.sections, result.charts, "kwsniff analysis"))
    if charts == "html":
        shutil.rmtree(chart_dir, ignore_errors=True)
        result.charts = []
    return result
