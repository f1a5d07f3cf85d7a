"""Record sets carried by Produce requests and Fetch responses.

Contract: the protocol decoder wraps every ``records`` field in :class:`Records`
without parsing it; parsing happens lazily here, bounded by configured limits, and
never raises on bad bytes.

* Constructing a :class:`Records` costs nothing. ``.batches`` walks the batch headers
  only (no record bodies, no decompression): enough for ``.record_count`` and summaries.
* ``.iter_records()`` / ``Batch.records`` decode records on demand (decompressing with
  the per-batch limit of :mod:`kwsniff.kafka.compression`); ``.decode()`` decodes all.
* Formats: MessageSet magic 0 and 1 (with compressed wrapper messages whose value is a
  nested message set), RecordBatch magic 2 (including control batches: transaction
  markers and KRaft control records), and the Kafka 0.7 message set
  (:func:`parse_message_set_07`). Batches of different magics may follow each other.
* For magic 0/1 each top-level message is one :class:`Batch` (as Kafka models it); an
  uncompressed message is a batch of one record, a compressed wrapper a batch of its
  inner messages (``record_count`` is None until they are decompressed).
* A batch cut off at the end of the data (brokers do this in Fetch responses) has
  ``truncated=True``; that is not a problem. Complete records of an uncompressed
  truncated batch are still decoded.
* CRC-32 (magic 0/1, 0.7) and CRC-32C (magic 2) are verified on demand (``crc_ok``,
  ``problems``); a mismatch is reported, decoding goes on.
* Record timestamps are Kafka's: integer milliseconds since the epoch.
* ``to_dict()`` methods return plain structures (bytes stay bytes).
* ``topic``/``partition`` are set by :mod:`kwsniff.kafka.embedded` when known; records of
  Kafka's internal topics then get ``key_decoded``/``value_decoded``
  (see :mod:`kwsniff.kafka.internal_topics`).
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, Iterator

from kwsniff.kafka import compression as _comp

from kwsniff import _compiled
from kwsniff.text import counted

#: the C kernel (crc32c, v2_set_stats, v2_records), or None: the Python code below only
_kernel = _compiled.kernel("kwsniff.kafka._records")

if _kernel is not None:
    # the kernel's CRC-32C: importing the crc32c package costs ~0.1 s per run (it
    # reads its own version from the installed package metadata)
    _crc32c_native = _kernel.crc32c
else:
    try:
        from crc32c import crc32c as _crc32c_native
    except ImportError:  # pragma: no cover - exercised only where the wheel is missing
        _crc32c_native = None

#: the kernel's _parse_v2_records for records without problems (None: Python only)
_v2_records_native = _kernel.v2_records if _kernel is not None else None
#: (batches, records) of a clean magic-2 set without Batch objects (Records._clean_stats)
_v2_set_stats = _kernel.v2_set_stats if _kernel is not None else None

FORMAT_KAFKA = "kafka"
FORMAT_07 = "kafka-0.7"

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

#: control record types (key field "type") -> name
CONTROL_TYPES: dict[int, str] = {
    0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS",
}
#: control record types whose value is a message of Kafka's schema files
CONTROL_SCHEMAS: dict[int, str] = {
    2: "LeaderChangeMessage", 3: "SnapshotHeaderRecord", 4: "SnapshotFooterRecord",
    5: "KRaftVersionRecord", 6: "VotersRecord",
}

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
V2_HEADER_SIZE = _V2_HEADER.size            # 61
_LOG_OVERHEAD = 12                           # offset int64 + length int32
_LEGACY_HEADER = struct.Struct(">qiIbb")     # offset, size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16x2 = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")
_LEGACY_MIN = {0: 14, 1: 22}                 # smallest message size field per magic

KIND_V2 = "v2"
KIND_LEGACY = "legacy"
KIND_07 = "v0.7"


# -- checksums --------------------------------------------------------------------------

def _make_crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _make_crc32c_table()


def crc32c_py(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli) in pure Python: the fallback when the crc32c wheel is missing."""
    crc = 0xFFFFFFFF
    table = _CRC32C_TABLE
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


crc32c = _crc32c_native or crc32c_py


# -- varints ----------------------------------------------------------------------------

class _Malformed(ValueError):
    """Internal: a record's fields do not fit its bytes."""


def uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Unsigned varint (up to 10 bytes, Kafka's varlong) at ``pos`` -> (value, next
    position). Raises IndexError when ``buf`` ends first, ValueError when it is longer
    than 10 bytes."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _Malformed("varint longer than 10 bytes")


#: zigzag decoding of every value a one- or two-byte varint can hold
_ZIGZAG = tuple((v >> 1) ^ -(v & 1) for v in range(16384))


# -- records ----------------------------------------------------------------------------

class Record:
    """One decoded record (or legacy message).

    ``headers`` is a list of ``(key: str, value: bytes | None)``; ``control`` is set for
    records of control batches (a dict with ``type``, ``type_id``, ``version`` and the
    decoded marker or KRaft control message); ``crc``/``crc_ok`` are set for legacy
    messages (magic 0/1 and 0.7), which carry their own checksum; ``start`` is the
    record's byte position in :attr:`Records.data`, or -1 inside a compressed batch.
    """

    __slots__ = ("offset", "timestamp", "key", "value", "headers", "attributes", "size",
                 "start", "control", "key_decoded", "value_decoded", "crc", "crc_ok",
                 "problems")

    def __init__(self, offset: int | None, timestamp: int | None, key: bytes | None,
                 value: bytes | None, headers: list[tuple[str, bytes | None]], attributes: int,
                 size: int, start: int) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers
        self.attributes = attributes
        self.size = size
        self.start = start
        self.control: dict[str, Any] | None = None
        self.key_decoded: Any = None
        self.value_decoded: Any = None
        self.crc: int | None = None
        self.crc_ok: bool | None = None
        self.problems: list[str] | None = None

    def _problem(self, text: str) -> None:
        if self.problems is None:
            self.problems = []
        self.problems.append(text)

    def to_dict(self) -> dict[str, Any]:
        """Plain structure; optional keys appear only when set."""
        d: dict[str, Any] = {
            "offset": self.offset,
            "timestamp": self.timestamp,
            "key": self.key,
            "value": self.value,
            "headers": [[k, v] for k, v in self.headers],
            "attributes": self.attributes,
            "size": self.size,
        }
        if self.crc is not None:
            d["crc"] = self.crc
            d["crc_ok"] = self.crc_ok
        if self.control is not None:
            d["control"] = self.control
        if self.key_decoded is not None:
            d["key_decoded"] = self.key_decoded
        if self.value_decoded is not None:
            d["value_decoded"] = self.value_decoded
        if self.problems:
            d["problems"] = list(self.problems)
        return d

    def __repr__(self) -> str:
        return f"Record(offset={self.offset}, key={self.key!r:.40}, value={self.value!r:.60})"


# -- batches ----------------------------------------------------------------------------

class Batch:
    """One RecordBatch (magic 2) or one top-level legacy message (magic 0/1, 0.7).

    Header fields that do not exist in a batch's format are None. ``length`` is the
    length field as written (bytes after it; for 0.7 the message length), ``size`` the
    whole entry including the offset/length prefix, ``available`` how many of those
    bytes are present. ``start`` is the entry's position in :attr:`Records.data`.
    """

    __slots__ = ("_set", "kind", "start", "length", "size", "available", "truncated",
                 "magic", "base_offset", "partition_leader_epoch", "crc", "attributes",
                 "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
                 "producer_epoch", "base_sequence", "declared_count", "_problems",
                 "_records", "_crc_ok", "compressed_size", "decompressed_size", "framing")

    def __init__(self, owner: Records, kind: str, start: int, length: int, size: int,
                 available: int, magic: int) -> None:
        # the set's shared state, not the Records itself: no reference cycle (see _SetState)
        self._set = owner._state
        self.kind = kind
        self.start = start
        self.length = length
        self.size = size
        self.available = available
        self.truncated = available < size
        self.magic = magic
        self.base_offset: int | None = None
        self.partition_leader_epoch: int | None = None
        self.crc: int | None = None
        self.attributes: int | None = None
        self.last_offset_delta: int | None = None
        self.base_timestamp: int | None = None
        self.max_timestamp: int | None = None
        self.producer_id: int | None = None
        self.producer_epoch: int | None = None
        self.base_sequence: int | None = None
        self.declared_count: int | None = None
        self._problems: list[str] = []
        self._records: list[Record] | None = None
        self._crc_ok: bool | None | str = "unchecked"
        self.compressed_size: int | None = None
        self.decompressed_size: int | None = None
        self.framing: str | None = None

    # attribute views ------------------------------------------------------------------
    @property
    def codec(self) -> int:
        if self.attributes is None:
            return 0
        return self.attributes & (0x03 if self.kind == KIND_07 else 0x07)

    @property
    def codec_name(self) -> str:
        return _comp.codec_name(self.codec)

    @property
    def timestamp_type(self) -> str | None:
        if self.attributes is None or self.kind == KIND_07 or self.magic == 0:
            return None
        return TIMESTAMP_TYPES[(self.attributes >> 3) & 1]

    @property
    def transactional(self) -> bool:
        return self.kind == KIND_V2 and self.attributes is not None and bool(self.attributes & 0x10)

    @property
    def control(self) -> bool:
        return self.kind == KIND_V2 and self.attributes is not None and bool(self.attributes & 0x20)

    @property
    def last_offset(self) -> int | None:
        if self.base_offset is None or self.last_offset_delta is None:
            return None
        return self.base_offset + self.last_offset_delta

    @property
    def record_count(self) -> int | None:
        """Declared count (magic 2), 1 for an uncompressed legacy message, the number of
        inner messages of a legacy wrapper once decompressed (None before)."""
        if self.kind == KIND_V2:
            return self.declared_count
        if self.codec == 0:
            return 1 if self.attributes is not None else None
        return len(self._records) if self._records is not None else None

    # checks ---------------------------------------------------------------------------
    @property
    def crc_ok(self) -> bool | None:
        """True/False once verified; None when the batch is truncated or has no header."""
        if self._crc_ok == "unchecked":
            self._crc_ok = self._check_crc()
            if self._crc_ok is False:
                self._problems.insert(0, f"CRC mismatch: stored 0x{self.crc:08x}, "
                                         f"computed 0x{self._computed_crc():08x}")
        return self._crc_ok  # type: ignore[return-value]

    def _crc_span(self) -> tuple[int, int]:
        if self.kind == KIND_V2:
            return self.start + 21, self.start + self.size
        if self.kind == KIND_LEGACY:
            return self.start + 16, self.start + self.size
        return self.start + (10 if self.magic == 1 else 9), self.start + self.size

    def _computed_crc(self) -> int:
        lo, hi = self._crc_span()
        view = memoryview(self._set.data)[lo:hi]
        return crc32c(view) if self.kind == KIND_V2 else zlib.crc32(view)

    def _check_crc(self) -> bool | None:
        if self.truncated or self.crc is None:
            return None
        return self._computed_crc() == self.crc

    @property
    def problems(self) -> list[str]:
        """Problems found so far: header and CRC checks always; record-level problems
        once records were decoded."""
        _ = self.crc_ok
        return self._problems

    # records --------------------------------------------------------------------------
    @property
    def records(self) -> list[Record]:
        """The batch's records, decoded (and decompressed) on first access."""
        if self._records is None:
            self._records = []
            try:
                if self.kind == KIND_V2:
                    self._records = _decode_v2(self)
                elif self.kind == KIND_LEGACY:
                    self._records = _decode_legacy(self)
                else:
                    self._records = _decode_07(self)
            except Exception as exc:  # last-resort guard: bad bytes never escape
                self._problems.append(f"record decoding failed: {type(exc).__name__}: {exc}")
            topic = self._set.topic
            if topic is not None and self._records:
                _decode_internal(topic, self._records, self._problems)
        return self._records

    @property
    def decoded(self) -> bool:
        return self._records is not None

    def to_dict(self, records: bool = False) -> dict[str, Any]:
        """Header fields (None where the format has no such field), problems, and the
        records' dicts when ``records`` is true (decoding them if needed)."""
        d: dict[str, Any] = {
            "format": self.kind,
            "start": self.start,
            "size": self.size,
            "length": self.length,
            "available": self.available,
            "truncated": self.truncated,
            "magic": self.magic,
            "base_offset": self.base_offset,
            "last_offset": self.last_offset,
            "partition_leader_epoch": self.partition_leader_epoch,
            "crc": self.crc,
            "crc_ok": self.crc_ok,
            "attributes": self.attributes,
            "codec": self.codec_name if self.attributes is not None else None,
            "timestamp_type": self.timestamp_type,
            "transactional": self.transactional,
            "control": self.control,
            "last_offset_delta": self.last_offset_delta,
            "base_timestamp": self.base_timestamp,
            "max_timestamp": self.max_timestamp,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "base_sequence": self.base_sequence,
        }
        if records:
            recs = self.records
            d["record_count"] = self.record_count
            d["compressed_size"] = self.compressed_size
            d["decompressed_size"] = self.decompressed_size
            d["framing"] = self.framing
            d["records"] = [r.to_dict() for r in recs]
        else:
            d["record_count"] = self.record_count
        d["problems"] = list(self.problems)
        return d

    def __repr__(self) -> str:
        return (f"Batch({self.kind}, magic={self.magic}, base_offset={self.base_offset}, "
                f"count={self.record_count}, codec={self.codec_name}, truncated={self.truncated})")


# -- the record set ---------------------------------------------------------------------

class _SetState:
    """What the batches of a record set share with it: the bytes, the topic (set after
    parsing by the body decoders), the decompression limit and budget. A :class:`Batch`
    holds this instead of its :class:`Records`, so a set and its batches form no
    reference cycle: they are freed as soon as their message is dropped instead of
    waiting for the cyclic garbage collector (whose collections they used to trigger
    and fill: ~3 objects per record set)."""

    __slots__ = ("data", "topic", "max_decompressed", "decompressed")

    def __init__(self, data: bytes, max_decompressed: int | None) -> None:
        self.data = data
        self.topic: str | None = None
        self.max_decompressed = max_decompressed
        self.decompressed = 0           # bytes decompressed so far by the set's batches


class Records:
    """The raw bytes of one partition's record set; parsed on demand.

    ``max_decompressed`` overrides the per-batch decompressed-size limit (default: the
    process-wide setting of :mod:`kwsniff.kafka.compression`); all batches of the set
    together decompress to at most :data:`SET_LIMIT_FACTOR` times that, so that a set
    of many small decompression bombs cannot grow memory without bound either.
    """

    __slots__ = ("data", "format", "base_position", "partition", "_state", "_batches",
                 "_problems", "_clean")

    def __init__(self, data: bytes, *, max_decompressed: int | None = None) -> None:
        self.data = data if isinstance(data, bytes) else bytes(data)
        self.format = FORMAT_KAFKA
        self.base_position = 0          # 0.7: log byte offset of data[0]
        self.partition: int | None = None
        self._state = _SetState(self.data, max_decompressed)
        self._batches: list[Batch] | None = None
        self._problems: list[str] = []
        self._clean: tuple[int, int] | bool | None = None     # see _clean_stats

    def _clean_stats(self) -> tuple[int, int] | None:
        """``(batches, records)`` of a set of complete magic-2 batches without header or
        CRC problems, from the kernel's ``v2_set_stats`` while no batch was parsed
        (what the parsed batches give, without making them); None otherwise."""
        if self._batches is not None or _v2_set_stats is None or self.format != FORMAT_KAFKA:
            return None
        clean = self._clean
        if clean is None:
            clean = self._clean = _v2_set_stats(self.data) or False
        return clean or None

    @property
    def topic(self) -> str | None:
        """The topic the set belongs to, when the message names it (set by the decoders;
        records of internal topics are decoded with their schemas)."""
        return self._state.topic

    @topic.setter
    def topic(self, value: str | None) -> None:
        self._state.topic = value

    @property
    def max_decompressed(self) -> int | None:
        return self._state.max_decompressed

    @property
    def decompressed(self) -> int:
        """Bytes decompressed so far by the set's batches."""
        return self._state.decompressed

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"Records({len(self.data)} bytes, topic={self.topic!r}, partition={self.partition})"

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def batches(self) -> list[Batch]:
        """Batch headers, parsed on first access (cheap: no records, no decompression)."""
        if self._batches is None:
            self._batches = []
            try:
                if self.format == FORMAT_07:
                    _scan_07(self)
                else:
                    _scan(self)
            except Exception as exc:  # last-resort guard: bad bytes never escape
                self._problems.append(f"batch scan failed: {type(exc).__name__}: {exc}")
            if self._clean:     # v2_set_stats verified every CRC already
                for b in self._batches:
                    b._crc_ok = True
        return self._batches

    @property
    def record_count(self) -> int:
        """Records of the complete batches, without decompressing: declared counts of
        magic-2 batches, plus one per legacy compressed message whose inner messages were
        not decompressed yet (see :attr:`record_count_exact`). Truncated batches are not
        counted (their complete records are still decoded by :meth:`iter_records`)."""
        clean = self._clean_stats()
        if clean is not None:
            return clean[1]
        total = 0
        for b in self.batches:
            if not b.truncated:
                n = b.record_count
                total += 1 if n is None else max(n, 0)
        return total

    @property
    def batch_count(self) -> int:
        """``len(self.batches)``, without parsing them where the set is clean."""
        clean = self._clean_stats()
        return clean[0] if clean is not None else len(self.batches)

    @property
    def record_count_exact(self) -> bool:
        """False while some legacy compressed wrapper was counted as one message."""
        if self._clean_stats() is not None:
            return True
        return all(b.record_count is not None or b.truncated for b in self.batches)

    @property
    def truncated(self) -> bool:
        return any(b.truncated for b in self.batches)

    def iter_records(self) -> Iterator[Record]:
        """All records of all batches, in order (control records included)."""
        for b in self.batches:
            yield from b.records

    def decode(self) -> Records:
        """Decode every batch's records (and verify every CRC); returns self."""
        for b in self.batches:
            _ = b.records
            _ = b.crc_ok
        return self

    @property
    def problems(self) -> list[str]:
        """Problems of the set and of its batches (header and CRC checks always,
        record-level ones for batches already decoded), each naming its batch."""
        batches = self.batches
        out = list(self._problems)
        for i, b in enumerate(batches):
            for p in b.problems:
                where = f"batch {i}" + (f" (offset {b.base_offset})" if b.base_offset is not None else "")
                out.append(f"{where}: {p}")
        return out

    @property
    def problem_count(self) -> int:
        """``len(self.problems)``, without formatting the texts."""
        if self._clean_stats() is not None:
            return len(self._problems)
        batches = self.batches
        n = len(self._problems)
        for b in batches:
            n += len(b.problems)
        return n

    def summary(self) -> str:
        """One short line, e.g. ``"2 batches, 15 records, v2 lz4, truncated"``."""
        bs = self.batches
        if not bs:
            return "empty" if not self.data else "undecodable"
        if len(bs) == 1:        # (most sets: what the loop below gives, in fewer steps)
            b = bs[0]
            attrs = b.attributes
            count = b.declared_count
            if b.kind == KIND_V2 and attrs is not None and count is not None \
                    and not b.truncated and self.format != FORMAT_07:
                n = count if count > 0 else 0
                text = f"1 batch, {n} record{'s' if n != 1 else ''}, magic {b.magic}"
                codec = _comp.codec_name(attrs & 0x07)
                if codec != "none":
                    text += " " + codec
                if attrs & 0x20:
                    text += ", control"
                if attrs & 0x10:
                    text += ", transactional"
                return text
        # one pass (the -V tree asks this of every record set): what record_count,
        # record_count_exact and truncated give, the magics, codecs and flags
        magics: set[int] = set()
        codecs: set[str] = set()
        n = 0
        exact = True
        control = transactional = truncated = False
        for b in bs:
            magics.add(b.magic)
            attrs = b.attributes
            if b.kind == KIND_V2:
                count = b.declared_count
                if attrs is not None:
                    codecs.add(_comp.codec_name(attrs & 0x07))
                    control = control or bool(attrs & 0x20)
                    transactional = transactional or bool(attrs & 0x10)
            else:
                count = b.record_count
                if attrs is not None:
                    codecs.add(b.codec_name)
            if b.truncated:
                truncated = True
            elif count is None:
                n += 1
                exact = False
            elif count > 0:
                n += count
        parts = [f"{len(bs)} batch{'es' if len(bs) != 1 else ''}",
                 f"{'' if exact else '>='}{n} record{'s' if n != 1 else ''}",
                 ("0.7 " if self.format == FORMAT_07 else "") + "magic "
                 + "/".join(map(str, sorted(magics)))]
        shown = [c for c in sorted(codecs) if c != "none"]
        if shown:
            parts[2] += " " + "/".join(shown)
        if control:
            parts.append("control")
        if transactional:
            parts.append("transactional")
        if truncated:
            parts.append("truncated")
        return ", ".join(parts)

    def to_dict(self, records: bool = True) -> dict[str, Any]:
        """Plain structure of the whole set; with ``records`` every record is decoded."""
        return {
            "format": self.format,
            "size": len(self.data),
            "topic": self.topic,
            "partition": self.partition,
            "record_count": self.record_count if not records else sum(
                len(b.records) for b in self.batches),
            "batches": [b.to_dict(records=records) for b in self.batches],
            "problems": self.problems,
        }


def parse_message_set_07(data: bytes, base_offset: int = 0, *,
                         max_decompressed: int | None = None) -> Records:
    """Records for a Kafka 0.7 message set (``base_offset``: log byte offset of
    ``data[0]``, e.g. the fetch offset; record offsets are byte offsets from it, and
    the inner messages of a compressed message get their wrapper's offset)."""
    r = Records(data, max_decompressed=max_decompressed)
    r.format = FORMAT_07
    r.base_position = base_offset
    return r


# -- header scanning --------------------------------------------------------------------

def _scan(rs: Records) -> None:
    data = rs.data
    n = len(data)
    pos = 0
    out = rs._batches
    assert out is not None
    while pos < n:
        avail = n - pos
        if avail < _LOG_OVERHEAD + 5:
            # too short to read the magic: a truncated tail
            b = Batch(rs, KIND_V2, pos, -1, -1, avail, -1)
            b.truncated = True
            if avail >= 8:
                b.base_offset = _I64.unpack_from(data, pos)[0]
            if avail >= _LOG_OVERHEAD:
                b.length = _I32.unpack_from(data, pos + 8)[0]
                b.size = b.length + _LOG_OVERHEAD
            out.append(b)
            return
        base_offset, length = struct.unpack_from(">qi", data, pos)
        magic = data[pos + 16]
        size = length + _LOG_OVERHEAD
        if length < 0:
            rs._problems.append(f"byte {pos}: negative batch length {length}; "
                                f"{counted(avail, 'byte')} left undecoded")
            return
        if magic == 2:
            b = Batch(rs, KIND_V2, pos, length, size, min(size, avail), 2)
            b.base_offset = base_offset
            if length < V2_HEADER_SIZE - _LOG_OVERHEAD:
                b._problems.append(f"batch length {length} is shorter than the magic 2 header")
                b.available = min(size, avail)
                b.truncated = size > avail
            elif avail >= V2_HEADER_SIZE:
                (_, _, b.partition_leader_epoch, _, b.crc, b.attributes, b.last_offset_delta,
                 b.base_timestamp, b.max_timestamp, b.producer_id, b.producer_epoch,
                 b.base_sequence, b.declared_count) = _V2_HEADER.unpack_from(data, pos)
                if b.declared_count < 0:
                    b._problems.append(f"negative record count {b.declared_count}")
            else:
                _partial_v2_header(b, data, pos, avail)
        elif magic in (0, 1):
            b = Batch(rs, KIND_LEGACY, pos, length, size, min(size, avail), magic)
            b.base_offset = base_offset
            if length < _LEGACY_MIN[magic]:
                b._problems.append(f"message size {length} is shorter than a magic {magic} message")
            if avail >= _LOG_OVERHEAD + 6:
                _, _, b.crc, _, b.attributes = _LEGACY_HEADER.unpack_from(data, pos)
                if magic == 1 and avail >= _LOG_OVERHEAD + 14:
                    b.base_timestamp = b.max_timestamp = _I64.unpack_from(data, pos + 18)[0]
        else:
            b = Batch(rs, KIND_V2, pos, length, size, min(size, avail), magic)
            b.base_offset = base_offset
            b._problems.append(f"unknown magic {magic}; batch skipped")
            b._records = []
        out.append(b)
        pos += size


def _partial_v2_header(b: Batch, data: bytes, pos: int, avail: int) -> None:
    """Fill what a truncated magic-2 header still holds."""
    fields = ((12, ">i", "partition_leader_epoch"), (17, ">I", "crc"), (21, ">h", "attributes"),
              (23, ">i", "last_offset_delta"), (27, ">q", "base_timestamp"),
              (35, ">q", "max_timestamp"), (43, ">q", "producer_id"), (51, ">h", "producer_epoch"),
              (53, ">i", "base_sequence"), (57, ">i", "declared_count"))
    for off, fmt, name in fields:
        if off + struct.calcsize(fmt) > avail:
            break
        setattr(b, name, struct.unpack_from(fmt, data, pos + off)[0])


def _scan_07(rs: Records) -> None:
    data = rs.data
    n = len(data)
    pos = 0
    out = rs._batches
    assert out is not None
    while pos < n:
        avail = n - pos
        if avail < 5:
            b = Batch(rs, KIND_07, pos, -1, -1, avail, -1)
            b.truncated = True
            b.base_offset = rs.base_position + pos
            if avail >= 4:
                b.length = _I32.unpack_from(data, pos)[0]
                b.size = b.length + 4
            out.append(b)
            return
        length = _I32.unpack_from(data, pos)[0]
        magic = data[pos + 4]
        size = length + 4
        if length < 1:
            rs._problems.append(f"byte {pos}: invalid message length {length}; "
                                f"{counted(avail, 'byte')} left undecoded")
            return
        b = Batch(rs, KIND_07, pos, length, size, min(size, avail), magic)
        b.base_offset = rs.base_position + pos
        if magic == 0:
            b.attributes = 0
            if avail >= 9:
                b.crc = struct.unpack_from(">I", data, pos + 5)[0]
            if length < 5:
                b._problems.append(f"message length {length} is shorter than a magic 0 header")
        elif magic == 1:
            if avail >= 6:
                b.attributes = data[pos + 5]
            if avail >= 10:
                b.crc = struct.unpack_from(">I", data, pos + 6)[0]
            if length < 6:
                b._problems.append(f"message length {length} is shorter than a magic 1 header")
        else:
            b._problems.append(f"unknown 0.7 magic {magic}; message skipped")
            b._records = []
        out.append(b)
        pos += size


# -- record decoding: magic 2 -----------------------------------------------------------

#: all batches of one record set decompress to at most this many per-batch limits
SET_LIMIT_FACTOR = 4


def _inflate(b: Batch, codec: int, data: bytes | memoryview) -> _comp.Decompressed:
    """Decompress a batch's payload within the per-batch limit and what is left of the
    record set's limit (:data:`SET_LIMIT_FACTOR` per-batch limits)."""
    owner = b._set
    cap = owner.max_decompressed if owner.max_decompressed is not None else \
        _comp.get_max_decompressed()
    set_cap = SET_LIMIT_FACTOR * cap
    left = set_cap - owner.decompressed
    if left <= 0:
        return _comp.Decompressed(b"", f"not decompressed: the record set's earlier batches "
                                       f"reached its decompressed-size limit of {set_cap} bytes")
    res = _comp.decompress(codec, data, min(cap, left))
    owner.decompressed += len(res.data)
    if res.problem and left < cap and len(res.data) >= left:
        res.problem = (f"decompressed size reaches the limit of {set_cap} bytes for all "
                       "batches of the record set; output cut at the limit")
    return res


def _decode_v2(b: Batch) -> list[Record]:
    if b.attributes is None or b.declared_count is None:
        if not b.truncated:
            b._problems.append("no records: batch header incomplete")
        return []
    data = b._set.data
    lo = b.start + V2_HEADER_SIZE
    hi = b.start + b.available
    if lo > hi:
        return []
    codec = b.attributes & 0x07
    stream_problem = None
    if codec:
        b.compressed_size = hi - lo
        res = _inflate(b, codec, memoryview(data)[lo:hi])
        b.framing = res.framing
        buf = res.data
        b.decompressed_size = len(buf)
        # a cut-off batch yields a cut-off stream: expected, not a problem
        stream_problem = None if b.truncated else res.problem
        if stream_problem:
            b._problems.append(stream_problem)
        start, end, in_place = 0, len(buf), False
    else:
        buf, start, end, in_place = data, lo, hi, True
    parsed = None
    if _v2_records_native is not None:
        # (None wherever the Python code reports a problem or needs unbounded ints or
        # clamped slices)
        parsed = _v2_records_native(
            buf, start, end, b.declared_count, b.base_offset or 0, b.base_timestamp or 0,
            b.max_timestamp if (b.attributes or 0) & 0x08 else None, in_place, Record)
    if parsed is None:
        parsed = _parse_v2_records(buf, start, end, b.declared_count, b, in_place)
    records, problems, pos, ran_out = parsed
    b._problems.extend(problems)
    if not b.truncated and not stream_problem:
        if ran_out:
            b._problems.append(f"record {len(records)} runs past the end of the batch")
        elif len(records) < b.declared_count and not problems:
            b._problems.append(f"batch declares {b.declared_count} records, its bytes hold {len(records)}")
        elif pos < end and not problems:
            b._problems.append(f"{counted(end - pos, 'byte')} after the declared "
                               f"{counted(b.declared_count, 'record')}")
        # compaction may remove the last records but keeps last_offset_delta: only a
        # record beyond it is wrong
        if records and not problems and b.last_offset_delta is not None:
            last = max(r.offset or 0 for r in records) - (b.base_offset or 0)
            if last > b.last_offset_delta:
                b._problems.append(f"last offset delta is {b.last_offset_delta}, "
                                   f"a record has delta {last}")
    if b.control:
        for r in records:
            _decode_control(r)
    return records


def _parse_v2_records(buf: bytes, pos: int, end: int, count: int, b: Batch,
                      in_place: bool) -> tuple[list[Record], list[str], int, bool]:
    """Decode up to ``count`` varint records from ``buf[pos:end]``.

    Returns (records, problems, end position, ran_out) where ``ran_out`` says decoding
    stopped because a record ran past ``end`` (the caller decides if that is a problem).
    """
    records: list[Record] = []
    append = records.append
    problems: list[str] = []
    base_offset = b.base_offset or 0
    base_ts = b.base_timestamp or 0
    ts_fixed = b.max_timestamp if (b.attributes or 0) & 0x08 else None  # LogAppendTime
    read_uvarint = uvarint
    zz = _ZIGZAG
    i = 0
    while i < count and pos < end:
        rec_start = pos
        try:
            v = buf[pos]
            if v < 0x80:
                pos += 1
            elif (b2 := buf[pos + 1]) < 0x80:
                v = (v & 0x7F) | (b2 << 7)
                pos += 2
            else:
                v, pos = read_uvarint(buf, pos)
            length = zz[v] if v < 16384 else (v >> 1) ^ -(v & 1)
            rec_end = pos + length
            if rec_end > end:
                return records, problems, rec_start, True
            if length < 1:
                problems.append(f"record {i} at byte {rec_start}: invalid length {length}")
                break
            attributes = buf[pos]
            pos += 1
            v = buf[pos]
            if v < 0x80:
                pos += 1
            elif (b2 := buf[pos + 1]) < 0x80:
                v = (v & 0x7F) | (b2 << 7)
                pos += 2
            else:
                v, pos = read_uvarint(buf, pos)
            ts_delta = zz[v] if v < 16384 else (v >> 1) ^ -(v & 1)
            v = buf[pos]
            if v < 0x80:
                pos += 1
            elif (b2 := buf[pos + 1]) < 0x80:
                v = (v & 0x7F) | (b2 << 7)
                pos += 2
            else:
                v, pos = read_uvarint(buf, pos)
            off_delta = zz[v] if v < 16384 else (v >> 1) ^ -(v & 1)
            v = buf[pos]
            if v < 0x80:
                pos += 1
            elif (b2 := buf[pos + 1]) < 0x80:
                v = (v & 0x7F) | (b2 << 7)
                pos += 2
            else:
                v, pos = read_uvarint(buf, pos)
            n = zz[v] if v < 16384 else (v >> 1) ^ -(v & 1)
            if n >= 0:
                key = buf[pos:pos + n]
                pos += n
            else:
                key = None
            v = buf[pos]
            if v < 0x80:
                pos += 1
            elif (b2 := buf[pos + 1]) < 0x80:
                v = (v & 0x7F) | (b2 << 7)
                pos += 2
            else:
                v, pos = read_uvarint(buf, pos)
            n = zz[v] if v < 16384 else (v >> 1) ^ -(v & 1)
            if n >= 0:
                value = buf[pos:pos + n]
                pos += n
            else:
                value = None
            v = buf[pos]
            if v < 0x80:
                pos += 1
            elif (b2 := buf[pos + 1]) < 0x80:
                v = (v & 0x7F) | (b2 << 7)
                pos += 2
            else:
                v, pos = read_uvarint(buf, pos)
            nh = zz[v] if v < 16384 else (v >> 1) ^ -(v & 1)
            headers: list[tuple[str, bytes | None]] = []
            if nh:
                if nh < 0:
                    raise _Malformed(f"negative header count {nh}")
                for _ in range(nh):
                    if pos >= rec_end:
                        raise _Malformed(f"{nh} headers declared, the record ends first")
                    v = buf[pos]
                    if v < 0x80:
                        pos += 1
                    elif (b2 := buf[pos + 1]) < 0x80:
                        v = (v & 0x7F) | (b2 << 7)
                        pos += 2
                    else:
                        v, pos = read_uvarint(buf, pos)
                    n = zz[v] if v < 16384 else (v >> 1) ^ -(v & 1)
                    if n < 0:
                        raise _Malformed(f"header key length {n}")
                    hk = buf[pos:pos + n].decode("utf-8", "replace")
                    pos += n
                    v = buf[pos]
                    if v < 0x80:
                        pos += 1
                    elif (b2 := buf[pos + 1]) < 0x80:
                        v = (v & 0x7F) | (b2 << 7)
                        pos += 2
                    else:
                        v, pos = read_uvarint(buf, pos)
                    n = zz[v] if v < 16384 else (v >> 1) ^ -(v & 1)
                    if n >= 0:
                        headers.append((hk, buf[pos:pos + n]))
                        pos += n
                    else:
                        headers.append((hk, None))
        except IndexError:
            return records, problems, rec_start, True
        except _Malformed as exc:
            problems.append(f"record {i} at byte {rec_start}: malformed ({exc})")
            break
        rec = Record(base_offset + off_delta, base_ts + ts_delta if ts_fixed is None else ts_fixed,
                     key, value, headers, attributes, rec_end - rec_start,
                     rec_start if in_place else -1)
        if pos != rec_end:
            rec._problem(f"fields take {pos - rec_start} bytes, the record length says "
                         f"{rec_end - rec_start}")
            problems.append(f"record {i} (offset {rec.offset}): fields do not match its length")
            pos = rec_end
        append(rec)
        i += 1
    return records, problems, pos, False


def _decode_control(r: Record) -> None:
    """Decode a control record's key (version, type) and value in place."""
    if r.key is None or len(r.key) < 4:
        r._problem("control record key shorter than 4 bytes")
        return
    version, ctype = _I16x2.unpack_from(r.key, 0)
    info: dict[str, Any] = {"version": version, "type_id": ctype,
                            "type": CONTROL_TYPES.get(ctype, f"UNKNOWN({ctype})")}
    r.control = info
    value = r.value
    if ctype in (0, 1):
        if value is None or len(value) < 6:
            r._problem("transaction marker value shorter than 6 bytes")
            return
        info["marker_version"], info["coordinator_epoch"] = _MARKER.unpack_from(value, 0)
        return
    schema = CONTROL_SCHEMAS.get(ctype)
    if schema is None:
        r._problem(f"unknown control record type {ctype}")
        return
    if value is None or len(value) < 2:
        r._problem(f"{schema} value shorter than its version field")
        return
    from kwsniff.kafka.internal_topics import decode_versioned
    decoded, problem = decode_versioned(schema, value)
    if decoded is not None:
        info["data"] = decoded
    if problem:
        r._problem(problem)


# -- record decoding: magic 0/1 ---------------------------------------------------------

def _parse_message(buf: bytes, pos: int, end: int) -> tuple[Record, int, int, int]:
    """One legacy message (offset, size, crc, magic, attributes, [timestamp], key, value)
    at ``pos``; returns (record, magic, attributes, next position). Raises _Malformed."""
    if pos + _LOG_OVERHEAD + 14 > end:
        raise _Malformed("message header runs past the end")
    offset, size, crc, magic, attributes = _LEGACY_HEADER.unpack_from(buf, pos)
    msg_end = pos + _LOG_OVERHEAD + size
    if size < _LEGACY_MIN.get(magic, 14) or magic not in (0, 1):
        raise _Malformed(f"message with magic {magic} and size {size}")
    if msg_end > end:
        raise _Malformed(f"message of {size} bytes runs {msg_end - end} bytes past the end")
    q = pos + 18
    ts = None
    if magic == 1:
        ts = _I64.unpack_from(buf, q)[0]
        q += 8
    klen = _I32.unpack_from(buf, q)[0]
    q += 4
    key = None
    if klen >= 0:
        key = buf[q:q + klen]
        q += klen
    if q + 4 > msg_end:
        raise _Malformed("key runs past the message")
    vlen = _I32.unpack_from(buf, q)[0]
    q += 4
    value = None
    if vlen >= 0:
        value = buf[q:q + vlen]
        q += vlen
    if q > msg_end:
        raise _Malformed("value runs past the message")
    rec = Record(offset, ts, key, value, [], attributes, size + _LOG_OVERHEAD, pos)
    rec.crc = crc
    rec.crc_ok = zlib.crc32(memoryview(buf)[pos + 16:msg_end]) == crc
    if q != msg_end:
        rec._problem(f"{counted(msg_end - q, 'byte')} after the value")
    return rec, magic, attributes, msg_end


def _decode_legacy(b: Batch) -> list[Record]:
    data = b._set.data
    if b.truncated:
        return []
    try:
        outer, magic, attributes, _ = _parse_message(data, b.start, b.start + b.size)
    except (_Malformed, struct.error) as exc:
        b._problems.append(f"malformed message: {exc}")
        return []
    codec = attributes & 0x07
    if not codec:
        if outer.problems:
            b._problems.extend(outer.problems)
        outer.crc = outer.crc_ok = None  # the batch carries the message's CRC
        return [outer]
    if outer.value is None:
        b._problems.append("compressed wrapper message has a null value")
        return []
    b.compressed_size = len(outer.value)
    res = _inflate(b, codec, outer.value)
    b.framing = res.framing
    b.decompressed_size = len(res.data)
    if res.problem:
        b._problems.append(res.problem)
    inner: list[Record] = []
    buf = res.data
    pos = 0
    n = len(buf)
    while pos < n:
        try:
            rec, imagic, iattrs, pos = _parse_message(buf, pos, n)
        except (_Malformed, struct.error) as exc:
            if not res.problem:
                b._problems.append(f"inner message {len(inner)} at byte {pos}: {exc}")
            break
        rec.start = -1
        if iattrs & 0x07:
            rec._problem("inner message is compressed again (Kafka allows one level); value left as is")
        if imagic != magic:
            rec._problem(f"inner message magic {imagic} differs from wrapper magic {magic}")
        if rec.crc_ok is False:
            b._problems.append(f"inner message {len(inner)}: CRC mismatch")
        if rec.problems:
            b._problems.extend(f"inner message {len(inner)}: {p}" for p in rec.problems)
        inner.append(rec)
    if not inner:
        if not res.problem:
            b._problems.append("compressed wrapper holds no messages")
        return inner
    wrapper_offset = b.base_offset or 0
    if magic == 1:
        # relative inner offsets: the wrapper carries the absolute offset of the last one.
        # (Producers writing a wrapper offset smaller than that keep their relative offsets.)
        last = inner[-1].offset or 0
        if wrapper_offset >= last:
            shift = wrapper_offset - last
            for r in inner:
                r.offset = (r.offset or 0) + shift
        if attributes & 0x08:  # LogAppendTime: the wrapper's timestamp applies to all
            for r in inner:
                r.timestamp = outer.timestamp
    return inner


# -- record decoding: 0.7 ---------------------------------------------------------------

def _parse_07_message(buf: bytes, pos: int, end: int) -> tuple[int, int, int, bytes, int]:
    """(magic, compression, crc, payload, next position) of a 0.7 message at ``pos``."""
    if pos + 5 > end:
        raise _Malformed("message header runs past the end")
    length = _I32.unpack_from(buf, pos)[0]
    magic = buf[pos + 4]
    msg_end = pos + 4 + length
    if length < 1 or msg_end > end:
        raise _Malformed(f"message length {length} runs past the end")
    if magic == 0:
        hdr = 9
    elif magic == 1:
        hdr = 10
    else:
        raise _Malformed(f"unknown magic {magic}")
    if pos + hdr > msg_end:
        raise _Malformed(f"message length {length} shorter than its header")
    compression = buf[pos + 5] if magic == 1 else 0
    crc = struct.unpack_from(">I", buf, pos + hdr - 4)[0]
    return magic, compression, crc, buf[pos + hdr:msg_end], msg_end


def _decode_07(b: Batch) -> list[Record]:
    data = b._set.data
    if b.truncated:
        return []
    try:
        _, compression, crc, payload, _ = _parse_07_message(data, b.start, b.start + b.size)
    except _Malformed as exc:
        b._problems.append(f"malformed message: {exc}")
        return []
    offset = b.base_offset
    if not compression & 0x03:
        return [Record(offset, None, None, payload, [], compression, b.size, b.start)]
    b.compressed_size = len(payload)
    res = _inflate(b, compression & 0x03, payload)
    b.framing = res.framing
    b.decompressed_size = len(res.data)
    if res.problem:
        b._problems.append(res.problem)
    inner: list[Record] = []
    buf = res.data
    pos = 0
    while pos < len(buf):
        start = pos
        try:
            _, icomp, icrc, ipayload, pos = _parse_07_message(buf, pos, len(buf))
        except _Malformed as exc:
            if not res.problem:
                b._problems.append(f"inner message {len(inner)} at byte {start}: {exc}")
            break
        rec = Record(offset, None, None, ipayload, [], icomp, pos - start, -1)
        rec.crc = icrc
        rec.crc_ok = zlib.crc32(ipayload) == icrc
        if not rec.crc_ok:
            b._problems.append(f"inner message {len(inner)}: CRC mismatch")
        if icomp & 0x03:
            rec._problem("inner message is compressed again; value left as is")
        inner.append(rec)
    return inner


# -- internal topics --------------------------------------------------------------------

_internal_topics: Any = None      # kwsniff.kafka.internal_topics, once imported


def _decode_internal(topic: str, records: list[Record], problems: list[str]) -> None:
    global _internal_topics
    internal = _internal_topics
    if internal is None:        # (imported here: it imports this module)
        from kwsniff.kafka import internal_topics as internal
        _internal_topics = internal
    if topic in internal.INTERNAL_TOPICS:
        internal.decode_records(topic, records, problems)
