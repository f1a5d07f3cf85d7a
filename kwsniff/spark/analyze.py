"""``kwsniff analyze``: run every analysis job, write the tables, summary and charts.

Contract: :func:`run_analysis` reads the exports (:func:`kwsniff.spark.load.load_exports`),
computes the tables of every job in :data:`JOBS` (the jobs run side by side, one driver
thread each; a table is persisted when it is read more than once), and with
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

from kwsniff.spark import output
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

SUMMARY: tuple[tuple[str, str, tuple[str, ...], Callable[[DataFrame], DataFrame] | None], ...] = (
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
     lambda df: df.orderBy(F.desc("bytes"), F.desc("records"), "direction", "topic",
                           "partition")),
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
     lambda df: df.orderBy("capture", "group", "topic", "partition")),
    ("Records produced in the capture but never seen fetched", "e2e_never_fetched",
     ("capture", "topic", "partition", "records"),
     lambda df: df.orderBy(F.desc("records"), "capture", "topic", "partition")),
    ("Consumer lag at the end of each capture (lag: high watermark - committed offset)",
     "lag_partitions",
     ("capture", "group", "topic", "partition", "high_watermark", "committed", "position",
      "lag", "position_lag", "max_lag", "commits"),
     lambda df: df.orderBy(F.desc_nulls_last("lag"), "capture", "group", "topic",
                           "partition")),
    ("Rebalances (generations per group)", "rebalance_generations",
     ("capture", "group", "generation", "start_ts", "duration_ms", "protocol",
      "leader_client_id", "member_count", "trigger"),
     lambda df: df.orderBy("capture", "group", "generation")),
    ("Producer health (idempotent and transactional producers)", "producer_health",
     ("capture", "producer_id", "client_id", "transactional_id", "batches", "retries",
      "out_of_order", "unanswered_requests", "written_twice", "error_count"),
     lambda df: df.orderBy(F.desc(F.col("retries") + F.col("out_of_order")
                                  + F.col("written_twice") + F.col("error_count")),
                           "capture", "producer_id")),
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


def _section(spec: tuple[str, str, tuple[str, ...], Callable[[DataFrame], DataFrame] | None],
             df: DataFrame, top: int) -> Section:
    """One summary table: its first max(top, HTML_ROWS) rows in one action (a count
    only when there are more)."""
    title, _name, columns, order = spec
    ordered = order(df) if order is not None else df
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


def _section_of(spec: tuple[str, str, tuple[str, ...], Callable[[DataFrame], DataFrame] | None],
                df: DataFrame, table: Any, top: int) -> Section | None:
    """:func:`_section` from ``table``, the whole of ``df`` collected as Arrow (no Spark
    action); None when the section sorts the table its own way or shows a column whose
    Arrow values differ from a Row's (structs, maps, timestamps)."""
    title, _name, columns, order = spec
    types = {f.name: f.dataType for f in df.schema.fields}
    if order is not None or not all(_plain(types[c]) for c in columns):
        return None
    limit = max(top, HTML_ROWS)
    rows = list(zip(*(table.column(c).slice(0, limit).to_pylist() for c in columns)))
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


def _ranked(df: DataFrame, keys: list[str], key: str, epoch: str, step: float,
            **values: Any) -> DataFrame:
    """The one Spark aggregation behind a chart: ``df`` aggregated per ``keys`` (the
    chart's panels, may be empty), ``key`` (its series) and per ``step`` seconds of
    ``epoch`` (column ``_x``), one column per keyword of ``values`` (name -> aggregate
    Column), cut to the series that are among the top TOP_SERIES of at least one value
    column by total (nulls count nothing, ties by ``key``, a missing key last); column
    ``_r_<name>`` is that series' rank for ``<name>`` (:func:`_top_series` reads it)."""
    coarse = df.withColumn("_x", F.floor(F.col(epoch) / step) * step) \
        .groupBy(*keys, key, "_x").agg(*[col.alias(name) for name, col in values.items()])
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


def _series(df: DataFrame, key: str, value: str, epoch: str, step: float,
            agg: Callable[[Any], Any] = F.sum) -> dict[str, tuple[list[float], list[float]]]:
    """The top TOP_SERIES series of ``df`` (by total ``value``), aggregated per ``step``
    seconds; only buckets with data (the chart fills or breaks the rest). One action."""
    return _top_series(_ranked(df, [], key, epoch, step, _y=agg(value)).collect(), key, "_y")


def _split(rows: list[Any], column: str) -> dict[Any, list[Any]]:
    """Collected ``rows`` grouped by the value of ``column``."""
    out: dict[Any, list[Any]] = {}
    for r in rows:
        out.setdefault(r[column], []).append(r)
    return out


def _heatmap_pairs(pairs: DataFrame, clients: int, brokers: int) -> DataFrame:
    """``client_broker`` exchanges per client id and broker, cut to the rows of the top
    ``clients`` client ids or the top ``brokers`` brokers by exchanges (ties by name, a
    missing one first); ``_rc``/``_rb`` are their ranks (one Spark action to collect)."""
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


#: The tables the charts query (:func:`_chart_data`). The overview (:func:`_overview`)
#: reads ``statuses`` from its collected copy; a table that was not collected is
#: persisted anyway.
REREAD = frozenset({"throughput", "fetch_lag", "committed_offsets",
                    "client_broker", "e2e_deliveries", "lag_timeline", "latency_by_api",
                    "requests_over_time", "errors_by_code", "group_generations",
                    "transactions_summary"})


def _chart_data(tables: dict[str, DataFrame], step: float,
                accuracy: int = 10_000) -> dict[str, Any]:
    """Everything the charts draw, collected from the result tables (several Spark
    actions at once from a few threads: each is small and mostly latency)."""
    thr = tables["throughput"]
    lag = tables["fetch_lag"].withColumn(
        "series", F.concat_ws(" ", F.coalesce("client_id", F.lit("-")),
                              F.concat("topic", F.lit("["), F.col("partition").cast("string"),
                                       F.lit("]"))))
    commits = tables["committed_offsets"].filter(F.col("error_name").isNull()).withColumn(
        "series", F.concat_ws(" ", "group_id", F.concat("topic", F.lit("["),
                                                        F.col("partition").cast("string"),
                                                        F.lit("]"))))
    pairs = tables["client_broker"]
    e2e = tables["e2e_deliveries"].withColumn(
        "series", F.concat_ws(" ", "group", "topic"))
    lag_timeline = tables["lag_timeline"].withColumn(
        "series", F.concat_ws(" ", "group", F.concat("topic", F.lit("["),
                                                     F.col("partition").cast("string"),
                                                     F.lit("]"))))

    queries: dict[str, Callable[[], Any]] = {
        "latency": lambda: tables["latency_by_api"].limit(20).collect(),
        "requests": lambda: _series(tables["requests_over_time"], "api_name", "requests",
                                    "bucket_epoch", step),
        "thr": lambda: _split(_ranked(thr, ["direction"], "topic", "bucket_epoch", step,
                                      _y=F.sum("records")).collect(), "direction"),
        "errors": lambda: tables["errors_by_code"].limit(20).collect(),
        "lag": lambda: _series(lag, "series", "max_lag", "bucket_epoch", step, F.max),
        "commits": lambda: _series(commits, "series", "committed_offset", "ts", step, F.max),
        "generations": lambda: tables["group_generations"]
        .filter(F.col("rebalance_ms").isNotNull()).orderBy("join_start").limit(30).collect(),
        "transactions": lambda: tables["transactions_summary"].limit(30).collect(),
        "e2e": lambda: _ranked(e2e, [], "series", "delivery_ts", step, **{
            f"p{i}": F.percentile_approx("latency_ms", p, accuracy)
            for i, p in enumerate(E2E_PERCENTILES)}).collect(),
        "lag_timeline": lambda: _ranked(lag_timeline, [], "series", "ts", step,
                                        lag=F.max("lag"),
                                        position_lag=F.max("position_lag")).collect(),
        "pairs": lambda: _heatmap_pairs(pairs, 15, 12).collect(),
    }
    with ThreadPoolExecutor(WRITERS, thread_name_prefix="kwsniff-charts") as pool:
        futures = {name: pool.submit(query) for name, query in queries.items()}
        data = {name: future.result() for name, future in futures.items()}
    thr_rows = data.pop("thr")
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
                 progress: Progress | None = None) -> AnalysisResult:
    """Run all jobs over ``inputs`` (see the module contract); ``progress`` reports one
    line per step (reading, each job, summary, writing, charts, report)."""
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
            # Persisted when read again: by the charts, the overview or a section with
            # its own order, or by Spark's writes when the table is too big to collect.
            again = name in REREAD or (name in specs and specs[name][3] is not None)
            mine[name] = df.persist(StorageLevel.MEMORY_AND_DISK) if again or not collect \
                else df
            table = output.collect_small(mine[name], count_first=big and again) \
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
        # The charts' queries run while the tables are written (both are small actions
        # on the persisted tables, mostly latency).
        chart_data = side.submit(_chart_data, tables, step, opts.accuracy) if draw else None
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
                result.charts = _charts(chart_data.result(), chart_dir, step)
    if charts in ("html", "both"):
        with steps.step("HTML report"):
            with open(report, "w", encoding="utf-8") as fh:
                fh.write(render_html(result.sections, result.charts, "kwsniff analysis"))
    if charts == "html":
        shutil.rmtree(chart_dir, ignore_errors=True)
        result.charts = []
    return result
