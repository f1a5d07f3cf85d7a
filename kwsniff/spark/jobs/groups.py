"""Consumer groups: membership, generations, rebalances, committed offsets, lag.

Tables:

* ``group_events``: one row per membership event, ``event`` being
  ``join`` (JoinGroup; ``ts`` is the request time, ``done_ts`` the response time;
  ``generation`` the GenerationId it returned, ``leader`` whether this member was made
  leader; KIP-848 ConsumerGroupHeartbeat with MemberEpoch 0 also counts, its new member
  epoch as generation), ``sync`` (SyncGroup; ``assignment`` the partitions assigned
  as ``topic:p,p;...`` when the consumer protocol was decoded) and ``leave``
  (LeaveGroup, each member of v3+ batches; ConsumerGroupHeartbeat with MemberEpoch -1
  or -2). ``error_name`` is the response's error (null when none, or unanswered).
* ``group_generations``: per ``group_id, generation`` (successful joins): ``members``,
  ``leader``, ``protocol``, ``join_start`` (first JoinGroup request that got this
  generation), ``sync_end`` (last successful SyncGroup response for it) and
  ``rebalance_ms`` between the two.
* ``rebalances``: per member and generation: ``join_ts`` (its JoinGroup request that got
  the generation) -> ``sync_ts`` (its successful SyncGroup response): ``duration_ms``.
* ``committed_offsets``: every partition of every OffsetCommit / TxnOffsetCommit
  request: ``ts, group_id, topic, partition, committed_offset, member_id, generation,
  api_name, transactional_id, error_name`` (the partition's error in the response).
* ``consumer_lag``: each successful commit with the latest high watermark of that
  partition seen in any Fetch response at or before the commit (``hw_ts``):
  ``lag = high_watermark - committed_offset``; commits with no earlier high watermark in
  the capture are left out.
* ``consumer_lag_summary``: per ``group_id, topic, partition``: ``commits``,
  ``max_lag``, ``last_lag`` (at the latest commit), ``last_ts``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kwsniff.spark.columns import error_name_of, is_api, nonempty, topic_of
from kwsniff.spark.jobs import AnalysisOptions
from kwsniff.spark.jobs.traffic import shared_partition_rows
from kwsniff.spark.load import Exports
from kwsniff.spark.views import (
    CONSUMER_GROUP_HEARTBEAT,
    CONSUMER_GROUP_HEARTBEAT_REQUEST,
    CONSUMER_GROUP_HEARTBEAT_RESPONSE,
    ERROR_ONLY,
    JOIN_GROUP,
    JOIN_GROUP_REQUEST,
    JOIN_GROUP_RESPONSE,
    LEAVE_GROUP,
    LEAVE_GROUP_REQUEST,
    OFFSET_COMMIT,
    OFFSET_COMMIT_REQUEST,
    OFFSET_COMMIT_RESPONSE,
    SYNC_GROUP,
    SYNC_GROUP_REQUEST,
    SYNC_GROUP_RESPONSE,
    TXN_OFFSET_COMMIT,
    TXN_OFFSET_COMMIT_REQUEST,
    TXN_OFFSET_COMMIT_RESPONSE,
)

JOIN, SYNC, LEAVE = "join", "sync", "leave"

EVENT_COLUMNS = ("group_id", "member_id", "event", "generation", "ts", "done_ts",
                 "error_name", "leader", "protocol", "assignment", "reason", "client_id",
                 "client", "broker", "capture", "index")

def _null(kind: str) -> Column:
    return F.lit(None).cast(kind)


def _event(group: Column, member: Column, event: str, generation: Column,
           error_code: Column, leader: Column | None = None, protocol: Column | None = None,
           assignment: Column | None = None, reason: Column | None = None) -> list[Column]:
    def opt(col: Column | None, kind: str) -> Column:
        return col if col is not None else _null(kind)
    return [group.alias("group_id"), member.alias("member_id"), F.lit(event).alias("event"),
            generation.cast("long").alias("generation"), F.col("ts"),
            F.col("response_ts").alias("done_ts"),
            error_name_of(error_code).alias("error_name"),
            opt(leader, "boolean").alias("leader"), opt(protocol, "string").alias("protocol"),
            opt(assignment, "string").alias("assignment"),
            opt(reason, "string").alias("reason"), F.col("client_id"), F.col("client"),
            F.col("broker"), F.col("capture"), F.col("index")]


def _joins(ex: DataFrame) -> DataFrame:
    j = ex.filter(is_api(JOIN_GROUP)).select(
        "*", F.from_json("request", JOIN_GROUP_REQUEST).alias("q"),
        F.from_json("response", JOIN_GROUP_RESPONSE).alias("r"))
    ok = F.col("r.ErrorCode") == 0
    member = F.coalesce(nonempty(F.col("r.MemberId")), nonempty(F.col("q.MemberId")))
    return j.select(*_event(
        F.col("q.GroupId"), member, JOIN, F.when(ok, F.col("r.GenerationId")),
        F.col("r.ErrorCode"),
        leader=F.when(ok, F.col("r.Leader") == F.col("r.MemberId")),
        protocol=F.when(ok, F.col("r.ProtocolName"))))


def _syncs(ex: DataFrame) -> DataFrame:
    s = ex.filter(is_api(SYNC_GROUP)).select(
        "*", F.from_json("request", SYNC_GROUP_REQUEST).alias("q"),
        F.from_json("response", SYNC_GROUP_RESPONSE).alias("r"))
    parts = F.col("r._decoded_Assignment.data.AssignedPartitions")
    assignment = F.when(parts.isNotNull(), F.array_join(F.transform(parts, lambda a: F.concat(
        a["Topic"], F.lit(":"), F.array_join(a["Partitions"].cast("array<string>"), ","))),
        ";"))
    return s.select(*_event(F.col("q.GroupId"), nonempty(F.col("q.MemberId")), SYNC,
                            F.col("q.GenerationId"), F.col("r.ErrorCode"),
                            assignment=assignment))


def _leaves(ex: DataFrame) -> DataFrame:
    lv = ex.filter(is_api(LEAVE_GROUP)).select(
        "*", F.from_json("request", LEAVE_GROUP_REQUEST).alias("q"),
        F.from_json("response", ERROR_ONLY[LEAVE_GROUP]).alias("r"))
    members = F.when(F.size(F.coalesce(F.col("q.Members"), F.array())) > 0, F.col("q.Members")) \
        .otherwise(F.array(F.struct(F.col("q.MemberId").alias("MemberId"),
                                    _null("string").alias("Reason"))))
    lv = lv.select("*", F.explode(members).alias("m"))
    return lv.select(*_event(F.col("q.GroupId"), nonempty(F.col("m.MemberId")), LEAVE, _null("long"),
                             F.col("r.ErrorCode"), reason=F.col("m.Reason")))


def _heartbeats_848(ex: DataFrame) -> DataFrame:
    h = ex.filter(is_api(CONSUMER_GROUP_HEARTBEAT)).select(
        "*", F.from_json("request", CONSUMER_GROUP_HEARTBEAT_REQUEST).alias("q"),
        F.from_json("response", CONSUMER_GROUP_HEARTBEAT_RESPONSE).alias("r"))
    member = F.coalesce(nonempty(F.col("r.MemberId")), nonempty(F.col("q.MemberId")))
    epoch = F.col("q.MemberEpoch")
    joins = h.filter(epoch == 0).select(*_event(
        F.col("q.GroupId"), member, JOIN,
        F.when(F.col("r.ErrorCode") == 0, F.col("r.MemberEpoch")), F.col("r.ErrorCode"),
        protocol=F.lit("consumer (KIP-848)")))
    leaves = h.filter(epoch.isin(-1, -2)).select(*_event(
        F.col("q.GroupId"), member, LEAVE, _null("long"), F.col("r.ErrorCode")))
    return joins.unionByName(leaves)


def group_events(exports: Exports) -> DataFrame:
    ex = exports.exchanges
    return _joins(ex).unionByName(_syncs(ex)).unionByName(_leaves(ex)) \
        .unionByName(_heartbeats_848(ex))


def _commits(ex: DataFrame, api_key: int, req_view: T.StructType, resp_view: T.StructType,
             generation: str) -> DataFrame:
    with_id = api_key == OFFSET_COMMIT
    c = ex.filter(is_api(api_key) & F.col("request").isNotNull()).select(
        "*", F.from_json("request", req_view).alias("q"),
        F.from_json("response", resp_view).alias("r"))
    answered = F.flatten(F.transform(F.coalesce(F.col("r.Topics"), F.array()), lambda t: F.transform(
        t["Partitions"], lambda p: F.struct(topic_of(t, "Name", with_id).alias("topic"),
                                            p["PartitionIndex"].cast("long").alias("partition"),
                                            p["ErrorCode"].alias("code")))))
    txn = F.col("q.TransactionalId") if api_key == TXN_OFFSET_COMMIT else _null("string")
    t = c.select("*", answered.alias("answered"), F.explode("q.Topics").alias("tp"))
    t = t.select("*", topic_of(F.col("tp"), "Name", with_id).alias("topic"),
                 F.explode("tp.Partitions").alias("p"))
    partition = F.col("p.PartitionIndex").cast("long")
    code = F.get(F.filter("answered", lambda a: (a["topic"] == F.col("topic"))
                          & (a["partition"] == partition)), 0)["code"]
    return t.select(
        "ts", F.col("q.GroupId").alias("group_id"), "topic", partition.alias("partition"),
        F.col("p.CommittedOffset").alias("committed_offset"),
        nonempty(F.col("q.MemberId")).alias("member_id"),
        F.col(f"q.{generation}").cast("long").alias("generation"), "api_name",
        txn.alias("transactional_id"), error_name_of(code).alias("error_name"),
        "status", "client_id", "capture", "index")


def committed_offsets(exports: Exports) -> DataFrame:
    ex = exports.exchanges
    return _commits(ex, OFFSET_COMMIT, OFFSET_COMMIT_REQUEST, OFFSET_COMMIT_RESPONSE,
                    "GenerationIdOrMemberEpoch").unionByName(
        _commits(ex, TXN_OFFSET_COMMIT, TXN_OFFSET_COMMIT_REQUEST, TXN_OFFSET_COMMIT_RESPONSE,
                 "GenerationId"))


def _lag(commits: DataFrame, partitions: DataFrame) -> DataFrame:
    marks = partitions.filter(F.col("direction").isin("fetch", "replica-fetch")
                              & (F.col("high_watermark") >= 0)
                              & (F.coalesce(F.col("error_code"), F.lit(0)) == 0)) \
        .select("topic", "partition", F.col("t").alias("ts"), F.lit(0).alias("_order"),
                F.col("high_watermark").alias("_hw"))
    good = commits.filter((F.col("status") == "paired") & F.col("error_name").isNull()
                          & (F.col("committed_offset") >= 0))
    rows = good.select("topic", "partition", "ts", F.lit(1).alias("_order"),
                       F.lit(None).cast("long").alias("_hw"), "group_id", "committed_offset",
                       "member_id", "client_id", "api_name")
    marks = marks.select(*rows.columns[:5], *[F.lit(None).cast(rows.schema[c].dataType).alias(c)
                                              for c in rows.columns[5:]])
    w = Window.partitionBy("topic", "partition").orderBy("ts", "_order") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    both = marks.unionByName(rows).select(
        "*", F.last("_hw", ignorenulls=True).over(w).alias("high_watermark"),
        F.last(F.when(F.col("_hw").isNotNull(), F.col("ts")), ignorenulls=True).over(w)
        .alias("hw_ts"))
    return (both.filter((F.col("_order") == 1) & F.col("high_watermark").isNotNull())
            .select("ts", "group_id", "topic", "partition", "committed_offset",
                    "high_watermark", "hw_ts",
                    (F.col("high_watermark") - F.col("committed_offset")).alias("lag"),
                    "member_id", "client_id", "api_name"))


def compute(exports: Exports, options: AnalysisOptions) -> dict[str, DataFrame]:
    events = exports.derived("group_events", group_events)
    joins = events.filter((F.col("event") == JOIN) & F.col("generation").isNotNull())
    syncs = events.filter((F.col("event") == SYNC) & F.col("error_name").isNull()
                          & F.col("done_ts").isNotNull())
    keys = ["group_id", "generation"]
    gen_joins = joins.groupBy(*keys).agg(
        F.countDistinct("member_id").alias("members"),
        F.max(F.when(F.col("leader"), F.col("member_id"))).alias("leader"),
        F.max("protocol").alias("protocol"), F.min("ts").alias("join_start"))
    gen_syncs = syncs.groupBy(*keys).agg(F.max("done_ts").alias("sync_end"))
    generations = (gen_joins.join(gen_syncs, keys, "left")
                   .withColumn("rebalance_ms", (F.col("sync_end") - F.col("join_start")) * 1000.0)
                   .orderBy("group_id", "generation"))
    mkeys = ["group_id", "generation", "member_id"]
    member_joins = joins.groupBy(*mkeys).agg(F.min("ts").alias("join_ts"),
                                             F.max("client_id").alias("client_id"))
    member_syncs = syncs.groupBy(*mkeys).agg(F.min("done_ts").alias("sync_ts"))
    rebalances = (member_joins.join(member_syncs, mkeys, "left")
                  .withColumn("duration_ms", (F.col("sync_ts") - F.col("join_ts")) * 1000.0)
                  .orderBy("group_id", "generation", "member_id"))
    commits = exports.derived("committed_offsets", committed_offsets)
    # one computation behind both the consumer_lag table and its summary
    lag = exports.derived("consumer_lag",
                          lambda e: _lag(commits, shared_partition_rows(e)))
    lag_summary = (lag.groupBy("group_id", "topic", "partition")
                   .agg(F.count(F.lit(1)).alias("commits"), F.max("lag").alias("max_lag"),
                        F.max_by("lag", "ts").alias("last_lag"), F.max("ts").alias("last_ts"))
                   .orderBy(F.desc("last_lag"), "group_id", "topic", "partition"))
    return {
        "group_events": events.orderBy("group_id", "ts", "event", "member_id"),
        "group_generations": generations,
        "rebalances": rebalances,
        "committed_offsets": commits.orderBy("group_id", "topic", "partition", "ts"),
        "consumer_lag": lag.orderBy("group_id", "topic", "partition", "ts"),
        "consumer_lag_summary": lag_summary,
    }
