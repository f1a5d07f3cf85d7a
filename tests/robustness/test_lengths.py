"""Negative and huge lengths, sizes and counts: reported, skipped, and never allocated.

Memory is measured with tracemalloc on a second run (the first one warms the decoder
caches): a 2 GB length field in a 40-byte frame must cost kilobytes, not gigabytes.
"""

from __future__ import annotations

import struct
import tracemalloc
from collections.abc import Callable

import pytest

from fuzz import checks, wire
from kwsniff.kafka.protocol import decode_request, decode_response
from kwsniff.kafka.records import Records, parse_message_set_07
from nasty import check, decode

#: bytes a single hostile message may cost beyond the warmed-up state
BOUND = 512 << 10
HUGE = (0x7FFFFFFF, 0x7FFFFFF0, 1 << 30, 0x10000000)
NEGATIVE = (-2, -100, -(1 << 31))


def peak(fn: Callable[[], object]) -> int:
    fn()                                            # warm caches (compiled decoders, ...)
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _conversation(*client_frames: bytes, broker: tuple[bytes, ...] = ()) -> list[tuple]:
    pairs = [(False, f) for f in client_frames] + [(True, f) for f in broker]
    return wire.packet_tuples(wire.conversation(pairs))


@pytest.mark.parametrize("size", HUGE + NEGATIVE)
def test_frame_size_field(size: int) -> None:
    """A 40-byte frame claiming ``size`` bytes, then ordinary traffic."""
    bogus = struct.pack(">i", size) + struct.pack(">hhi", 3, 1, 99) + bytes(30)
    pkts = _conversation(wire.api_versions_request(1), bogus, wire.metadata_request(2),
                         wire.metadata_request(3),
                         broker=(wire.api_versions_response(1), wire.metadata_response(2),
                                 wire.metadata_response(3)))
    assert peak(lambda: decode(pkts)) < BOUND
    run = check(decode(pkts))
    assert run.all_problems(), "the bogus size is not reported"
    # whatever the framer made of the bogus frame, the first exchange survives
    assert run.exchanges[0].status == "paired" and run.exchanges[0].api_key == 18


@pytest.mark.parametrize("count", HUGE + NEGATIVE)
def test_array_count(count: int) -> None:
    frame = wire.request(3, 1, 5, struct.pack(">i", count) + wire.string("orders"))[4:]
    msg = decode_request(frame)
    checks.check_message(msg)
    assert peak(lambda: decode_request(frame)) < BOUND
    if count != -1:
        assert msg.problems, count


@pytest.mark.parametrize("count", (1 << 31, 1 << 40, (1 << 63) - 1))
def test_compact_array_count(count: int) -> None:
    """Flexible versions: a varint count far beyond the frame."""
    body = wire.compact_string("fz-client") + wire.compact_string("1.0") + b"\x00"
    frame = wire.request(18, 3, 5, body, flexible=True)[4:]
    # ApiVersions v3 response (flexible): error code then a compact array of keys
    resp = struct.pack(">i", 5) + struct.pack(">h", 0) + wire.uvarint(count) + bytes(8)
    for raw, dec in ((frame, decode_request), (resp, lambda r: decode_response(r, 18, 3))):
        msg = dec(raw)
        checks.check_message(msg)
        assert peak(lambda raw=raw, dec=dec: dec(raw)) < BOUND
    assert decode_response(resp, 18, 3).problems


@pytest.mark.parametrize("length", HUGE + NEGATIVE)
def test_string_and_bytes_lengths(length: int) -> None:
    body = wire.i32(1) + struct.pack(">h", max(-(1 << 15), min(length, 0x7FFF))) + b"abc"
    msg = decode_request(wire.request(3, 1, 5, body)[4:])
    checks.check_message(msg)
    assert msg.problems
    # SaslAuthenticate v0: AuthBytes with an int32 length
    raw = wire.request(36, 0, 5, struct.pack(">i", length) + b"token")[4:]
    assert peak(lambda: decode_request(raw)) < BOUND
    assert decode_request(raw).problems


@pytest.mark.parametrize("value", HUGE + NEGATIVE)
def test_record_batch_lengths_and_counts(value: int) -> None:
    good = wire.v2_batch([wire.v2_record(0, b"k", b"v")])
    cases = []
    b = bytearray(good)
    struct.pack_into(">i", b, 8, value)                    # batch length
    cases.append(bytes(b))
    b = bytearray(good)
    struct.pack_into(">i", b, 57, value)                   # record count
    cases.append(bytes(b))
    rec = b"\x00" + wire.varint(0) + wire.varint(0) + wire.varint(value) + b"k"
    cases.append(wire.v2_batch([wire.varint(len(rec)) + rec]))   # key length
    cases.append(wire.v2_batch([wire.varint(value) + b"\x00"]))  # record length
    hdr = b"\x00" + wire.varint(0) + wire.varint(0) + wire.varint(-1) + wire.varint(-1)
    rec = hdr + wire.varint(value)                              # header count
    cases.append(wire.v2_batch([wire.varint(len(rec)) + rec]))
    for data in cases:
        def run(data: bytes = data) -> object:
            rs = Records(data)
            rs.decode()
            return rs.to_dict()
        assert peak(run) < BOUND
        rs = Records(data).decode()
        checks.check_problems(rs.problems, "records")
        assert rs.problems or rs.truncated, data.hex()


@pytest.mark.parametrize("value", HUGE + NEGATIVE)
def test_legacy_and_07_message_sizes(value: int) -> None:
    msg = bytearray(wire.legacy_message(0, b"value", magic=1))
    struct.pack_into(">i", msg, 8, value)
    ms07 = bytearray(wire.msg07(b"payload"))
    struct.pack_into(">i", ms07, 0, value)
    for rs_fn in (lambda: Records(bytes(msg)), lambda: parse_message_set_07(bytes(ms07))):
        def run(rs_fn: Callable[[], Records] = rs_fn) -> object:
            return rs_fn().decode().to_dict()
        assert peak(run) < BOUND
        rs = rs_fn().decode()
        assert rs.problems or rs.truncated
        checks.check_problems(rs.problems, "records")


@pytest.mark.parametrize("size,reported", [(50 << 20, "capture ends inside a 52428800-byte"),
                                           (1 << 30, "implausible message size 1073741824")])
def test_huge_fetch_response_claim_in_a_small_capture(size: int, reported: str) -> None:
    """A response whose size prefix claims 50 MiB (plausible) or 1 GiB (beyond
    ``max_frame``) and whose bytes stop after 100: nothing big is allocated, the cut or
    the implausible size is reported with its frame, and no byte goes unaccounted."""
    resp = struct.pack(">ii", size, 1) + bytes(100)
    pkts = _conversation(wire.fetch_request(1), broker=(resp,))
    assert peak(lambda: decode(pkts)) < BOUND
    run = check(decode(pkts))
    assert any(reported in p and "frame" in p for p in run.all_problems()), run.all_problems()
