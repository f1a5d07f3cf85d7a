"""MessageSet magic 0/1 (kafka-python's builders) and the Kafka 0.7 message format."""

from __future__ import annotations

import gzip

import kafka.codec as kc
import pytest
from recordbuild import TS0, legacy_message, legacy_set, msg07, set_legacy_offset, v2_batch, value_of

from kwsniff.kafka import compression as comp
from kwsniff.kafka.records import Records, parse_message_set_07

LEGACY_CODECS = [0, 1, 2, 3]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_every_magic_and_codec(magic: int, codec: int) -> None:
    rs = Records(legacy_set(magic, codec, n=7))
    recs = list(rs.iter_records())
    assert [r.key for r in recs] == [b"k%d" % i for i in range(7)]
    assert [r.value for r in recs] == [value_of(i) for i in range(7)]
    assert [r.offset for r in recs] == list(range(7))
    if magic == 1:
        assert [r.timestamp for r in recs] == [TS0 + i for i in range(7)]
        assert rs.batches[0].timestamp_type == "CreateTime"
    else:
        assert all(r.timestamp is None for r in recs) and rs.batches[0].timestamp_type is None
    assert all(b.magic == magic and b.crc_ok for b in rs.batches)
    assert rs.problems == []
    if codec:
        assert len(rs.batches) == 1 and rs.batches[0].codec_name == comp.codec_name(codec)
        assert all(r.crc_ok for r in recs)  # inner messages carry their own CRC
    else:
        assert len(rs.batches) == 7


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_compressed_wrapper_counted_without_decompressing(codec: int) -> None:
    rs = Records(legacy_set(1, codec, n=9) + legacy_set(1, 0, n=2))
    assert rs.record_count == 3 and not rs.record_count_exact
    assert ">=3 records" in rs.summary()
    assert rs.batches[0].record_count is None
    _ = rs.batches[0].records
    assert rs.record_count == 11 and rs.record_count_exact


def test_magic1_relative_inner_offsets_use_the_wrapper_offset() -> None:
    # a broker stores the wrapper with the absolute offset of the last inner message
    data = set_legacy_offset(legacy_set(1, 1, n=4), 103)
    assert [r.offset for r in Records(data).iter_records()] == [100, 101, 102, 103]


def test_magic0_inner_offsets_are_absolute() -> None:
    inner = b"".join(legacy_message(50 + i, 0, 0, b"k", b"v%d" % i) for i in range(3))
    wrapper = legacy_message(52, 0, 1, None, gzip.compress(inner))
    assert [r.offset for r in Records(wrapper).iter_records()] == [50, 51, 52]


def test_magic1_log_append_time_wrapper_timestamp_applies() -> None:
    inner = b"".join(legacy_message(i, 1, 0, b"k", b"v", timestamp=TS0 + i) for i in range(3))
    wrapper = legacy_message(2, 1, 1 | 0x08, None, kc.gzip_encode(inner), timestamp=TS0 + 500)
    rs = Records(wrapper)
    assert rs.batches[0].timestamp_type == "LogAppendTime"
    assert [r.timestamp for r in rs.iter_records()] == [TS0 + 500] * 3


def test_legacy_crc_mismatch_outer_and_inner() -> None:
    data = bytearray(legacy_set(0, 0, n=2))
    data[-1] ^= 1
    rs = Records(bytes(data))
    assert [b.crc_ok for b in rs.batches] == [True, False]
    assert any("CRC mismatch" in p for p in rs.problems)
    # an inner message with a bad CRC inside a valid wrapper
    inner = bytearray(legacy_message(0, 1, 0, b"k", b"v", timestamp=TS0))
    inner[-1] ^= 1
    wrapper = legacy_message(0, 1, 1, None, gzip.compress(bytes(inner)), timestamp=TS0)
    rs = Records(wrapper)
    (r,) = rs.iter_records()
    assert rs.batches[0].crc_ok is True and r.crc_ok is False
    assert any("inner message 0: CRC mismatch" in p for p in rs.problems)


@pytest.mark.parametrize("magic", [0, 1])
def test_truncated_message_at_end(magic: int) -> None:
    data = legacy_set(magic, 0, n=3)
    one = len(data) // 3
    for cut in range(1, one):
        rs = Records(data[:-cut])
        assert [r.key for r in rs.iter_records()] == [b"k0", b"k1"]
        assert rs.batches[-1].truncated and rs.problems == []
        assert rs.record_count == 2


def test_every_cut_and_corruption_never_raises() -> None:
    data = legacy_set(1, 2, n=3) + legacy_set(0, 3, n=2) + legacy_set(1, 0, n=2)
    for cut in range(len(data) + 1):
        Records(data[:cut]).decode().to_dict()
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0xA5
        rs = Records(bytes(bad)).decode()
        _ = rs.problems, rs.to_dict(), rs.summary()


def test_oversized_legacy_wrapper_reported_on_that_batch() -> None:
    inner = b"".join(legacy_message(i, 1, 0, b"k", b"\x00" * 50_000, timestamp=TS0) for i in range(50))
    bomb = legacy_message(49, 1, 1, None, gzip.compress(inner), timestamp=TS0)
    good = set_legacy_offset(legacy_set(1, 0, n=1), 50)
    rs = Records(bomb + good, max_decompressed=200_000).decode()
    b0, b1 = rs.batches
    assert any("limit" in p for p in b0.problems) and len(b0.records) == 3
    assert b1.problems == [] and [r.offset for r in b1.records] == [50]


def test_mixed_magics_in_one_set() -> None:
    data = legacy_set(0, 0, n=1) + set_legacy_offset(legacy_set(1, 1, n=2), 2) + v2_batch(3, n=2, base_offset=3)
    rs = Records(data)
    assert [b.magic for b in rs.batches] == [0, 1, 2]
    assert [r.offset for r in rs.iter_records()] == [0, 1, 2, 3, 4]
    assert rs.problems == []


# -- 0.7 -------------------------------------------------------------------------------

def test_07_magic0_and_magic1_uncompressed() -> None:
    data = msg07(b"hello") + msg07(b"world", compression=0)
    rs = parse_message_set_07(data, base_offset=1000)
    assert [b.magic for b in rs.batches] == [0, 1]
    recs = list(rs.iter_records())
    assert [(r.offset, r.key, r.value) for r in recs] == [(1000, None, b"hello"), (1014, None, b"world")]
    assert all(b.crc_ok for b in rs.batches) and rs.problems == []
    assert rs.summary().startswith("2 batches, 2 records, 0.7 magic 0/1")


@pytest.mark.parametrize("codec,encode", [(1, gzip.compress), (2, kc.snappy_encode)])
def test_07_compressed_message(codec: int, encode) -> None:
    inner = msg07(b"a" * 30) + msg07(b"b" * 30, compression=0)
    data = msg07(encode(inner), compression=codec) + msg07(b"after")
    rs = parse_message_set_07(data, base_offset=0)
    recs = list(rs.iter_records())
    assert [r.value for r in recs] == [b"a" * 30, b"b" * 30, b"after"]
    wrapper_size = rs.batches[0].size
    assert [r.offset for r in recs] == [0, 0, wrapper_size]
    assert rs.batches[0].codec_name == comp.codec_name(codec)
    assert rs.problems == []


def test_07_crc_mismatch_and_truncation() -> None:
    bad = bytearray(msg07(b"payload"))
    bad[-1] ^= 1
    rs = parse_message_set_07(bytes(bad) + msg07(b"second")[:-2])
    assert rs.batches[0].crc_ok is False and rs.batches[1].truncated
    assert [r.value for r in rs.iter_records()] == [b"payloae"]
    assert len(rs.problems) == 1 and "CRC mismatch" in rs.problems[0]


def test_07_garbage_never_raises() -> None:
    data = msg07(gzip.compress(msg07(b"x" * 10)), compression=1) + msg07(b"y")
    for cut in range(len(data) + 1):
        parse_message_set_07(data[:cut]).decode().to_dict()
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x5A
        parse_message_set_07(bytes(bad)).decode().to_dict()
