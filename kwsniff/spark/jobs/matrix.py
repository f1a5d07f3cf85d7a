"""Who talks to whom: client <-> broker <-> topic.

Tables:

* ``matrix``: per ``client_id, client_host, broker, topic`` (topic null for exchanges
  that name none; an exchange naming several topics counts for each): ``exchanges``,
  ``produce_requests``, ``fetch_requests``, ``request_bytes``, ``response_bytes``,
  ``connections`` (distinct TCP connections), ``apis``, ``first_ts``, ``last_ts``;
* ``client_broker``: per ``client_id, client_host, broker`` (no topic split, so bytes
  are counted once): ``exchanges``, ``request_bytes``, ``response_bytes``,
  ``connections``, ``topics`` (how many distinct topics), ``first_ts``, ``last_ts``.

``client_host`` is the client's address without its (ephemeral) port.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kwsniff.spark.columns import KAFKA, client_host
from kwsniff.spark.jobs import AnalysisOptions
from kwsniff.spark.load import Exports


def compute(exports: Exports, options: AnalysisOptions) -> dict[str, DataFrame]:
    ex = exports.exchanges.select(
        "capture", "stream", "client_id", client_host().alias("client_host"), "broker",
        "topics", "api_key", "api_name", "protocol", "ts", "request_bytes", "response_bytes")
    conn = F.struct("capture", "stream")
    is_kafka = F.col("protocol") == KAFKA
    matrix = (ex.select("*", F.explode_outer("topics").alias("topic"))
              .groupBy("client_id", "client_host", "broker", "topic")
              .agg(F.count(F.lit(1)).alias("exchanges"),
                   F.sum(F.when(is_kafka & (F.col("api_key") == 0), 1).otherwise(0))
                   .alias("produce_requests"),
                   F.sum(F.when(is_kafka & (F.col("api_key") == 1), 1).otherwise(0))
                   .alias("fetch_requests"),
                   F.coalesce(F.sum("request_bytes"), F.lit(0)).alias("request_bytes"),
                   F.coalesce(F.sum("response_bytes"), F.lit(0)).alias("response_bytes"),
                   F.countDistinct(conn).alias("connections"),
                   F.array_sort(F.collect_set("api_name")).alias("apis"),
                   F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))
              .orderBy(F.desc("exchanges"), "client_id", "broker", "topic"))
    pairs = (ex.groupBy("client_id", "client_host", "broker")
             .agg(F.count(F.lit(1)).alias("exchanges"),
                  F.coalesce(F.sum("request_bytes"), F.lit(0)).alias("request_bytes"),
                  F.coalesce(F.sum("response_bytes"), F.lit(0)).alias("response_bytes"),
                  F.countDistinct(conn).alias("connections"),
                  F.size(F.array_distinct(F.flatten(F.collect_set("topics")))).alias("topics"),
                  F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))
             .orderBy(F.desc("exchanges"), "client_id", "broker"))
    return {"matrix": matrix, "client_broker": pairs}
