"""Reading the decoded bodies the insights need: topic names, partitions, record batches.

Decoded bodies are plain dicts keyed by the schemas' field names (see
:mod:`kwsniff.kafka.model`); the field names changed across versions (``Topic`` /
``Name`` / ``TopicId``, ``Partition`` / ``PartitionIndex`` / ``Index``), so every
accessor here tries the names of all versions. Nothing here raises on odd bodies: a
missing or mistyped field reads as None or as an empty list.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kwsniff.output.facts import uuid_text


def items(struct: Any, key: str) -> list[Any]:
    """``struct[key]`` when it is a list of dicts, else an empty list."""
    if not isinstance(struct, dict):
        return []
    value = struct.get(key)
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, dict)]


def integer(struct: Any, *keys: str) -> int | None:
    """The first of ``keys`` holding an int (bools excluded), else None."""
    if not isinstance(struct, dict):
        return None
    for key in keys:
        value = struct.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def text(struct: Any, *keys: str) -> str | None:
    if not isinstance(struct, dict):
        return None
    for key in keys:
        value = struct.get(key)
        if isinstance(value, str):
            return value
    return None


def topic_name(struct: dict[str, Any], names: Any = None) -> str | None:
    """The topic a per-topic struct is about: its name, the name the decoder attached
    to its ``TopicId`` (``_topic_name``), a name learned from ``names`` (a
    :class:`kwsniff.output.facts.TopicNames`), else the id's text."""
    name = text(struct, "Name", "Topic", "_topic_name")
    if name:
        return name
    tid = uuid_text(struct.get("TopicId"))
    if tid is None:
        return None
    if names is not None:
        learned = names.get(tid)
        if learned:
            return learned
    return tid


def partition_index(struct: dict[str, Any]) -> int | None:
    return integer(struct, "PartitionIndex", "Partition", "Index")


def topic_partitions(body: Any, topics_key: str, partitions_key: str,
                     names: Any = None) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """``(topic, partition, partition struct)`` of a body's per-topic/per-partition
    arrays (``Topics``/``Partitions``, ``TopicData``/``PartitionData``, ...)."""
    for topic in items(body, topics_key):
        name = topic_name(topic, names)
        if name is None:
            continue
        for part in items(topic, partitions_key):
            index = partition_index(part)
            if index is not None:
                yield name, index, part


class ExportedBatch:
    """A batch header as the JSON export writes it (``batches`` of a record-set
    summary, :func:`kwsniff.output.jsonl.batch_header`), with the attribute names of
    :class:`kwsniff.kafka.records.Batch` that the insights read."""

    __slots__ = (
        "base_offset",
        "base_sequence",
        "control",
        "last_offset_delta",
        "producer_epoch",
        "producer_id",
        "record_count",
        "truncated",
    )

    def __init__(self, header: dict[str, Any]) -> None:
        for name in self.__slots__:
            value = header.get(name)
            if name in ("control", "truncated"):
                value = value is True
            elif not isinstance(value, int) or isinstance(value, bool):
                value = None
            setattr(self, name, value)


def batches(records: Any) -> list[Any]:
    """The record batches (headers only) of a ``Records`` value, or of the export's
    record-set summary (a dict with ``batches``: :class:`ExportedBatch` each); [] for
    anything else or when the set cannot be parsed."""
    if records is None or isinstance(records, (bytes, bytearray, str)):
        return []
    if isinstance(records, dict):
        headers = records.get("batches")
        if not isinstance(headers, list):
            return []
        return [ExportedBatch(h) for h in headers if isinstance(h, dict)]
    try:
        return list(records.batches)
    except Exception:  # noqa: BLE001 - records.py reports the problem itself
        return []


def batch_span(batch: Any) -> tuple[int, int, int] | None:
    """``(base offset, end offset (exclusive), record count)`` of a complete batch
    with offsets; None for truncated or offset-less batches."""
    base = getattr(batch, "base_offset", None)
    delta = getattr(batch, "last_offset_delta", None)
    if base is None or getattr(batch, "truncated", False):
        return None
    count = getattr(batch, "record_count", None)
    if delta is None:            # legacy message: one offset (a wrapper: its last)
        return base, base + 1, count or 1
    return base, base + delta + 1, count if count is not None else delta + 1


def ensure_bodies(exchange: Any, context: Any) -> None:
    """Decode bodies the engine deferred (``EngineOptions.defer_bodies``) so they can
    be read; a no-op for bodies already decoded."""
    for msg in (exchange.request, exchange.response):
        if msg is not None and msg.deferred is not None:
            from kwsniff.kafka.decoding import complete
            complete(exchange, context)
            return
