"""Latency percentiles of paired exchanges, per API and version, client id, broker, topic.

Tables (one row per group; only ``paired`` exchanges, which alone have ``latency_ms``):

* ``latency_by_api``: ``api_key, api_name, api_version``;
* ``latency_by_client``: ``client_id`` (null when the request carried none);
* ``latency_by_broker``: ``broker`` (``ip:port``);
* ``latency_by_topic``: ``topic`` — an exchange touching several topics counts for each.

Columns: ``exchanges, mean_ms, p50_ms, p90_ms, p99_ms, max_ms``. Percentiles are
Spark's ``percentile_approx`` with the run's accuracy: the smallest latency ``v`` of the
group such that at least ``p`` of the group's latencies are ``<= v`` (nearest rank, no
interpolation), exact when the group has fewer values than the accuracy; ``max_ms`` is
exact.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kwsniff.spark.jobs import AnalysisOptions
from kwsniff.spark.load import Exports

PERCENTILES = (0.5, 0.9, 0.99)

GROUPINGS: dict[str, tuple[str, ...]] = {
    "latency_by_api": ("api_key", "api_name", "api_version"),
    "latency_by_client": ("client_id",),
    "latency_by_broker": ("broker",),
    "latency_by_topic": ("topic",),
}


def _stats(df: DataFrame, keys: tuple[str, ...], accuracy: int) -> DataFrame:
    pct = F.percentile_approx("latency_ms", list(PERCENTILES), accuracy)
    return (df.groupBy(*keys)
            .agg(F.count(F.lit(1)).alias("exchanges"),
                 F.avg("latency_ms").alias("mean_ms"),
                 pct.alias("_p"),
                 F.max("latency_ms").alias("max_ms"))
            .select(*keys, "exchanges", "mean_ms",
                    F.col("_p")[0].alias("p50_ms"), F.col("_p")[1].alias("p90_ms"),
                    F.col("_p")[2].alias("p99_ms"), "max_ms")
            .orderBy(F.desc("exchanges"), *keys))


def compute(exports: Exports, options: AnalysisOptions) -> dict[str, DataFrame]:
    paired = exports.exchanges.filter(F.col("latency_ms").isNotNull()).select(
        "api_key", "api_name", "api_version", "client_id", "broker", "topics", "latency_ms")
    out = {}
    for name, keys in GROUPINGS.items():
        src = paired
        if keys == ("topic",):
            src = paired.select(F.explode("topics").alias("topic"), "latency_ms")
        out[name] = _stats(src, keys, options.accuracy)
    return out
