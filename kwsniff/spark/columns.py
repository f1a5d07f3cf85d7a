"""Column expressions shared by the analyses (pure expressions, no jobs run here)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

#: the modern Kafka protocol (``protocol`` column); 0.7 bodies are parsed separately
KAFKA = "kafka"
KAFKA07 = "kafka-0.7"


def topic_of(struct: Column, name_field: str, with_id: bool = True) -> Column:
    """A topic struct's name: its name field, else (``with_id``: the view has
    ``_topic_name`` and ``TopicId``) the name kwsniff resolved for its ``TopicId``, else
    the id text."""
    if not with_id:
        return struct[name_field]
    return F.coalesce(struct[name_field], struct["_topic_name"], struct["TopicId"])


def error_name_of(code: Column) -> Column:
    """The name of a non-zero error ``code`` of the row (from its ``error_codes`` /
    ``error_names`` arrays, which list every non-zero code of the response); null for 0
    or null, ``"error <n>"`` for a code the row does not name."""
    pos = F.array_position(F.col("error_codes"), code.cast("long"))
    return F.when(code.isNull() | (code == 0), F.lit(None).cast("string")).otherwise(
        F.coalesce(F.when(pos > 0, F.element_at(F.col("error_names"), pos.cast("int"))),
                   F.concat(F.lit("error "), code.cast("string"))))


def bucket_cols(ts: Column, seconds: float) -> list[Column]:
    """``bucket_start`` (UTC timestamp) and ``bucket_epoch`` (seconds) of ``ts``."""
    epoch = F.floor(ts / F.lit(seconds)) * F.lit(seconds)
    return [F.timestamp_seconds(epoch).alias("bucket_start"),
            epoch.cast("double").alias("bucket_epoch")]


def client_host(col: str = "client") -> Column:
    """The address part of ``"ip:port"`` / ``"[ip]:port"``."""
    return F.regexp_extract(F.col(col), r"^(.*):[0-9]+$", 1)


def exchange_id() -> Column:
    """What identifies one exchange across exports: ``(capture, index)``."""
    return F.struct(F.col("capture"), F.col("index"))


def is_api(api_key: int, protocol: str = KAFKA) -> Column:
    return (F.col("protocol") == protocol) & (F.col("api_key") == api_key)


def nonempty(col: Any) -> Column:
    c = F.col(col) if isinstance(col, str) else col
    return F.when(c == "", F.lit(None).cast("string")).otherwise(c)
