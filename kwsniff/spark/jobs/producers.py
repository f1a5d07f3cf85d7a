"""Producers: producer ids, idempotent and transactional activity, transaction outcomes.

Producer events (``producer_events``), each with ``ts, event, producer_id,
producer_epoch, transactional_id, client_id, records, batches, partitions, group_id,
error_name``:

* ``init`` — InitProducerId (the id and epoch the broker handed out);
* ``add_partitions`` (AddPartitionsToTxn, v0-3 and each transaction of v4+ batches;
  ``partitions`` added), ``add_offsets`` (AddOffsetsToTxn, ``group_id``),
  ``txn_offset_commit`` (TxnOffsetCommit), ``commit`` / ``abort`` (EndTxn);
* ``produce`` — with ``--records`` exports: each Produce request's batches per producer
  id (``records``, ``batches``; idempotent and transactional producers alike); without
  record lines only transactional Produce requests can be attributed (their
  ``TransactionalId``), with the request's ``records`` and the producer id known for
  that transactional id at that time;
* ``commit_marker`` / ``abort_marker`` — transaction markers (control records) seen in
  fetched data (record lines only), once per topic/partition/offset.

Tables:

* ``producers``: per ``producer_id``: ``kind`` (``transactional`` when a transactional
  id was seen with it, else ``idempotent``), ``transactional_ids``, ``epochs``,
  ``client_ids``, ``first_ts``, ``last_ts`` (of the producer's own requests, not of the
  consumers that fetched its markers), ``init_calls``, ``produce_requests``,
  ``records``, ``batches``, ``add_partitions``, ``partitions_added``, ``add_offsets``,
  ``txn_offset_commits``, ``commits``, ``aborts``, ``end_txn_errors``,
  ``commit_markers``, ``abort_markers``;
* ``transactions``: one row per transaction of a transactional id: the events after the
  previous successful EndTxn up to and including the next one; ``outcome``
  ``committed``/``aborted``, or ``open`` when the capture holds no successful EndTxn
  for it; ``start_ts`` (first event), ``end_ts``, ``duration_ms``, ``partitions_added``,
  ``produce_requests``, ``records``, ``offset_commits``, ``end_txn_errors``;
* ``transactions_summary``: per transactional id: ``transactions``, ``committed``,
  ``aborted``, ``open``, ``mean_duration_ms``, ``max_duration_ms``, ``producer_ids``;
* ``producing_clients``: per client id of every Produce request (Kafka 0.8+; with or
  without producer ids): ``produce_requests``, ``topics``, ``partitions`` (distinct
  topic/partition pairs), ``records``, ``bytes``, ``batches`` (from the record-set
  summaries of the request), ``acks`` and ``codecs`` (distinct values),
  ``transactional_ids``, ``first_ts``, ``last_ts``, and — where the client's own
  requests carried them (InitProducerId, transactional requests, batches of record
  lines) — ``producer_ids`` and ``epochs``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kwsniff.spark.columns import error_name_of, is_api, nonempty, topic_of
from kwsniff.spark.jobs import AnalysisOptions
from kwsniff.spark.load import Exports
from kwsniff.spark.views import (
    ADD_OFFSETS_TO_TXN,
    ADD_OFFSETS_TO_TXN_REQUEST,
    ADD_PARTITIONS_TO_TXN,
    ADD_PARTITIONS_TO_TXN_REQUEST,
    ADD_PARTITIONS_TO_TXN_RESPONSE,
    END_TXN,
    END_TXN_REQUEST,
    ERROR_ONLY,
    FETCH,
    INIT_PRODUCER_ID,
    INIT_PRODUCER_ID_REQUEST,
    INIT_PRODUCER_ID_RESPONSE,
    PRODUCE,
    PRODUCE_REQUEST,
    TXN_OFFSET_COMMIT,
    TXN_OFFSET_COMMIT_REQUEST,
)

INIT, PRODUCE_EV, ADD_PARTITIONS, ADD_OFFSETS = "init", "produce", "add_partitions", "add_offsets"
TXN_OFFSET_COMMIT_EV, COMMIT, ABORT = "txn_offset_commit", "commit", "abort"
COMMIT_MARKER, ABORT_MARKER = "commit_marker", "abort_marker"

def _null(kind: str) -> Column:
    return F.lit(None).cast(kind)


def _ev(event: Column, pid: Column, epoch: Column, txn: Column, error_code: Column | None,
        records: Column | None = None, batches: Column | None = None,
        partitions: Column | None = None, group: Column | None = None) -> list[Column]:
    def opt(col: Column | None, kind: str) -> Column:
        return col.cast(kind) if col is not None else _null(kind)
    return [F.col("ts"), event.alias("event"), pid.cast("long").alias("producer_id"),
            epoch.cast("long").alias("producer_epoch"),
            nonempty(txn).alias("transactional_id"), F.col("client_id"),
            opt(records, "long").alias("records"), opt(batches, "long").alias("batches"),
            opt(partitions, "long").alias("partitions"), opt(group, "string").alias("group_id"),
            (error_name_of(error_code) if error_code is not None else _null("string"))
            .alias("error_name"), F.col("status"), F.col("capture"), F.col("index")]


def _count_partitions(topics: Column) -> Column:
    return F.aggregate(F.coalesce(topics, F.array()), F.lit(0),
                       lambda acc, t: acc + F.coalesce(F.size(t["Partitions"]), F.lit(0)))


def _body_events(ex: DataFrame) -> DataFrame:
    init = ex.filter(is_api(INIT_PRODUCER_ID)).select(
        "*", F.from_json("request", INIT_PRODUCER_ID_REQUEST).alias("q"),
        F.from_json("response", INIT_PRODUCER_ID_RESPONSE).alias("r"))
    ok = F.col("r.ErrorCode") == 0
    init = init.select(*_ev(F.lit(INIT), F.when(ok, F.col("r.ProducerId")),
                            F.when(ok, F.col("r.ProducerEpoch")), F.col("q.TransactionalId"),
                            F.col("r.ErrorCode")))
    add = ex.filter(is_api(ADD_PARTITIONS_TO_TXN)).select(
        "*", F.from_json("request", ADD_PARTITIONS_TO_TXN_REQUEST).alias("q"),
        F.from_json("response", ADD_PARTITIONS_TO_TXN_RESPONSE).alias("r"))
    legacy = F.array(F.struct(
        F.col("q.V3AndBelowTransactionalId").alias("TransactionalId"),
        F.col("q.V3AndBelowProducerId").alias("ProducerId"),
        F.col("q.V3AndBelowProducerEpoch").alias("ProducerEpoch"),
        F.col("q.V3AndBelowTopics").alias("Topics")))
    batched = F.transform(F.col("q.Transactions"), lambda t: F.struct(
        t["TransactionalId"].alias("TransactionalId"), t["ProducerId"].alias("ProducerId"),
        t["ProducerEpoch"].alias("ProducerEpoch"), t["Topics"].alias("Topics")))
    txns = F.when(F.col("q.V3AndBelowTransactionalId").isNotNull(), legacy) \
        .otherwise(F.coalesce(batched, F.array()))
    add = add.select("*", F.explode(txns).alias("x")).select(*_ev(
        F.lit(ADD_PARTITIONS), F.col("x.ProducerId"), F.col("x.ProducerEpoch"),
        F.col("x.TransactionalId"), F.col("r.ErrorCode"),
        partitions=_count_partitions(F.col("x.Topics"))))
    offsets = ex.filter(is_api(ADD_OFFSETS_TO_TXN)).select(
        "*", F.from_json("request", ADD_OFFSETS_TO_TXN_REQUEST).alias("q"),
        F.from_json("response", ERROR_ONLY[ADD_OFFSETS_TO_TXN]).alias("r"))
    offsets = offsets.select(*_ev(F.lit(ADD_OFFSETS), F.col("q.ProducerId"),
                                  F.col("q.ProducerEpoch"), F.col("q.TransactionalId"),
                                  F.col("r.ErrorCode"), group=F.col("q.GroupId")))
    toc = ex.filter(is_api(TXN_OFFSET_COMMIT)).select(
        "*", F.from_json("request", TXN_OFFSET_COMMIT_REQUEST).alias("q"))
    toc = toc.select(*_ev(F.lit(TXN_OFFSET_COMMIT_EV), F.col("q.ProducerId"),
                          F.col("q.ProducerEpoch"), F.col("q.TransactionalId"), None,
                          group=F.col("q.GroupId")))
    end = ex.filter(is_api(END_TXN)).select(
        "*", F.from_json("request", END_TXN_REQUEST).alias("q"),
        F.from_json("response", ERROR_ONLY[END_TXN]).alias("r"))
    end = end.select(*_ev(F.when(F.col("q.Committed"), F.lit(COMMIT)).otherwise(F.lit(ABORT)),
                          F.col("q.ProducerId"), F.col("q.ProducerEpoch"),
                          F.col("q.TransactionalId"), F.col("r.ErrorCode")))
    return init.unionByName(add).unionByName(offsets).unionByName(toc).unionByName(end)


def _body_produce(ex: DataFrame, captures_with_records: DataFrame | None) -> DataFrame:
    """Transactional Produce requests of captures exported without record lines."""
    prod = ex.filter(is_api(PRODUCE) & F.col("request").isNotNull())
    if captures_with_records is not None:
        prod = prod.join(F.broadcast(captures_with_records), "capture", "left_anti")
    prod = prod.select("*", F.from_json("request", PRODUCE_REQUEST).alias("q")) \
        .filter(F.col("q.TransactionalId").isNotNull())
    return prod.select(*_ev(F.lit(PRODUCE_EV), _null("long"), _null("long"), F.col("q.TransactionalId"),
                            None, records=F.col("record_count")))


def _record_events(ex: DataFrame, rec: DataFrame) -> DataFrame:
    def context(api_key: int) -> DataFrame:
        return ex.filter(is_api(api_key)).select(
            F.col("capture"), F.col("index").alias("exchange"), "ts", "client_id", "status")
    produced = (rec.filter((F.col("side") == "request") & (F.col("producer_id") >= 0)
                           & (F.col("api_key") == PRODUCE))
                .groupBy("capture", "exchange", "producer_id", "producer_epoch")
                .agg(F.count(F.lit(1)).alias("records"),
                     F.countDistinct("topic", "partition", "batch_index").alias("batches"))
                .join(context(PRODUCE), ["capture", "exchange"])
                .withColumn("index", F.col("exchange")))
    produced = produced.select(*_ev(F.lit(PRODUCE_EV), F.col("producer_id"),
                                    F.col("producer_epoch"), _null("string"), None,
                                    records=F.col("records"), batches=F.col("batches")))
    markers = (rec.filter((F.col("side") == "response") & F.col("control_type")
                          .isin("COMMIT", "ABORT") & (F.col("producer_id") >= 0)
                          & (F.col("api_key") == FETCH))
               .join(context(FETCH), ["capture", "exchange"])
               .groupBy("producer_id", "producer_epoch", "control_type", "topic", "partition",
                        "offset")
               .agg(F.min("ts").alias("ts"), F.min_by("client_id", "ts").alias("client_id"),
                    F.min_by("capture", "ts").alias("capture"),
                    F.min_by("exchange", "ts").alias("index"))
               .withColumn("status", F.lit("paired")))
    markers = markers.select(*_ev(
        F.when(F.col("control_type") == "COMMIT", F.lit(COMMIT_MARKER))
        .otherwise(F.lit(ABORT_MARKER)),
        F.col("producer_id"), F.col("producer_epoch"), _null("string"), None))
    return produced.unionByName(markers)


def _raw_events(exports: Exports) -> DataFrame:
    """The producer events of bodies and record lines, ids not yet completed."""
    ex, rec = exports.exchanges, exports.records
    if exports.record_lines:
        with_records = rec.filter(F.col("side") == "request").select("capture").distinct()
        return _body_events(ex).unionByName(_body_produce(ex, with_records)) \
            .unionByName(_record_events(ex, rec))
    return _body_events(ex).unionByName(_body_produce(ex, None))


def producer_events(exports: Exports) -> DataFrame:
    """All producer events, with producer ids and transactional ids completed from each
    other where the capture pairs them (see the module contract)."""
    # Read three times below: shared (checkpointed) so its wide plan is planned once.
    events = exports.derived("producer_raw_events", _raw_events)
    # transactional produce requests: the producer id last known for their transactional id
    w = Window.partitionBy("transactional_id").orderBy("ts", "index") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    named = events.filter(F.col("transactional_id").isNotNull()).withColumn(
        "producer_id", F.coalesce(F.col("producer_id"),
                                  F.last("producer_id", ignorenulls=True).over(w)))
    events = named.unionByName(events.filter(F.col("transactional_id").isNull()))
    # record-based events: the transactional id that producer id was seen with
    ids = events.filter(F.col("producer_id").isNotNull() & F.col("transactional_id").isNotNull()) \
        .groupBy("producer_id").agg(F.max("transactional_id").alias("_txn"))
    return events.join(ids, "producer_id", "left").withColumn(
        "transactional_id", F.coalesce("transactional_id", "_txn")).drop("_txn")


def _count(event: str, extra: Column | None = None) -> Column:
    cond = F.col("event") == event
    if extra is not None:
        cond = cond & extra
    return F.sum(F.when(cond, 1).otherwise(0))


def _ended() -> Column:
    return F.col("event").isin(COMMIT, ABORT) & F.col("error_name").isNull() \
        & (F.col("status") == "paired")


def producing_clients(exports: Exports, events: DataFrame) -> DataFrame:
    """The ``producing_clients`` table (see the module contract)."""
    q = (exports.exchanges.filter(is_api(PRODUCE) & F.col("request").isNotNull())
         .select("capture", "index", "ts", "client_id",
                 F.from_json("request", PRODUCE_REQUEST).alias("q")))
    td = q.select("capture", "index", "ts", "client_id", F.col("q.Acks").alias("acks"),
                  nonempty(F.col("q.TransactionalId")).alias("transactional_id"),
                  F.explode_outer("q.TopicData").alias("td"))
    pd = td.select("capture", "index", "ts", "client_id", "acks", "transactional_id",
                   topic_of(F.col("td"), "Name").alias("topic"),
                   F.explode_outer("td.PartitionData").alias("pd"))
    per_client = pd.groupBy("client_id").agg(
        F.countDistinct("capture", "index").alias("produce_requests"),
        F.array_sort(F.collect_set("topic")).alias("topics"),
        F.countDistinct("topic", "pd.Index").alias("partitions"),
        F.coalesce(F.sum("pd.Records.record_count"), F.lit(0)).alias("records"),
        F.coalesce(F.sum("pd.Records.size"), F.lit(0)).alias("bytes"),
        F.coalesce(F.sum("pd.Records.batch_count"), F.lit(0)).alias("batches"),
        F.array_sort(F.collect_set("acks")).alias("acks"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_set("pd.Records.codecs"))))
        .alias("codecs"),
        F.array_sort(F.collect_set("transactional_id")).alias("transactional_ids"),
        F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))
    own = ~F.col("event").isin(COMMIT_MARKER, ABORT_MARKER)
    ids = (events.filter(own & F.col("producer_id").isNotNull() & (F.col("producer_id") >= 0))
           .groupBy(F.col("client_id").alias("_client"))
           .agg(F.array_sort(F.collect_set("producer_id")).alias("producer_ids"),
                F.array_sort(F.collect_set("producer_epoch")).alias("epochs")))
    joined = per_client.join(ids, per_client["client_id"].eqNullSafe(ids["_client"]), "left")
    return (joined.select("client_id", "produce_requests", "topics", "partitions", "records",
                          "bytes", "batches", "acks", "codecs", "transactional_ids",
                          F.coalesce("producer_ids", F.array().cast("array<bigint>"))
                          .alias("producer_ids"),
                          F.coalesce("epochs", F.array().cast("array<bigint>")).alias("epochs"),
                          "first_ts", "last_ts")
            .orderBy(F.desc("records"), F.desc("bytes"), F.col("client_id").asc_nulls_last()))


def compute(exports: Exports, options: AnalysisOptions) -> dict[str, DataFrame]:
    events = exports.derived("producer_events", producer_events)
    produce = F.col("event") == PRODUCE_EV
    own = ~F.col("event").isin(COMMIT_MARKER, ABORT_MARKER)   # markers are seen by consumers
    producers = (events.filter(F.col("producer_id").isNotNull() & (F.col("producer_id") >= 0))
                 .groupBy("producer_id")
                 .agg(F.when(F.count("transactional_id") > 0, F.lit("transactional"))
                      .otherwise(F.lit("idempotent")).alias("kind"),
                      F.array_sort(F.collect_set("transactional_id")).alias("transactional_ids"),
                      F.array_sort(F.collect_set("producer_epoch")).alias("epochs"),
                      F.array_sort(F.collect_set(F.when(own, F.col("client_id"))))
                      .alias("client_ids"),
                      F.min(F.when(own, F.col("ts"))).alias("first_ts"),
                      F.max(F.when(own, F.col("ts"))).alias("last_ts"),
                      _count(INIT).alias("init_calls"),
                      F.countDistinct(F.when(produce, F.struct("capture", "index")))
                      .alias("produce_requests"),
                      F.sum(F.when(produce, F.col("records"))).alias("records"),
                      F.sum(F.when(produce, F.col("batches"))).alias("batches"),
                      _count(ADD_PARTITIONS).alias("add_partitions"),
                      F.sum(F.when(F.col("event") == ADD_PARTITIONS, F.col("partitions")))
                      .alias("partitions_added"),
                      _count(ADD_OFFSETS).alias("add_offsets"),
                      _count(TXN_OFFSET_COMMIT_EV).alias("txn_offset_commits"),
                      F.sum(F.when(_ended() & (F.col("event") == COMMIT), 1).otherwise(0))
                      .alias("commits"),
                      F.sum(F.when(_ended() & (F.col("event") == ABORT), 1).otherwise(0))
                      .alias("aborts"),
                      F.sum(F.when(F.col("event").isin(COMMIT, ABORT)
                                   & F.col("error_name").isNotNull(), 1).otherwise(0))
                      .alias("end_txn_errors"),
                      _count(COMMIT_MARKER).alias("commit_markers"),
                      _count(ABORT_MARKER).alias("abort_markers"))
                 .orderBy("first_ts", "producer_id"))
    txn_events = events.filter(F.col("transactional_id").isNotNull()
                               & ~F.col("event").isin(INIT, COMMIT_MARKER, ABORT_MARKER))
    w = Window.partitionBy("transactional_id").orderBy("ts", "index") \
        .rowsBetween(Window.unboundedPreceding, -1)
    seq = txn_events.withColumn("_end", _ended()).withColumn(
        "_seq", F.coalesce(F.sum(F.when(F.col("_end"), 1).otherwise(0)).over(w), F.lit(0)))
    work = ~F.col("event").isin(COMMIT, ABORT)
    transactions = (seq.groupBy("transactional_id", "_seq")
                    .agg(F.max(F.when(F.col("_end"), F.col("event"))).alias("_outcome"),
                         F.max("producer_id").alias("producer_id"),
                         F.max("producer_epoch").alias("producer_epoch"),
                         F.min("ts").alias("start_ts"),
                         F.max(F.when(F.col("_end"), F.col("ts"))).alias("end_ts"),
                         F.sum(F.when(F.col("event") == ADD_PARTITIONS, F.col("partitions"))
                               .otherwise(0)).alias("partitions_added"),
                         F.sum(F.when(F.col("event") == PRODUCE_EV, 1).otherwise(0))
                         .alias("produce_requests"),
                         F.sum(F.when(F.col("event") == PRODUCE_EV, F.col("records"))
                               .otherwise(0)).alias("records"),
                         F.sum(F.when(F.col("event") == TXN_OFFSET_COMMIT_EV, 1).otherwise(0))
                         .alias("offset_commits"),
                         F.sum(F.when(~work & ~F.col("_end"), 1).otherwise(0))
                         .alias("end_txn_errors"),
                         F.max("client_id").alias("client_id"))
                    .withColumn("outcome", F.when(F.col("_outcome") == COMMIT, "committed")
                                .when(F.col("_outcome") == ABORT, "aborted").otherwise("open"))
                    .withColumn("duration_ms", (F.col("end_ts") - F.col("start_ts")) * 1000.0)
                    .select("transactional_id", F.col("_seq").alias("sequence"), "producer_id",
                            "producer_epoch", "outcome", "start_ts", "end_ts", "duration_ms",
                            "partitions_added", "produce_requests", "records", "offset_commits",
                            "end_txn_errors", "client_id")
                    .orderBy("transactional_id", "sequence"))
    summary = (transactions.groupBy("transactional_id")
               .agg(F.count(F.lit(1)).alias("transactions"),
                    F.sum(F.when(F.col("outcome") == "committed", 1).otherwise(0))
                    .alias("committed"),
                    F.sum(F.when(F.col("outcome") == "aborted", 1).otherwise(0)).alias("aborted"),
                    F.sum(F.when(F.col("outcome") == "open", 1).otherwise(0)).alias("open"),
                    F.avg("duration_ms").alias("mean_duration_ms"),
                    F.max("duration_ms").alias("max_duration_ms"),
                    F.array_sort(F.collect_set("producer_id")).alias("producer_ids"))
               .orderBy("transactional_id"))
    return {"producer_events": events.orderBy("ts", "event"), "producers": producers,
            "producing_clients": producing_clients(exports, events),
            "transactions": transactions, "transactions_summary": summary}
