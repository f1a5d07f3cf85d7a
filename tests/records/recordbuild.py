"""Record sets made by an independent implementation (kafka-python's builders and codecs)
for the records tests, plus a few hand-made formats kafka-python cannot write (control
batches, 0.7 message sets) built from the format descriptions."""

from __future__ import annotations

import struct
import zlib

import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

TS0 = 1_700_000_000_000


def value_of(i: int) -> bytes:
    """A compressible value, so kafka-python keeps the compression it was asked for."""
    return (b"value-%05d " % i) * 12


def v2_batch(codec: int = 0, n: int = 5, *, base_offset: int = 0, transactional: bool = False,
             producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
             headers: list[tuple[str, bytes | None]] | None = None, null_key_every: int = 0,
             ts0: int = TS0) -> bytes:
    """A magic-2 batch written by kafka-python; keys ``k<i>``, values :func:`value_of`."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=1 << 24)
    for i in range(n):
        key = None if null_key_every and i % null_key_every == 0 else b"k%d" % i
        hdrs = headers if headers is not None else [("h1", b"x%d" % i), ("nullh", None)]
        assert b.append(i, timestamp=ts0 + i, key=key, value=value_of(i), headers=hdrs) is not None
    data = bytearray(b.build())
    if base_offset:
        struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def set_v2_attributes(batch: bytes, set_bits: int = 0, clear_bits: int = 0, *,
                      max_timestamp: int | None = None, leader_epoch: int | None = None) -> bytes:
    """Change header fields of a magic-2 batch and recompute its CRC-32C."""
    data = bytearray(batch)
    (attrs,) = struct.unpack_from(">h", data, 21)
    struct.pack_into(">h", data, 21, (attrs | set_bits) & ~clear_bits)
    if max_timestamp is not None:
        struct.pack_into(">q", data, 35, max_timestamp)
    if leader_epoch is not None:
        struct.pack_into(">i", data, 12, leader_epoch)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def legacy_set(magic: int, codec: int = 0, n: int = 5, *, ts0: int = TS0) -> bytes:
    """A magic 0/1 message set written by kafka-python (one wrapper message if compressed)."""
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 24)
    for i in range(n):
        assert b.append(i, timestamp=ts0 + i if magic else None, key=b"k%d" % i,
                        value=value_of(i)) is not None
    return bytes(b.build())


def set_legacy_offset(message: bytes, offset: int) -> bytes:
    data = bytearray(message)
    struct.pack_into(">q", data, 0, offset)
    return bytes(data)


def legacy_message(offset: int, magic: int, attributes: int, key: bytes | None, value: bytes | None,
                   timestamp: int | None = None) -> bytes:
    """One magic 0/1 message by hand (for wrappers with chosen attributes)."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp or 0)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body)
    msg = struct.pack(">I", crc) + body
    return struct.pack(">qi", offset, len(msg)) + msg


# -- control batches (written by brokers; built here from the format description) ---------

def varint(v: int) -> bytes:
    v = (v << 1) ^ (v >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def v2_record(offset_delta: int, key: bytes | None, value: bytes | None, ts_delta: int = 0,
              headers: tuple = ()) -> bytes:
    body = b"\x00" + varint(ts_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for hk, hv in headers:
        body += varint(len(hk)) + hk
        body += varint(-1) if hv is None else varint(len(hv)) + hv
    return varint(len(body)) + body


def raw_v2_batch(records: list[bytes], *, base_offset: int = 0, attributes: int = 0,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 ts: int = TS0, leader_epoch: int = 0, last_offset_delta: int | None = None) -> bytes:
    """A magic-2 batch around already-encoded records (uncompressed)."""
    payload = b"".join(records)
    n = len(records)
    lod = n - 1 if last_offset_delta is None else last_offset_delta
    after_crc = struct.pack(">hiqqqhii", attributes, lod, ts, ts, producer_id, producer_epoch,
                            base_sequence, n) + payload
    crc = crc32c.crc32c(after_crc)
    head = struct.pack(">ibI", leader_epoch, 2, crc)
    length = len(head) + len(after_crc)
    return struct.pack(">qi", base_offset, length) + head + after_crc


def txn_marker_batch(commit: bool, coordinator_epoch: int, *, base_offset: int = 10,
                     producer_id: int = 4000, producer_epoch: int = 3) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return raw_v2_batch([v2_record(0, key, value)], base_offset=base_offset, attributes=0x30,
                        producer_id=producer_id, producer_epoch=producer_epoch)


# -- Kafka 0.7 message sets (from the 0.7 wire format description) ------------------------

def msg07(payload: bytes, compression: int | None = None) -> bytes:
    """One 0.7 message: magic 0 without the compression byte when ``compression`` is None."""
    crc = struct.pack(">I", zlib.crc32(payload))
    if compression is None:
        body = b"\x00" + crc + payload
    else:
        body = b"\x01" + bytes((compression,)) + crc + payload
    return struct.pack(">i", len(body)) + body
