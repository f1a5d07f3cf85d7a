"""Writing result tables: Parquet (typed, nested) and CSV (flat) under an output root.

Contract: :func:`write_table` writes ``df`` as ``ROOT/parquet/<name>/`` (Spark's Parquet
directory, overwritten) and as CSV with a header: on a local root one file
``ROOT/csv/<name>.csv``; on a remote root (``hdfs://``, ``s3a://`` ...) Spark's
directory ``ROOT/csv/<name>/``. CSV cells of array and struct columns hold their JSON
text, doubles are plain decimals with 6 places, quotes are doubled (RFC 4180),
timestamps are ISO-8601 UTC. ``root`` may be a plain path or a ``file://`` URI.
"""

from __future__ import annotations

import glob
import os
import shutil

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T


def is_remote(root: str) -> bool:
    return "://" in root and not root.startswith("file://")


def local_path(root: str) -> str:
    return root[len("file://"):] if root.startswith("file://") else root


CSV_DECIMAL = "decimal(38,6)"


def flat_for_csv(df: DataFrame) -> DataFrame:
    """Arrays, maps and structs become their JSON text (CSV has no nested types);
    doubles are written as plain decimals with 6 places (µs for epoch seconds), not in
    scientific notation (a non-finite double becomes empty)."""
    cols = []
    for f in df.schema.fields:
        if isinstance(f.dataType, (T.ArrayType, T.MapType, T.StructType)):
            cols.append(F.to_json(F.col(f.name)).alias(f.name))
        elif isinstance(f.dataType, (T.DoubleType, T.FloatType)):
            cols.append(F.col(f.name).try_cast(CSV_DECIMAL).alias(f.name))
        else:
            cols.append(F.col(f.name))
    return df.select(*cols)


def write_table(df: DataFrame, root: str, name: str) -> None:
    """Write one result table (see the module contract)."""
    write_parquet(df, root, name)
    write_csv(df, root, name)


def write_parquet(df: DataFrame, root: str, name: str) -> None:
    """The Parquet half of :func:`write_table`."""
    df.write.mode("overwrite").parquet(f"{root.rstrip('/')}/parquet/{name}")


def write_csv(df: DataFrame, root: str, name: str) -> None:
    """The CSV half of :func:`write_table` (independent of the Parquet half: both may
    run at once)."""
    flat = flat_for_csv(df).coalesce(1)
    writer = (flat.write.mode("overwrite").option("header", "true").option("escape", '"')
              .option("timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSZZZZZ"))
    if is_remote(root):
        writer.csv(f"{root.rstrip('/')}/csv/{name}")
        return
    base = local_path(root)
    staging = os.path.join(base, "csv", f".{name}.tmp")
    writer.csv(staging)
    parts = sorted(glob.glob(os.path.join(staging, "part-*.csv")))
    target = os.path.join(base, "csv", f"{name}.csv")
    if parts:
        os.replace(parts[0], target)
    else:   # an empty table: Spark may write no part file; keep the header-only file
        header = ",".join(f.name for f in df.schema.fields)
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(header + "\n")
    shutil.rmtree(staging, ignore_errors=True)
