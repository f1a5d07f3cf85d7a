"""Small tools for plugin authors: topic patterns, the Confluent framing, Kafka readers.

Contract:

* :class:`TopicMap` maps topic globs (``"orders.*"``) to values; :meth:`TopicMap.get`
  returns the value of the first matching pattern (patterns in the order given).
  :func:`topic_pattern` turns a list of globs into one pattern for payload hooks.
* :func:`confluent_frame` splits the Confluent Schema Registry wire format
  (magic byte 0, 4-byte big-endian schema id, payload) or returns None;
  :func:`protobuf_message_indexes` reads the message-index list Confluent's Protobuf
  serializer puts after the schema id.
* :class:`KafkaReader` reads Kafka's primitive types from a frame for vendor API
  decoders; running out of bytes raises :class:`TruncatedError` with the offset.
* :func:`exchange_records` yields every record of an exchange (request first) with its
  side, topic and partition; :func:`per_exchange` memoises a function of an exchange
  for the exchange being output (several fields computed in one walk).
"""

from __future__ import annotations

import fnmatch
import re
import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from kwsniff.kafka.model import Exchange
from kwsniff.kafka.records import Record

T = TypeVar("T")


# ----------------------------------------------------------------------------- topics

def topic_pattern(globs: Iterable[str] | str | None) -> str | re.Pattern[str] | None:
    """One glob as is, several as one regular expression, none (or ``*``) as None."""
    if globs is None:
        return None
    items = [globs] if isinstance(globs, str) else list(globs)
    if not items or "*" in items:
        return None
    if len(items) == 1:
        return items[0]
    return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in items))


class TopicMap(Generic[T]):
    """Topic globs -> values, first match wins (see the module contract)."""

    def __init__(self, items: dict[str, T] | Iterable[tuple[str, T]] = ()) -> None:
        pairs = items.items() if isinstance(items, dict) else items
        self._exact: dict[str, T] = {}
        self._globs: list[tuple[str, T]] = []
        for pattern, value in pairs:
            if any(c in pattern for c in "*?["):
                self._globs.append((pattern, value))
            else:
                self._exact.setdefault(pattern, value)
        self._cache: dict[str | None, T | None] = {}

    def __bool__(self) -> bool:
        return bool(self._exact or self._globs)

    def patterns(self) -> list[str]:
        return [*self._exact, *(p for p, _ in self._globs)]

    def values(self) -> list[T]:
        return [*self._exact.values(), *(v for _, v in self._globs)]

    def get(self, topic: str | None) -> T | None:
        try:
            return self._cache[topic]
        except KeyError:
            pass
        found: T | None = None
        if topic is not None:
            found = self._exact.get(topic)
            if found is None:
                for pattern, value in self._globs:
                    if fnmatch.fnmatchcase(topic, pattern):
                        found = value
                        break
        if len(self._cache) < 65536:
            self._cache[topic] = found
        return found


# ----------------------------------------------------------------------------- Confluent

CONFLUENT_MAGIC = 0


def confluent_frame(data: bytes) -> tuple[int, bytes] | None:
    """``(schema_id, payload)`` of the Confluent wire format, or None when ``data`` does
    not start with magic byte 0 followed by a 4-byte schema id."""
    if len(data) < 5 or data[0] != CONFLUENT_MAGIC:
        return None
    return int.from_bytes(data[1:5], "big"), data[5:]


def _zigzag_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise TruncatedError(f"varint cut at offset {pos}")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError(f"varint too long at offset {pos}")


MAX_MESSAGE_INDEXES = 64


def protobuf_message_indexes(payload: bytes) -> tuple[list[int], bytes]:
    """``(indexes, message bytes)`` after a Confluent Protobuf schema id.

    The list is a zigzag-varint count then that many zigzag varints; a count of 0 (one
    zero byte) means ``[0]``, the first message of the schema. Raises ValueError when
    the list is malformed.
    """
    count, pos = _zigzag_varint(payload, 0)
    if count == 0:
        return [0], payload[pos:]
    if count < 0 or count > MAX_MESSAGE_INDEXES:
        raise ValueError(f"implausible message-index count {count}")
    out = []
    for _ in range(count):
        idx, pos = _zigzag_varint(payload, pos)
        if idx < 0:
            raise ValueError(f"negative message index {idx}")
        out.append(idx)
    return out, payload[pos:]


# ----------------------------------------------------------------------------- vendor APIs

class TruncatedError(ValueError):
    """The data ended before a field did."""


class KafkaReader:
    """Reads Kafka primitive types from ``data`` starting at ``pos`` (vendor API bodies).

    ``pos`` advances as fields are read; ``remaining`` says how many bytes are left.
    Compact (flexible-version) variants are the ``compact_*`` methods.
    """

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TruncatedError(f"needs {n} bytes at offset {self.pos}, "
                                 f"{max(0, len(self.data) - self.pos)} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return bytes(out)

    def _unpack(self, fmt: str, n: int) -> Any:
        return struct.unpack(fmt, self._take(n))[0]

    def int8(self) -> int:
        return self._unpack(">b", 1)

    def int16(self) -> int:
        return self._unpack(">h", 2)

    def int32(self) -> int:
        return self._unpack(">i", 4)

    def int64(self) -> int:
        return self._unpack(">q", 8)

    def uint16(self) -> int:
        return self._unpack(">H", 2)

    def uint32(self) -> int:
        return self._unpack(">I", 4)

    def float64(self) -> float:
        return self._unpack(">d", 8)

    def boolean(self) -> bool:
        return self._take(1) != b"\x00"

    def uuid(self) -> str:
        import uuid as _uuid    # (here: ~3 ms of start-up that most runs never need)

        return str(_uuid.UUID(bytes=self._take(16)))

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
            if shift > 63:
                raise ValueError(f"varint too long at offset {self.pos}")

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def string(self) -> str | None:
        """int16 length + UTF-8 (-1: null)."""
        n = self.int16()
        return None if n < 0 else self._take(n).decode("utf-8", "replace")

    def compact_string(self) -> str | None:
        """uvarint length+1 + UTF-8 (0: null)."""
        n = self.uvarint() - 1
        return None if n < 0 else self._take(n).decode("utf-8", "replace")

    def bytes(self) -> bytes | None:
        """int32 length + bytes (-1: null)."""
        n = self.int32()
        return None if n < 0 else self._take(n)

    def compact_bytes(self) -> bytes | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._take(n)

    def raw(self, n: int) -> bytes:
        return self._take(n)

    def rest(self) -> bytes:
        return self._take(self.remaining)

    def array(self, item: Callable[[KafkaReader], T]) -> list[T] | None:
        """int32 count + items (-1: null)."""
        n = self.int32()
        return None if n < 0 else self._items(n, item)

    def compact_array(self, item: Callable[[KafkaReader], T]) -> list[T] | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._items(n, item)

    def _items(self, n: int, item: Callable[[KafkaReader], T]) -> list[T]:
        if n > self.remaining:   # every element takes at least one byte
            raise TruncatedError(f"array of {n} items at offset {self.pos} cannot fit in "
                                 f"{self.remaining} bytes")
        return [item(self) for _ in range(n)]

    def tagged_fields(self) -> dict[int, bytes]:
        """A flexible version's tagged-field section: ``{tag: raw bytes}``."""
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self._take(self.uvarint())
        return out


# ----------------------------------------------------------------------------- exchanges

def exchange_records(exchange: Exchange) -> Iterator[tuple[str, str | None, int | None, Record]]:
    """``(side, topic, partition, record)`` for every record of the exchange, request
    first. Records are decoded (and decompressed, size-limited) on demand."""
    from kwsniff.output.facts import iter_record_sets

    for side, msg in (("request", exchange.request), ("response", exchange.response)):
        for topic, partition, records in iter_record_sets(msg):
            t = records.topic if records.topic is not None else topic
            p = records.partition if records.partition is not None else partition
            for batch in records.batches:
                for record in batch.records:
                    yield side, t, p, record


def per_exchange(func: Callable[[Exchange], T]) -> Callable[[Exchange], T]:
    """Memoise ``func`` for the most recent exchange (by identity; safe when a decoding
    thread and a display thread both call it)."""
    last: list[tuple[Exchange, T] | None] = [None]

    def wrapper(exchange: Exchange) -> T:
        cached = last[0]
        if cached is not None and cached[0] is exchange:
            return cached[1]
        value = func(exchange)
        last[0] = (exchange, value)
        return value

    wrapper.__name__ = getattr(func, "__name__", "per_exchange")
    wrapper.__doc__ = func.__doc__
    return wrapper
