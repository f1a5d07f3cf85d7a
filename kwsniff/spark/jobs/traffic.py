"""Produced and fetched data per topic and partition, over time; consumer fetch lag.

Partition rows (:func:`partition_rows`, shared with the consumer-group job): one row per
(exchange, topic, partition) of

* ``produce``: every partition of a Produce request (0.7: PRODUCE/MULTIPRODUCE), at the
  request time ``ts``; records and bytes are the request's record-set summary (what was
  on the wire, whatever the broker answered);
* ``fetch`` / ``replica-fetch``: every partition of a Fetch response (0.7: FETCH,
  MULTIFETCH) at the response time, split by the request's replica id (``>= 0`` is a
  follower broker replicating); with the partition's ``HighWatermark``,
  ``LastStableOffset``, ``ErrorCode`` and the request's ``FetchOffset`` for it.

Tables:

* ``throughput``: per time bucket (``--bucket`` seconds, UTC ``bucket_start`` and its
  ``bucket_epoch``), ``direction``, ``topic``, ``partition``: ``requests`` (requests
  carrying that partition), ``records``, ``bytes``;
* ``partition_totals``: the same summed over the whole run, with first/last time;
* ``requests_over_time``: per bucket and ``api_name``: ``requests``, ``request_bytes``,
  ``response_bytes``, ``errors`` (exchanges whose response has an error code);
* ``fetch_lag``: per bucket, ``client_id``, ``topic``, ``partition`` of consumer fetches
  whose response holds a high watermark: ``fetches``, ``max_lag`` and ``last_lag``
  (``HighWatermark - FetchOffset``, the messages the consumer had still to read when it
  fetched), ``last_fetch_offset``, ``last_high_watermark``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kwsniff.spark.bodies import LEGACY07_REQUEST, LEGACY07_RESPONSE
from kwsniff.spark.columns import KAFKA07, bucket_cols, is_api, topic_of
from kwsniff.spark.jobs import AnalysisOptions
from kwsniff.spark.load import Exports
from kwsniff.spark.views import FETCH, FETCH_REQUEST, FETCH_RESPONSE, PRODUCE, PRODUCE_REQUEST

PRODUCED = "produce"
FETCHED = "fetch"
REPLICA_FETCHED = "replica-fetch"

_CONTEXT = ("capture", "index", "client_id", "client", "broker")


def _row(direction: Column, t: Column, topic: Column, partition: Column, records: Column,
         size: Column, error_code: Column | None = None, hw: Column | None = None,
         lso: Column | None = None, fetch_offset: Column | None = None) -> list[Column]:
    none_long = F.lit(None).cast("long")
    return [*(F.col(c) for c in _CONTEXT), direction.alias("direction"), t.alias("t"),
            topic.alias("topic"), partition.cast("long").alias("partition"),
            F.coalesce(records, F.lit(0)).cast("long").alias("records"),
            F.coalesce(size, F.lit(0)).cast("long").alias("bytes"),
            (error_code.cast("long") if error_code is not None else none_long)
            .alias("error_code"),
            (hw if hw is not None else none_long).alias("high_watermark"),
            (lso if lso is not None else none_long).alias("last_stable_offset"),
            (fetch_offset if fetch_offset is not None else none_long).alias("fetch_offset")]


def _produced(ex: DataFrame) -> DataFrame:
    td = (ex.filter(is_api(PRODUCE) & F.col("request").isNotNull())
          .select(*_CONTEXT, "ts",
                  F.explode(F.from_json("request", PRODUCE_REQUEST)["TopicData"]).alias("td")))
    pd = td.select(*_CONTEXT, "ts", topic_of(F.col("td"), "Name").alias("topic"),
                   F.explode("td.PartitionData").alias("pd"))
    return pd.select(*_row(F.lit(PRODUCED), F.col("ts"), F.col("topic"), F.col("pd.Index"),
                           F.col("pd.Records.record_count"), F.col("pd.Records.size")))


def _fetched(ex: DataFrame) -> DataFrame:
    f = (ex.filter(is_api(FETCH) & F.col("response").isNotNull())
         .select(*_CONTEXT, F.coalesce("response_ts", "ts").alias("t"),
                 F.from_json("request", FETCH_REQUEST).alias("q"),
                 F.from_json("response", FETCH_RESPONSE).alias("r")))
    wanted = F.flatten(F.transform(
        F.coalesce(F.col("q.Topics"), F.array()),
        lambda t: F.transform(t["Partitions"], lambda p: F.struct(
            topic_of(t, "Topic").alias("topic"), p["Partition"].cast("long").alias("partition"),
            p["FetchOffset"].alias("offset")))))
    replica = F.coalesce(F.col("q.ReplicaState.ReplicaId"), F.col("q.ReplicaId"))
    direction = F.when(replica >= 0, F.lit(REPLICA_FETCHED)).otherwise(F.lit(FETCHED))
    rt = f.select(*_CONTEXT, "t", direction.alias("direction"), wanted.alias("wanted"),
                  F.explode("r.Responses").alias("rt"))
    rp = rt.select(*_CONTEXT, "t", "direction", "wanted",
                   topic_of(F.col("rt"), "Topic").alias("topic"),
                   F.explode("rt.Partitions").alias("rp"))
    partition = F.col("rp.PartitionIndex").cast("long")
    match = F.get(F.filter("wanted", lambda w: (w["topic"] == F.col("topic"))
                           & (w["partition"] == partition)), 0)
    return rp.select(*_row(F.col("direction"), F.col("t"), F.col("topic"), partition,
                           F.col("rp.Records.record_count"), F.col("rp.Records.size"),
                           F.col("rp.ErrorCode"), F.col("rp.HighWatermark"),
                           F.col("rp.LastStableOffset"), match["offset"]))


def _legacy(ex: DataFrame) -> DataFrame:
    """Kafka 0.7: PRODUCE (0) / MULTIPRODUCE (3) requests, FETCH (1) / MULTIFETCH (2)
    responses."""
    proto = F.col("protocol") == KAFKA07
    q = F.from_json("request", LEGACY07_REQUEST)
    r = F.from_json("response", LEGACY07_RESPONSE)
    prod = ex.filter(proto & F.col("api_key").isin(0, 3) & F.col("request").isNotNull()) \
        .select(*_CONTEXT, "ts", "api_key", q.alias("b"))
    parts = F.when(F.col("api_key") == 0, F.array(F.struct(
        F.col("b.Topic").alias("Topic"), F.col("b.Partition").alias("Partition"),
        F.col("b.Messages").alias("Messages")))).otherwise(F.col("b.Produces"))
    prod = prod.select(*_CONTEXT, "ts", F.explode(parts).alias("p")).select(*_row(
        F.lit(PRODUCED), F.col("ts"), F.col("p.Topic"), F.col("p.Partition"),
        F.col("p.Messages.record_count"), F.col("p.Messages.size")))
    fetch = ex.filter(proto & F.col("api_key").isin(1, 2) & F.col("response").isNotNull()) \
        .select(*_CONTEXT, F.coalesce("response_ts", "ts").alias("t"), "api_key", r.alias("b"))
    parts = F.when(F.col("api_key") == 1, F.array(F.struct(
        F.col("b.Topic").alias("Topic"), F.col("b.Partition").alias("Partition"),
        F.col("b.ErrorCode").alias("ErrorCode"), F.col("b.Messages").alias("Messages")))) \
        .otherwise(F.col("b.Responses"))
    fetch = fetch.select(*_CONTEXT, "t", F.explode(parts).alias("p")).select(*_row(
        F.lit(FETCHED), F.col("t"), F.col("p.Topic"), F.col("p.Partition"),
        F.col("p.Messages.record_count"), F.col("p.Messages.size"), F.col("p.ErrorCode")))
    return prod.unionByName(fetch)


def partition_rows(exports: Exports) -> DataFrame:
    """The partition rows of every export (see the module contract)."""
    ex = exports.exchanges
    return _produced(ex).unionByName(_fetched(ex)).unionByName(_legacy(ex))


def shared_partition_rows(exports: Exports) -> DataFrame:
    return exports.derived("partition_rows", partition_rows)


def compute(exports: Exports, options: AnalysisOptions) -> dict[str, DataFrame]:
    rows = shared_partition_rows(exports)
    b = options.bucket
    throughput = (rows.select(*bucket_cols(F.col("t"), b), "direction", "topic", "partition",
                              "records", "bytes")
                  .groupBy("bucket_start", "bucket_epoch", "direction", "topic", "partition")
                  .agg(F.count(F.lit(1)).alias("requests"), F.sum("records").alias("records"),
                       F.sum("bytes").alias("bytes"))
                  .orderBy("bucket_epoch", "direction", "topic", "partition"))
    totals = (rows.groupBy("direction", "topic", "partition")
              .agg(F.count(F.lit(1)).alias("requests"), F.sum("records").alias("records"),
                   F.sum("bytes").alias("bytes"), F.min("t").alias("first_ts"),
                   F.max("t").alias("last_ts"))
              .orderBy("direction", "topic", "partition"))
    ex = exports.exchanges
    per_api = (ex.select(*bucket_cols(F.col("ts"), b), "api_name", "request_bytes",
                         "response_bytes", "error_codes")
               .groupBy("bucket_start", "bucket_epoch", "api_name")
               .agg(F.count(F.lit(1)).alias("requests"),
                    F.coalesce(F.sum("request_bytes"), F.lit(0)).alias("request_bytes"),
                    F.coalesce(F.sum("response_bytes"), F.lit(0)).alias("response_bytes"),
                    F.sum(F.when(F.size("error_codes") > 0, 1).otherwise(0)).alias("errors"))
               .orderBy("bucket_epoch", "api_name"))
    lagged = rows.filter((F.col("direction") == FETCHED) & F.col("fetch_offset").isNotNull()
                         & (F.col("high_watermark") >= 0)) \
        .withColumn("lag", F.col("high_watermark") - F.col("fetch_offset"))
    fetch_lag = (lagged.select(*bucket_cols(F.col("t"), b), "client_id", "topic", "partition",
                               "t", "lag", "fetch_offset", "high_watermark")
                 .groupBy("bucket_start", "bucket_epoch", "client_id", "topic", "partition")
                 .agg(F.count(F.lit(1)).alias("fetches"), F.max("lag").alias("max_lag"),
                      F.max_by("lag", "t").alias("last_lag"),
                      F.max_by("fetch_offset", "t").alias("last_fetch_offset"),
                      F.max_by("high_watermark", "t").alias("last_high_watermark"))
                 .orderBy("bucket_epoch", "client_id", "topic", "partition"))
    return {"throughput": throughput, "partition_totals": totals,
            "requests_over_time": per_api, "fetch_lag": fetch_lag}
