"""Decompression bombs and deeply nested compressed message sets: output is capped at
the configured limit, the cap is reported, memory stays bounded, nesting is not
followed beyond the one level Kafka allows."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator

import cramjam
import lz4.frame
import pytest
import zstandard

from fuzz import checks, wire
from kwsniff.kafka import compression
from kwsniff.kafka.records import Records, parse_message_set_07
from nasty import check, decode

LIMIT = 1 << 20
BOMB = 64 << 20


@pytest.fixture
def small_limit() -> Iterator[None]:
    old = compression.get_max_decompressed()
    compression.set_max_decompressed(LIMIT)
    try:
        yield
    finally:
        compression.set_max_decompressed(old)


def _bomb(codec: int, size: int = BOMB) -> bytes:
    if codec == 1:
        return wire.gzip_bomb(size)
    if codec == 2:   # snappy cannot compress better than ~21:1; xerial blocks of zeros
        block = bytes(cramjam.snappy.compress_raw(bytes(1 << 16)))
        n = size >> 16
        return b"\x82SNAPPY\x00" + bytes.fromhex("0000000100000001") + \
            (len(block).to_bytes(4, "big") + block) * n
    if codec == 3:
        c = lz4.frame.LZ4FrameCompressor()
        chunk = bytes(1 << 20)
        return c.begin() + b"".join(c.compress(chunk) for _ in range(size >> 20)) + c.flush()
    c = zstandard.ZstdCompressor(level=3).compressobj()
    chunk = bytes(1 << 20)
    return b"".join(c.compress(chunk) for _ in range(size >> 20)) + c.flush()


def peak(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_bomb_is_capped(codec: int) -> None:
    data = _bomb(codec)
    res = compression.decompress(codec, data, LIMIT)
    assert len(res.data) <= LIMIT
    assert res.problem and "limit" in res.problem
    assert peak(lambda: compression.decompress(codec, data, LIMIT)) < len(data) + 6 * LIMIT


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_bomb_in_a_record_batch_through_the_engine(codec: int, small_limit: None) -> None:
    payload = _bomb(codec)
    batch = wire.v2_batch([wire.v2_record(0, b"k", b"v")], attributes=codec, payload=payload,
                          count=1_000_000)
    pkts = wire.packet_tuples(wire.conversation(
        [(False, wire.produce_request(1, batch)), (True, wire.produce_response(1))]))
    used = peak(lambda: check(decode(pkts)))
    assert used < 4 * len(payload) + 16 * LIMIT, used
    run = check(decode(pkts))
    rs = run.exchanges[0].request.body["TopicData"][0]["PartitionData"][0]["Records"]
    rs.decode()
    assert any("limit" in p for p in rs.problems), rs.problems
    assert sum(len(r.value or b"") for r in rs.iter_records()) <= LIMIT


def test_many_small_bombs_in_one_record_set_stay_bounded() -> None:
    """Each batch under the per-batch limit, together far beyond it: the set's batches
    share a budget of four per-batch limits, the rest is reported, not decompressed."""
    rec = wire.v2_record(0, b"k", bytes(LIMIT // 2))
    bomb = wire.gzip_bytes(rec, 9)
    data = b"".join(wire.v2_batch([rec], base_offset=i, attributes=1, payload=bomb, count=1)
                    for i in range(40))
    assert len(data) < 40 * 2048
    rs = Records(data, max_decompressed=LIMIT)
    used = peak(lambda: rs.decode())
    assert used < 5 * LIMIT + (1 << 20)
    assert sum(len(r.value or b"") for r in rs.iter_records()) <= 4 * LIMIT
    assert sum("not decompressed" in p for p in rs.problems) >= 30
    checks.check_problems(rs.problems, "records")


@pytest.mark.parametrize("depth", [1, 2, 5, 30])
@pytest.mark.parametrize("magic", [0, 1])
def test_nested_message_sets(depth: int, magic: int) -> None:
    data = wire.nested_message_set(depth, magic=magic)
    rs = Records(data).decode()
    checks.check_problems(rs.problems, "records")
    recs = list(rs.iter_records())
    assert len(recs) == 1
    if depth == 1:
        assert recs[0].value == b"payload" and not rs.problems
    else:
        # Kafka allows one level: the inner wrapper stays as it is, said so
        assert any("compressed again" in p for p in rs.problems + recs[0].problems)
    assert peak(lambda: Records(data).decode().to_dict()) < 8 * len(data) + (256 << 10)


def test_nested_07_message_sets() -> None:
    data = wire.msg07(b"deep")
    for _ in range(20):
        data = wire.msg07(wire.gzip_bytes(data), 1)
    rs = parse_message_set_07(data).decode()
    checks.check_problems(rs.problems, "records")
    assert any("compressed again" in p for p in rs.problems + [q for r in rs.iter_records()
                                                                for q in r.problems])


def test_nested_compression_through_the_engine() -> None:
    data = wire.nested_message_set(8)
    pkts = wire.packet_tuples(wire.conversation(
        [(False, wire.fetch_request(1)), (True, wire.fetch_response(1, data))]))
    run = check(decode(pkts))
    assert run.exchanges[0].status == "paired"
