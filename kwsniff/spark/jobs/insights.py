"""Insights over many captures: end-to-end latency, consumer lag, rebalances and producer
health — the numbers of ``kwsniff stats --insights``, per capture, as tables.

How: the exchanges the insights read (Produce, Fetch, ListOffsets, the group and
transaction APIs) are partitioned by capture run (``source`` and ``run``, see
:mod:`kwsniff.spark.load`: one clock, one numbering), sorted by ``index`` (the order
``stats`` feeds them) and streamed, one capture after the other, through the very
collector ``stats --insights`` uses (:class:`kwsniff.output.insights.InsightsCollector`
over :func:`kwsniff.output.insights.exported.exchange_from_export`): one source for the
logic, and no join ever crosses two captures (offsets and times of different captures
are never compared). Each capture's report (bounded: the collector's limits) is one row
of the persisted ``insight_reports`` frame; the tables below are flattened from it.
Every table starts with ``capture, source``: the exchanges' ``capture`` and the export
file (or Parquet directory, e.g. the spark-decode output) they were read from. Two
exports are two runs even when their capture names are equal (``-`` for stdin, the same
file name on two hosts). In spark-decode output ``capture`` is the capture file holding
the exchange's first byte, so each file is a run of its own: rotated files of one
capture are not joined with each other (spark-decode cannot tell them from unrelated
captures). A capture with no such exchanges adds no rows.

Tables (values exactly as in ``stats --insights --json``, field names kept):

* ``e2e_latency``: per capture, group, topic, partition — ``batches, records, min_ms,
  p50_ms, p90_ms, p99_ms, max_ms, exact`` (Produce request's first byte → the Fetch
  response's last byte that first delivered the batch to the group);
* ``e2e_latency_by_topic``: the same per capture, group, topic (merged sketches);
* ``e2e_deliveries``: one row per first delivery of a produced batch to a group (the
  collector's samples, bounded): ``base_offset, records, producer,
  produce_correlation_id, consumer, fetch_correlation_id, produce_ts, ack_ts,
  delivery_ts, latency_ms``;
* ``e2e_never_fetched``: records produced in the capture but never seen fetched, per
  capture, topic, partition;
* ``e2e_totals``: per capture — ``produced_batches, produced_records,
  never_fetched_records, fetched_not_produced_in_capture_records, redelivered_batches``
  (re-deliveries to the same group), ``redeliveries`` and ``not_delivered_to_group``
  (per group), ``dropped_produced_batches, dropped_waiting_deliveries`` (bounds hit);
* ``lag_partitions``: per capture, group, topic, partition at the end of the capture —
  ``high_watermark, committed, position, lag`` (high watermark − committed),
  ``position_lag`` (high watermark − fetch position), ``max_lag, commits,
  commit_errors, last_sample_ts, timeline_decimated``;
* ``lag_timeline``: the samples over time — ``ts, event`` (``fetch``, ``commit``,
  ``high_watermark``), ``high_watermark, committed, position, lag, position_lag``;
* ``rebalance_generations``: per capture, group, generation — ``start_ts, end_ts,
  duration_ms, protocol_type, protocol, leader, leader_client_id, member_count,
  members`` (member id, client id, topics, assignment, joined/synced times),
  ``trigger`` (its causes joined by ``; ``), ``gone_without_leaving``;
* ``rebalance_groups``: per capture, group — ``generations, generations_dropped,
  errors, rebalance_in_progress, since_last_generation``;
* ``producer_health``: per capture, producer id — ``epochs, client_id,
  transactional_id, batches, records, retries, out_of_order, unanswered_requests,
  written_twice`` (batches written at two offsets), ``error_count, errors``;
* ``producer_retries``: each batch sent again (same producer id, epoch, base sequence);
* ``producer_duplicates``: each batch written twice, with its ``offsets``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kwsniff.output.insights import WANTED
from kwsniff.spark.jobs import AnalysisOptions
from kwsniff.spark.load import Exports

#: API keys the collector reads.
INSIGHT_APIS = tuple(sorted(WANTED))
COLUMNS = ("index", "stream", "client", "client_id", "correlation_id", "api_key", "protocol",
           "status", "ts", "response_ts", "request", "response")

_S, _L, _D, _B = T.StringType(), T.LongType(), T.DoubleType(), T.BooleanType()


def _struct(*fields: tuple[str, T.DataType]) -> T.StructType:
    return T.StructType([T.StructField(n, t, True) for n, t in fields])


_PCT = (("min_ms", _D), ("p50_ms", _D), ("p90_ms", _D), ("p99_ms", _D), ("max_ms", _D),
        ("exact", _B))
_COUNTS = T.MapType(_S, _L)
_MEMBER = _struct(("member_id", _S), ("client_id", _S), ("topics", T.ArrayType(_S)),
                  ("assignment", T.MapType(_S, T.ArrayType(_L))), ("joined_ts", _D),
                  ("synced_ts", _D))
_GONE = _struct(("member_id", _S), ("client_id", _S), ("last_heartbeat_ts", _D),
                ("silent_ms", _D))

SCHEMAS: dict[str, T.StructType] = {
    "e2e_latency": _struct(("capture", _S), ("source", _S), ("group", _S), ("topic", _S), ("partition", _L),
                           ("batches", _L), ("records", _L), *_PCT),
    "e2e_latency_by_topic": _struct(("capture", _S), ("source", _S), ("group", _S), ("topic", _S),
                                    ("batches", _L), *_PCT),
    "e2e_deliveries": _struct(("capture", _S), ("source", _S), ("group", _S), ("topic", _S),
                              ("partition", _L), ("base_offset", _L), ("records", _L),
                              ("producer", _S), ("produce_correlation_id", _L),
                              ("consumer", _S), ("fetch_correlation_id", _L),
                              ("produce_ts", _D), ("ack_ts", _D), ("delivery_ts", _D),
                              ("latency_ms", _D)),
    "e2e_never_fetched": _struct(("capture", _S), ("source", _S), ("topic", _S), ("partition", _L),
                                 ("records", _L)),
    "e2e_totals": _struct(("capture", _S), ("source", _S), ("produced_batches", _L), ("produced_records", _L),
                          ("never_fetched_records", _L),
                          ("fetched_not_produced_in_capture_records", _L),
                          ("redelivered_batches", _L), ("redeliveries", _COUNTS),
                          ("not_delivered_to_group", _COUNTS),
                          ("dropped_produced_batches", _L),
                          ("dropped_waiting_deliveries", _L)),
    "lag_partitions": _struct(("capture", _S), ("source", _S), ("group", _S), ("topic", _S), ("partition", _L),
                              ("high_watermark", _L), ("committed", _L), ("position", _L),
                              ("lag", _L), ("position_lag", _L), ("max_lag", _L),
                              ("commits", _L), ("commit_errors", _COUNTS),
                              ("last_sample_ts", _D), ("timeline_decimated", _B)),
    "lag_timeline": _struct(("capture", _S), ("source", _S), ("group", _S), ("topic", _S), ("partition", _L),
                            ("ts", _D), ("event", _S), ("high_watermark", _L),
                            ("committed", _L), ("position", _L), ("lag", _L),
                            ("position_lag", _L)),
    "rebalance_generations": _struct(("capture", _S), ("source", _S), ("group", _S), ("generation", _L),
                                     ("start_ts", _D), ("end_ts", _D), ("duration_ms", _D),
                                     ("protocol_type", _S), ("protocol", _S), ("leader", _S),
                                     ("leader_client_id", _S), ("member_count", _L),
                                     ("members", T.ArrayType(_MEMBER)), ("trigger", _S),
                                     ("gone_without_leaving", T.ArrayType(_GONE))),
    "rebalance_groups": _struct(("capture", _S), ("source", _S), ("group", _S), ("generations", _L),
                                ("generations_dropped", _L), ("errors", _COUNTS),
                                ("rebalance_in_progress", _B),
                                ("since_last_generation", _S)),
    "producer_health": _struct(("capture", _S), ("source", _S), ("producer_id", _L),
                               ("epochs", T.ArrayType(_L)), ("client_id", _S),
                               ("transactional_id", _S), ("batches", _L), ("records", _L),
                               ("retries", _L), ("out_of_order", _L),
                               ("unanswered_requests", _L), ("written_twice", _L),
                               ("error_count", _L), ("errors", _COUNTS)),
    "producer_retries": _struct(("capture", _S), ("source", _S), ("producer_id", _L), ("topic", _S),
                                ("partition", _L), ("epoch", _L), ("base_sequence", _L),
                                ("records", _L), ("first_sent_ts", _D), ("resent_ts", _D),
                                ("exchange", _L)),
    "producer_duplicates": _struct(("capture", _S), ("source", _S), ("producer_id", _L), ("topic", _S),
                                   ("partition", _L), ("epoch", _L), ("base_sequence", _L),
                                   ("offsets", T.ArrayType(_L))),
}
REPORTS = _struct(("capture", _S), ("source", _S), ("report", _S))


# ------------------------------------------------------------------ per capture, Python

def collect_reports(rows: Iterable[Any]) -> Iterator[tuple[str, str, str]]:
    """``(capture, source, report JSON)`` per capture run of ``rows`` (Rows or dicts with
    ``source``, ``run`` and :data:`COLUMNS`, grouped by ``(source, run)`` and in
    ``index`` order within it): each run's exchanges go through their own collector."""
    from kwsniff.output.insights import InsightsCollector
    from kwsniff.output.insights.exported import exchange_from_export

    current: tuple[str, str] = ("", "")
    collector: Any = None
    for row in rows:
        obj = row if isinstance(row, dict) else row.asDict()
        key = (obj["run"], obj["source"])
        if collector is None or key != current:
            if collector is not None:
                yield (*current, json.dumps(collector.report()))
            current, collector = key, InsightsCollector()
        collector.add(exchange_from_export(obj))
    if collector is not None:
        yield (*current, json.dumps(collector.report()))


def _value(dtype: T.DataType, value: Any) -> Any:
    """``value`` (from the report's JSON) as ``dtype`` wants it; None when it does not
    fit (never raises)."""
    if value is None:
        return None
    if isinstance(dtype, T.DoubleType):
        return float(value) if isinstance(value, (int, float)) \
            and not isinstance(value, bool) else None
    if isinstance(dtype, T.LongType):
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(dtype, T.BooleanType):
        return value if isinstance(value, bool) else None
    if isinstance(dtype, T.StringType):
        return value if isinstance(value, str) else str(value)
    if isinstance(dtype, T.ArrayType):
        return [_value(dtype.elementType, v) for v in value] if isinstance(value, list) \
            else None
    if isinstance(dtype, T.MapType):
        return {str(k): _value(dtype.valueType, v) for k, v in value.items()} \
            if isinstance(value, dict) else None
    if isinstance(dtype, T.StructType):
        return _row(dtype, value) if isinstance(value, dict) else None
    return None


def _row(schema: T.StructType, obj: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(_value(f.dataType, obj.get(f.name)) for f in schema.fields)


def _e2e(report: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return report.get("end_to_end", {}).get(key) or []


def _totals(report: dict[str, Any]) -> list[dict[str, Any]]:
    e2e = report.get("end_to_end") or {}
    if not e2e.get("produced_batches") and not e2e.get("by_partition") \
            and not e2e.get("fetched_not_produced_in_capture_records"):
        return []
    dropped = e2e.get("dropped") or {}
    return [{**e2e, "redelivered_batches": sum((e2e.get("redeliveries") or {}).values()),
             "dropped_produced_batches": dropped.get("produced_batches"),
             "dropped_waiting_deliveries": dropped.get("waiting_deliveries")}]


def _timeline(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**{k: p[k] for k in ("group", "topic", "partition")}, **s}
            for p in report.get("lag") or [] for s in p.get("timeline") or []]


def _generations(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**g, "group": grp["group"], "member_count": len(g.get("members") or []),
             "trigger": "; ".join(g.get("trigger") or [])}
            for grp in report.get("rebalances") or [] for g in grp.get("generations") or []]


def _groups(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**grp, "generations": len(grp.get("generations") or []),
             "since_last_generation": "; ".join(grp.get("since_last_generation") or [])}
            for grp in report.get("rebalances") or []]


def _producers(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**p, "written_twice": len(p.get("written_twice") or []),
             "error_count": sum((p.get("errors") or {}).values())}
            for p in report.get("producers") or []]


def _producer_items(key: str) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    def items(report: dict[str, Any]) -> list[dict[str, Any]]:
        return [{**item, "producer_id": p.get("producer_id")}
                for p in report.get("producers") or [] for item in p.get(key) or []]
    return items


ROWS: dict[str, Callable[[dict[str, Any]], list[dict[str, Any]]]] = {
    "e2e_latency": lambda r: _e2e(r, "by_partition"),
    "e2e_latency_by_topic": lambda r: _e2e(r, "by_topic"),
    "e2e_deliveries": lambda r: _e2e(r, "samples"),
    "e2e_never_fetched": lambda r: _e2e(r, "never_fetched"),
    "e2e_totals": _totals,
    "lag_partitions": lambda r: r.get("lag") or [],
    "lag_timeline": _timeline,
    "rebalance_generations": _generations,
    "rebalance_groups": _groups,
    "producer_health": _producers,
    "producer_retries": _producer_items("retried_batches"),
    "producer_duplicates": _producer_items("written_twice"),
}


def table_rows(name: str, capture: str, report: dict[str, Any],
               source: str | None = None) -> list[tuple[Any, ...]]:
    """The rows of table ``name`` of one capture's report (pure Python)."""
    schema = SCHEMAS[name]
    return [_row(schema, {**obj, "capture": capture, "source": source})
            for obj in ROWS[name](report)]


# -------------------------------------------------------------------------------- Spark

def _reports(exports: Exports) -> DataFrame:
    ex = exports.exchanges
    wanted = ex.filter((F.col("protocol") == "kafka") & F.col("api_key").isin(*INSIGHT_APIS)) \
        .select("source", "run", *COLUMNS)
    ordered = ex.sparkSession.createDataFrame(
        wanted.repartition("source", "run").sortWithinPartitions("source", "run", "index").rdd
        .mapPartitions(collect_reports), REPORTS)
    return ordered


def compute(exports: Exports, options: AnalysisOptions) -> dict[str, DataFrame]:
    reports = exports.derived("insight_reports", _reports)
    spark = reports.sparkSession
    out: dict[str, DataFrame] = {}
    for name, schema in SCHEMAS.items():
        rows = reports.rdd.flatMap(
            lambda r, name=name: table_rows(name, r["capture"], json.loads(r["report"]),
                                            r["source"]))
        out[name] = spark.createDataFrame(rows, schema)
    return out
