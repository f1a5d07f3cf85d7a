"""Kafka error codes answered by brokers: by code name, API, topic and client.

Every non-zero error code in a response is an *occurrence*, located by
:func:`kwsniff.spark.error_sites.error_sites` at its topic (and partition) when the code
sits inside a topic struct, else topic null (e.g. JoinGroup's top-level error). Only
exchanges with a non-empty ``error_codes`` are examined (a Python UDF, on those rows
only); if a body cannot be walked its codes still count, with topic null.

Tables:

* ``errors``: per ``error_code, error_name, api_name, topic, client_id``:
  ``exchanges`` (distinct exchanges), ``occurrences``, ``first_ts``, ``last_ts``;
* ``errors_by_code``: per ``error_code, error_name``: ``exchanges``, ``occurrences``,
  ``apis``, ``topics``, ``clients`` (sorted distinct values), ``first_ts``, ``last_ts``.
* ``statuses``: exchanges per ``api_name`` and ``status`` (paired, unanswered,
  orphan_response, no_response_expected) with ``problems`` (decode problems reported on
  those exchanges): what went wrong beside error codes.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kwsniff.spark.columns import error_name_of
from kwsniff.spark.error_sites import error_sites
from kwsniff.spark.jobs import AnalysisOptions
from kwsniff.spark.load import Exports

SITE_TYPE = T.ArrayType(T.StructType([
    T.StructField("code", T.LongType()),
    T.StructField("topic", T.StringType()),
    T.StructField("partition", T.LongType()),
]))


def error_occurrences(exports: Exports) -> DataFrame:
    """One row per error occurrence with its exchange's context."""
    sites_udf = F.udf(error_sites, SITE_TYPE, useArrow=False)
    ex = exports.exchanges.filter(F.size("error_codes") > 0)
    found = ex.select("capture", "index", "ts", "api_name", "client_id", "error_codes",
                      "error_names", sites_udf(F.col("response")).alias("sites"))
    fallback = F.transform("error_codes", lambda c: F.struct(
        c.alias("code"), F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("long").alias("partition")))
    sites = F.when(F.size("sites") > 0, F.col("sites")).otherwise(fallback)
    return (found.select("capture", "index", "ts", "api_name", "client_id", "error_codes",
                         "error_names", F.explode(sites).alias("s"))
            .select("capture", "index", "ts", "api_name", "client_id",
                    F.col("s.code").alias("error_code"),
                    error_name_of(F.col("s.code")).alias("error_name"),
                    F.col("s.topic").alias("topic"), F.col("s.partition").alias("partition")))


def compute(exports: Exports, options: AnalysisOptions) -> dict[str, DataFrame]:
    occ = exports.derived("error_occurrences", error_occurrences)
    xid = F.struct("capture", "index")
    detail = (occ.groupBy("error_code", "error_name", "api_name", "topic", "client_id")
              .agg(F.countDistinct(xid).alias("exchanges"),
                   F.count(F.lit(1)).alias("occurrences"),
                   F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))
              .orderBy(F.desc("occurrences"), "error_code", "api_name", "topic", "client_id"))
    by_code = (occ.groupBy("error_code", "error_name")
               .agg(F.countDistinct(xid).alias("exchanges"),
                    F.count(F.lit(1)).alias("occurrences"),
                    F.array_sort(F.collect_set("api_name")).alias("apis"),
                    F.array_sort(F.collect_set("topic")).alias("topics"),
                    F.array_sort(F.collect_set("client_id")).alias("clients"),
                    F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))
               .orderBy(F.desc("occurrences"), "error_code"))
    statuses = (exports.exchanges.groupBy("api_name", "status")
                .agg(F.count(F.lit(1)).alias("exchanges"),
                     F.sum("problem_count").alias("problems"))
                .orderBy("api_name", "status"))
    return {"errors": detail, "errors_by_code": by_code, "statuses": statuses}
