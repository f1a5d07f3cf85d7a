"""Bad bytes never raise out of the decoder; what is wrong is reported."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwsniff.kafka.protocol import decode_request, decode_response, decode_struct, field_spans
from kwsniff.kafka.protocol.decoder import _bodies, _plans

protocol_wire = pytest.importorskip("protocol_wire")
needs_shared = pytest.mark.skipif(not protocol_wire.SHARED.is_dir(),
                                  reason="../shared/kafka-protocol is not present")

# a spread of APIs, old and new, flexible and not
PREFIX_CASES = [(0, "request", 3), (0, "request", 13), (1, "response", 4), (1, "response", 18),
                (3, "response", 1), (3, "response", 13), (18, "response", 4), (88, "request", 0),
                (6, "request", 8), (4, "request", 2), (69, "response", 1)]


def _decode(kind: str, key: int, version: int, frame: bytes):  # noqa: ANN202
    if kind == "request":
        return decode_request(frame)
    return decode_response(frame, key, version)


@needs_shared
@pytest.mark.parametrize("key,kind,version", PREFIX_CASES)
def test_every_truncation_is_reported(key: int, kind: str, version: int) -> None:
    sample = protocol_wire.make_sample(key, kind, version, "full")
    body_start = len(sample.frame) - len(sample.body)
    for cut in range(len(sample.frame)):
        msg = _decode(kind, key, version, sample.frame[:cut])
        assert msg.problems, cut
        assert msg.body_end <= cut
        if cut > body_start and msg.body is not None:
            assert "decoded only partly" in msg.problems[-1]
            assert msg.body_offset == body_start


@needs_shared
def test_partial_body_keeps_what_decoded_and_names_the_place() -> None:
    sample = protocol_wire.make_sample(3, "response", 12, "notags")
    msg = decode_response(sample.frame[:-5], 3, 12)
    assert msg.body is not None and msg.body["Brokers"] == sample.values["Brokers"]
    assert msg.problems[-1].startswith("body decoded only partly: ")
    assert " after " in msg.problems[-1]


@needs_shared
@pytest.mark.parametrize("extra", [1, 7, 300])
def test_leftover_bytes_are_counted(extra: int) -> None:
    sample = protocol_wire.make_sample(0, "request", 9, "full")
    msg = decode_request(sample.frame + b"\x00" * extra)
    noun = "byte" if extra == 1 else "bytes"      # "1 byte", never "1 bytes"
    assert msg.problems == [f"{extra} {noun} left over after the body"]
    assert msg.body_end == len(sample.frame)
    assert msg.body is not None and msg.body["Acks"] == sample.values["Acks"]


def test_huge_array_count_is_rejected_without_allocating() -> None:
    # Metadata v0 request: Topics count 2^31-1 with 3 bytes behind it
    frame = struct.pack(">hhih", 3, 0, 1, 0) + struct.pack(">i", 0x7FFFFFFF) + b"abc"
    msg = decode_request(frame)
    assert "cannot fit in the 3 bytes left" in msg.problems[0]


def test_negative_string_length_other_than_null() -> None:
    frame = struct.pack(">hhih", 3, 0, 1, 0) + struct.pack(">ih", 1, -7)
    msg = decode_request(frame)
    assert "negative length -7" in msg.problems[0]


def test_null_in_non_nullable_field_is_reported() -> None:
    frame = struct.pack(">hhih", 3, 0, 1, 0) + struct.pack(">ih", 1, -1)
    msg = decode_request(frame)
    assert msg.body == {"Topics": [{"Name": None}]}
    assert msg.problems == ["Topics[].Name: null in a non-nullable field"]


def test_varint_longer_than_5_bytes() -> None:
    # ApiVersions v3 request (flexible): ClientSoftwareName length as a 6-byte varint
    frame = struct.pack(">hhih", 18, 3, 1, 0) + b"\x00" + b"\xff" * 6 + b"\x01"
    msg = decode_request(frame)
    assert "unsigned varint longer than 5 bytes" in msg.problems[-1]


@needs_shared
def test_known_tag_with_bad_content_is_kept_raw() -> None:
    # Fetch v12 request: top-level tag 0 is ClusterId (compact nullable string)
    sample = protocol_wire.make_sample(1, "request", 12, "notags")
    assert sample.body.endswith(b"\x00")
    bad = b"\x7f\x01\x02"       # claims a 126-byte string inside a 3-byte tag
    frame = sample.frame[:-1] + b"\x01\x00" + bytes([len(bad)]) + bad
    msg = decode_request(frame)
    assert msg.body is not None and "ClusterId" not in msg.body
    assert msg.body["_unknown_tags"] == [(0, bad)]
    assert "ClusterId (tag 0): cannot decode 3 bytes" in msg.problems[0]
    assert msg.body_end == len(frame)


@needs_shared
def test_known_tag_shorter_than_its_size_is_resynchronised() -> None:
    sample = protocol_wire.make_sample(1, "request", 12, "notags")
    value = b"\x03ab" + b"\x00\x00"   # "ab" + 2 stray bytes inside the tag
    frame = sample.frame[:-1] + b"\x01\x00" + bytes([len(value)]) + value
    msg = decode_request(frame)
    assert msg.body["ClusterId"] == "ab"
    assert msg.problems == ["ClusterId (tag 0): decoded 3 of its 5 bytes"]
    assert msg.body_end == len(frame)


def test_tag_size_beyond_frame() -> None:
    # ApiVersions v3: header tags, two empty compact strings, then 1 tag (5) of 127 bytes
    frame = struct.pack(">hhih", 18, 3, 1, 0) + b"\x00" + b"\x01\x01" + b"\x01\x05\x7f"
    msg = decode_request(frame)
    assert msg.problems and "tagged field 5 of 127 bytes exceeds" in msg.problems[-1]


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    frame = struct.pack(">hhih", 3, 0, 1, 0) + struct.pack(">ih", 1, 2) + b"\xff\xfe"
    msg = decode_request(frame)
    assert msg.problems == [] and msg.body == {"Topics": [{"Name": "\ufffd\ufffd"}]}


def _plan_count() -> int:
    """Plans cached (by kind, then api key, then version)."""
    return sum(len(by_version) for by_key in _plans.values() for by_version in by_key.values())


def test_garbage_does_not_grow_the_caches() -> None:
    before = (_plan_count(), len(_bodies))
    rng = random.Random(3)
    for _ in range(2000):
        frame = struct.pack(">hhi", rng.randrange(-32768, 32768), rng.randrange(-32768, 32768), 1)
        decode_request(frame + bytes(rng.randrange(256) for _ in range(rng.randrange(20))))
    assert (_plan_count(), len(_bodies)) <= (before[0] + 400, before[1] + 400)
    assert _plan_count() > 0            # (it does count the plans)


def _garbage_frames(seed: int, n: int) -> list[tuple[int, int, bytes]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        key = rng.randrange(0, 93)
        version = rng.randrange(0, 19)
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
        out.append((key, version, body))
    return out


@pytest.mark.parametrize("key,version,body", _garbage_frames(11, 400))
def test_garbage_bodies(key: int, version: int, body: bytes) -> None:
    req = decode_request(struct.pack(">hhih", key, version, 1, 1) + b"c" + b"\x00" + body)
    resp = decode_response(struct.pack(">i", 1) + b"\x00" + body, key, version)
    for msg in (req, resp):
        assert msg.body is not None or msg.problems
        assert 0 <= msg.body_offset <= msg.body_end <= len(msg.raw)
        field_spans(msg)   # must not raise either


@given(st.binary(max_size=80), st.integers(-3, 95), st.integers(-1, 20))
@settings(max_examples=300, deadline=None)
def test_hypothesis_requests_and_responses(data: bytes, key: int, version: int) -> None:
    for msg in (decode_request(struct.pack(">hh", key, version) + data),
                decode_response(data, key, version)):
        assert isinstance(msg.problems, list)
        assert msg.body_end <= len(msg.raw)
        assert not any(p.startswith("internal decoder error") for p in msg.problems)


@pytest.mark.fuzz
@given(st.binary(max_size=400), st.integers(0, 92), st.integers(0, 18))
@settings(max_examples=20000, deadline=None)
def test_hypothesis_long_run(data: bytes, key: int, version: int) -> None:
    for msg in (decode_request(struct.pack(">hhi", key, version, 1) + data),
                decode_response(data, key, version)):
        assert not any(p.startswith("internal decoder error") for p in msg.problems)
        field_spans(msg)


@given(st.binary(max_size=60))
@settings(max_examples=200, deadline=None)
def test_decode_struct_never_raises(data: bytes) -> None:
    for name, version in (("ConsumerProtocolSubscription", 3), ("LeaderChangeMessage", 1),
                          ("PartitionRecord", 2), ("GroupMetadataValue", 4)):
        out, end = decode_struct(name, version, data)
        assert isinstance(out, dict) and 0 <= end <= len(data)
