"""Writing result tables: Parquet (typed, nested) and CSV (flat) under an output root.

Contract: :func:`write_table` writes ``df`` as ``ROOT/parquet/<name>/`` (Spark's Parquet
directory, overwritten) and as CSV with a header: on a local root one file
``ROOT/csv/<name>.csv``; on a remote root (``hdfs://``, ``s3a://`` ...) Spark's
directory ``ROOT/csv/<name>/``. CSV cells of array and struct columns hold their JSON
text, doubles are plain decimals with 6 places, quotes are doubled (RFC 4180),
timestamps are ISO-8601 UTC. ``root`` may be a plain path or a ``file://`` URI.

:func:`write_small_table` writes the same files for a table of at most ``max_rows`` rows
on a local root from the driver: one Spark action (:func:`collect_small`) collects the
table (and the CSV text of its nested, double and timestamp columns, computed by Spark
as above) as Arrow; the driver writes (:func:`write_collected`)
``parquet/<name>/part-00000-kwsniff.snappy.parquet`` (pyarrow; Spark reads the directory
back with the same schema) and the CSV file, byte for byte what Spark writes. It returns False, writing
nothing, for a bigger table or a remote root (then :func:`write_table` is the way).
"""

from __future__ import annotations

import glob
import os
import shutil
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T


def is_remote(root: str) -> bool:
    return "://" in root and not root.startswith("file://")


def local_path(root: str) -> str:
    return root[len("file://"):] if root.startswith("file://") else root


CSV_DECIMAL = "decimal(38,6)"
CSV_TIMESTAMP = "yyyy-MM-dd'T'HH:mm:ss.SSSZZZZZ"


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
              .option("timestampFormat", CSV_TIMESTAMP))
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


#: Rows up to which :func:`write_small_table` writes a table from the driver.
DRIVER_ROWS = 200_000
_CSV_PREFIX = "__kwsniff_csv_"
#: What Spark's CSV writer trims from both ends of a cell (its default
#: ignoreLeading/TrailingWhiteSpace): every character up to the space.
_CSV_TRIMMED = "".join(chr(c) for c in range(33))


def _csv_text_column(f: T.StructField) -> Any | None:
    """The CSV text of column ``f`` as Spark's CSV writer formats it (see
    :func:`flat_for_csv`), for the types whose text the driver cannot derive from the
    Arrow value alone; None for the others."""
    if isinstance(f.dataType, (T.ArrayType, T.MapType, T.StructType)):
        return F.to_json(F.col(f.name))
    if isinstance(f.dataType, (T.DoubleType, T.FloatType)):
        return F.col(f.name).try_cast(CSV_DECIMAL).cast("string")
    if isinstance(f.dataType, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        pattern = "yyyy-MM-dd" if isinstance(f.dataType, T.DateType) else CSV_TIMESTAMP
        return F.date_format(F.col(f.name), pattern)
    return None


def _csv_cell(value: Any) -> str:
    """One CSV cell as Spark writes it: null empty, whitespace and control characters
    trimmed from both ends, an empty string as ``""``, quotes
    doubled, a cell with a comma, quote or line break quoted, booleans in lower case."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip(_CSV_TRIMMED)
    if text == "":
        return '""'
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def collect_small(df: DataFrame, max_rows: int = DRIVER_ROWS, *,
                  count_first: bool = False) -> Any | None:
    """``df`` as a pyarrow Table (its columns, then the CSV text of the columns that need
    Spark to format it), or None when it has more than ``max_rows`` rows. One action;
    with ``count_first`` (for a persisted ``df`` that may be too big: the count fills
    its cache) first a count of up to ``max_rows + 1`` rows, and no collect when over."""
    if count_first and df.limit(max_rows + 1).count() > max_rows:
        return None
    texts = [(i, _csv_text_column(f)) for i, f in enumerate(df.schema.fields)]
    extra = [col.alias(f"{_CSV_PREFIX}{i}") for i, col in texts if col is not None]
    table = df.select(*[F.col(f.name) for f in df.schema.fields], *extra) \
        .limit(max_rows + 1).toArrow()
    return None if table.num_rows > max_rows else table


def write_collected(table: Any, root: str, name: str) -> None:
    """Write a table :func:`collect_small` returned under the local ``root`` (see the
    module contract); no Spark involved."""
    import pyarrow.parquet as pq

    names = [n for n in table.column_names if not n.startswith(_CSV_PREFIX)]
    base = local_path(root)
    directory = os.path.join(base, "parquet", name)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    pq.write_table(table.select(list(range(len(names)))),
                   os.path.join(directory, "part-00000-kwsniff.snappy.parquet"),
                   compression="snappy")
    open(os.path.join(directory, "_SUCCESS"), "wb").close()
    present = set(table.column_names)
    columns = [table.column(f"{_CSV_PREFIX}{i}" if f"{_CSV_PREFIX}{i}" in present else i)
               .to_pylist() for i in range(len(names))]
    os.makedirs(os.path.join(base, "csv"), exist_ok=True)
    target = os.path.join(base, "csv", f"{name}.csv")
    staging = os.path.join(base, "csv", f".{name}.csv.tmp")
    with open(staging, "w", encoding="utf-8", newline="") as fh:
        fh.write(",".join(_csv_cell(n) for n in names) + "\n")
        fh.writelines(",".join(_csv_cell(v) for v in row) + "\n" for row in zip(*columns))
    os.replace(staging, target)


def write_small_table(df: DataFrame, root: str, name: str,
                      max_rows: int = DRIVER_ROWS) -> bool:
    """Write one result table from the driver (see the module contract)."""
    if is_remote(root):
        return False
    table = collect_small(df, max_rows)
    if table is None:
        return False
    write_collected(table, root, name)
    return True
