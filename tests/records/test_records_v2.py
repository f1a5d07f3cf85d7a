"""RecordBatch (magic 2) decoding against batches written by kafka-python."""

from __future__ import annotations

import struct

import pytest
from recordbuild import (
    TS0,
    raw_v2_batch,
    set_v2_attributes,
    txn_marker_batch,
    v2_batch,
    v2_record,
    value_of,
)

from kwsniff.kafka import compression as comp
from kwsniff.kafka.records import Records, crc32c, crc32c_py

CODECS = [0, 1, 2, 3, 4]


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_decodes_all_records(codec: int) -> None:
    data = v2_batch(codec, n=50, base_offset=1000)
    rs = Records(data)
    (b,) = rs.batches
    assert b.magic == 2 and b.codec == codec and b.codec_name == comp.codec_name(codec)
    assert rs.record_count == 50
    recs = list(rs.iter_records())
    assert [r.offset for r in recs] == list(range(1000, 1050))
    assert [r.key for r in recs] == [b"k%d" % i for i in range(50)]
    assert [r.value for r in recs] == [value_of(i) for i in range(50)]
    assert [r.timestamp for r in recs] == [TS0 + i for i in range(50)]
    assert recs[3].headers == [("h1", b"x3"), ("nullh", None)]
    assert b.crc_ok is True and rs.problems == []
    if codec:
        assert b.compressed_size == len(data) - 61
        assert b.decompressed_size and b.decompressed_size > b.compressed_size


def test_header_fields() -> None:
    data = v2_batch(0, n=3, base_offset=77, transactional=True, producer_id=4242,
                    producer_epoch=7, base_sequence=300)
    data = set_v2_attributes(data, leader_epoch=12)
    b = Records(data).batches[0]
    assert (b.base_offset, b.partition_leader_epoch, b.magic) == (77, 12, 2)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (4242, 7, 300)
    assert b.transactional and not b.control
    assert b.timestamp_type == "CreateTime"
    assert (b.last_offset_delta, b.last_offset) == (2, 79)
    assert (b.base_timestamp, b.max_timestamp) == (TS0, TS0 + 2)
    assert b.record_count == 3 and b.length == len(data) - 12 and b.size == len(data)
    d = b.to_dict()
    assert d["crc_ok"] is True and d["codec"] == "none" and d["transactional"] is True
    assert d["producer_id"] == 4242 and d["record_count"] == 3 and "records" not in d


def test_log_append_time_uses_max_timestamp() -> None:
    data = set_v2_attributes(v2_batch(0, n=3), set_bits=0x08, max_timestamp=TS0 + 999)
    rs = Records(data)
    assert rs.batches[0].timestamp_type == "LogAppendTime"
    assert [r.timestamp for r in rs.iter_records()] == [TS0 + 999] * 3


def test_null_keys_values_and_no_headers() -> None:
    recs = [v2_record(0, None, None), v2_record(1, b"", b"v", ts_delta=-5),
            v2_record(2, b"k", None, headers=((b"a", b""), (b"b", None)))]
    rs = Records(raw_v2_batch(recs, base_offset=5))
    out = list(rs.iter_records())
    assert [(r.offset, r.key, r.value) for r in out] == [(5, None, None), (6, b"", b"v"), (7, b"k", None)]
    assert out[1].timestamp == TS0 - 5
    assert out[2].headers == [("a", b""), ("b", None)]
    assert rs.problems == []


def test_record_count_needs_no_decompression(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"".join(v2_batch(c, n=10 + c) for c in CODECS)

    def boom(*a, **k):  # pragma: no cover - must not run
        raise AssertionError("decompressed while counting")

    monkeypatch.setattr(comp, "decompress", boom)
    rs = Records(data)
    assert rs.record_count == sum(10 + c for c in CODECS)
    assert rs.record_count_exact
    assert len(rs.batches) == 5
    assert "5 batches, 60 records, magic 2 gzip/lz4/snappy/zstd" == rs.summary()


def test_crc_mismatch_is_reported_and_records_still_decode() -> None:
    data = bytearray(v2_batch(0, n=4))
    data[-3] ^= 0xFF  # inside the last record's value
    rs = Records(bytes(data))
    b = rs.batches[0]
    assert b.crc_ok is False
    assert any("CRC mismatch" in p for p in rs.problems)
    assert len(list(rs.iter_records())) == 4


def test_crc32c_fallback_matches_native() -> None:
    data = v2_batch(0, n=20)
    assert crc32c_py(data) == crc32c(data) == __import__("crc32c").crc32c(data)
    assert crc32c_py(b"123456789") == 0xE3069283


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_last_batch_is_not_an_error(codec: int) -> None:
    full = v2_batch(codec, n=20, base_offset=0)
    second = v2_batch(codec, n=20, base_offset=20)
    for cut in (1, 11, 12, 17, 40, 61, 70, len(second) // 2, len(second) - 1):
        rs = Records(full + second[:cut])
        assert len(rs.batches) == 2
        b = rs.batches[1]
        assert b.truncated and b.crc_ok is None
        assert rs.record_count == 20  # truncated batches are not counted
        recs = list(rs.iter_records())
        assert [r.offset for r in recs[:20]] == list(range(20))
        # complete records of the cut batch come along, never more than it holds
        assert [r.offset for r in recs[20:]] == list(range(20, 20 + len(recs) - 20))
        assert rs.problems == [], (cut, rs.problems)
        assert "truncated" in rs.summary()


def test_every_cut_position_never_raises() -> None:
    data = v2_batch(0, n=3) + v2_batch(1, n=3)
    for cut in range(len(data) + 1):
        rs = Records(data[:cut])
        rs.decode()
        _ = rs.problems, rs.to_dict(), rs.summary(), rs.record_count


def test_every_corrupted_byte_never_raises() -> None:
    data = v2_batch(0, n=3, headers=[("k", b"v")]) + v2_batch(4, n=3)
    for i in range(len(data)):
        for x in (0x01, 0x80, 0xFF):
            bad = bytearray(data)
            bad[i] ^= x
            rs = Records(bytes(bad))
            rs.decode()
            _ = rs.problems, rs.to_dict()


def test_oversized_batch_reported_on_that_batch_only() -> None:
    bomb_batch = raw_v2_batch([v2_record(i, b"k", b"\x00" * 100_000) for i in range(40)])
    # compress its records with zstd, keeping the header (CRC recomputed)
    import zstandard
    body = bomb_batch[61:]
    z = zstandard.ZstdCompressor().compress(body)
    header = bytearray(bomb_batch[:61])
    struct.pack_into(">i", header, 8, 49 + len(z))
    bomb = set_v2_attributes(bytes(header) + z, set_bits=4)
    good = v2_batch(3, n=5, base_offset=40)
    rs = Records(bomb + good, max_decompressed=1 << 20)
    rs.decode()
    b0, b1 = rs.batches
    assert any("limit" in p for p in b0.problems)
    assert b0.decompressed_size is not None and b0.decompressed_size <= 1 << 20
    assert 0 < len(b0.records) < 40  # what fit under the limit
    assert b1.problems == [] and len(b1.records) == 5
    assert all(p.startswith("batch 0") for p in rs.problems)


def test_corrupt_compressed_batch_reported_on_that_batch_only() -> None:
    bad = bytearray(v2_batch(1, n=10))
    for i in range(70, len(bad) - 10):
        bad[i] = 0x41
    bad = bytearray(set_v2_attributes(bytes(bad)))  # valid CRC: the stream itself is bad
    rs = Records(bytes(bad) + v2_batch(2, n=3, base_offset=10))
    rs.decode()
    assert rs.batches[0].crc_ok is True
    assert any("gzip" in p for p in rs.batches[0].problems)
    assert [r.offset for r in rs.batches[1].records] == [10, 11, 12]
    assert rs.batches[1].problems == []


def test_transaction_markers() -> None:
    data = v2_batch(0, n=2, transactional=True, producer_id=4000, producer_epoch=3, base_sequence=0)
    data += txn_marker_batch(True, 17, base_offset=2) + txn_marker_batch(False, 18, base_offset=3)
    rs = Records(data)
    bs = rs.batches
    assert [b.control for b in bs] == [False, True, True]
    assert all(b.transactional for b in bs)
    commit = bs[1].records[0]
    abort = bs[2].records[0]
    assert commit.control == {"version": 0, "type_id": 1, "type": "COMMIT",
                              "marker_version": 0, "coordinator_epoch": 17}
    assert abort.control["type"] == "ABORT" and abort.control["coordinator_epoch"] == 18
    assert rs.problems == []
    assert "control" in rs.summary() and "transactional" in rs.summary()
    assert rs.to_dict()["batches"][1]["records"][0]["control"]["type"] == "COMMIT"


def test_malformed_control_record_reported() -> None:
    rs = Records(raw_v2_batch([v2_record(0, b"\x00", b"")], attributes=0x20))
    (r,) = rs.batches[0].records
    assert r.control is None and r.problems


def test_unknown_magic_is_skipped_and_next_batch_decoded() -> None:
    bad = bytearray(v2_batch(0, n=2))
    bad[16] = 7
    rs = Records(bytes(bad) + v2_batch(0, n=2, base_offset=2))
    assert [b.magic for b in rs.batches] == [7, 2]
    assert [r.offset for r in rs.iter_records()] == [2, 3]
    assert any("unknown magic 7" in p for p in rs.problems)


def test_negative_length_stops_with_problem() -> None:
    rs = Records(v2_batch(0, n=1) + struct.pack(">qi", 5, -3) + b"\x00" * 20)
    assert len(rs.batches) == 1
    assert any("negative batch length" in p for p in rs.problems)


def test_declared_count_larger_than_records() -> None:
    data = bytearray(v2_batch(0, n=3))
    struct.pack_into(">i", data, 57, 5)
    rs = Records(set_v2_attributes(bytes(data)))
    assert len(rs.batches[0].records) == 3
    assert any("runs past the end" in p or "declares 5" in p for p in rs.problems)


def test_record_length_mismatch_is_reported_but_decoding_continues() -> None:
    r0 = bytearray(v2_record(0, b"a", b"b"))
    r0[0] += 2  # claims 1 more byte than its fields take (zigzag: +2 == +1)
    r0 += b"\x00"
    data = raw_v2_batch([bytes(r0), v2_record(1, b"c", b"d")])
    rs = Records(data)
    recs = rs.batches[0].records
    assert [r.key for r in recs] == [b"a", b"c"]
    assert recs[0].problems and any("fields do not match" in p for p in rs.problems)


def test_to_dict_is_plain() -> None:
    rs = Records(v2_batch(2, n=2))
    rs.topic, rs.partition = "t", 3
    d = rs.to_dict()
    assert d["topic"] == "t" and d["partition"] == 3 and d["record_count"] == 2
    rec = d["batches"][0]["records"][1]
    assert rec["key"] == b"k1" and rec["headers"] == [["h1", b"x1"], ["nullh", None]]
    assert d["batches"][0]["framing"] == "xerial"


def test_compacted_batch_keeps_last_offset_delta() -> None:
    # records 1 and 3 compacted away: last_offset_delta still 3, count 2
    data = raw_v2_batch([v2_record(0, b"a", b"1"), v2_record(2, b"c", b"3")], last_offset_delta=3)
    rs = Records(data)
    assert [r.offset for r in rs.iter_records()] == [0, 2] and rs.problems == []
    bad = raw_v2_batch([v2_record(0, b"a", b"1"), v2_record(5, b"c", b"3")], last_offset_delta=3)
    assert any("a record has delta 5" in p for p in Records(bad).decode().problems)
