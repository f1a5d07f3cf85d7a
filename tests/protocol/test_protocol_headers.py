"""Request/response header rules, including the special cases."""

from __future__ import annotations

import struct

import pytest

from kwsniff.kafka.protocol import (
    decode_request,
    decode_response,
    request_header_version,
    response_header_version,
)

protocol_wire = pytest.importorskip("protocol_wire")
needs_shared = pytest.mark.skipif(not protocol_wire.SHARED.is_dir(),
                                  reason="../shared/kafka-protocol is not present")


@pytest.mark.parametrize("key,version,expected", [
    (0, 8, 1), (0, 9, 2), (1, 11, 1), (1, 12, 2), (3, 0, 1), (3, 9, 2),
    (7, 0, 0), (7, 1, 1), (7, 2, 1), (7, 3, 2),          # ControlledShutdown v0: header v0
    (18, 2, 1), (18, 3, 2), (17, 1, 1), (47, 0, 1),       # SaslHandshake/OffsetDelete never flexible
    (0, 14, 2),                                           # future version of an open-ended API
    (999, 0, 1), (-5, 3, 1),                              # unknown keys: v1 (no tags assumed)
])
def test_request_header_version(key: int, version: int, expected: int) -> None:
    assert request_header_version(key, version) == expected


@pytest.mark.parametrize("key,version,expected", [
    (0, 8, 0), (0, 9, 1), (3, 8, 0), (3, 9, 1), (7, 3, 1),
    (18, 0, 0), (18, 3, 0), (18, 4, 0),                   # ApiVersions: always v0
    (17, 1, 0), (999, 3, 0),
])
def test_response_header_version(key: int, version: int, expected: int) -> None:
    assert response_header_version(key, version) == expected


@needs_shared
def test_controlled_shutdown_v0_has_no_client_id() -> None:
    sample = protocol_wire.make_sample(7, "request", 0, "full")
    assert sample.header_version == 0
    msg = decode_request(sample.frame)
    assert msg.problems == []
    assert msg.header_version == 0 and msg.client_id is None and "ClientId" not in msg.header
    assert msg.body == sample.values


@needs_shared
def test_flexible_request_header_tags_and_non_compact_client_id() -> None:
    sample = protocol_wire.make_sample(3, "request", 12, "full")
    msg = decode_request(sample.frame)
    assert msg.header_version == 2
    assert msg.client_id == "kwsniff-test"   # int16 length even in header v2
    assert msg.header["_unknown_tags"] == [(9, b"\x01\x02")]


def test_null_client_id() -> None:
    frame = struct.pack(">hhih", 18, 0, 5, -1)
    msg = decode_request(frame)
    assert msg.problems == [] and msg.client_id is None and msg.body == {}


@needs_shared
def test_apiversions_response_always_header_v0() -> None:
    for version in range(5):
        sample = protocol_wire.make_sample(18, "response", version, "notags")
        assert sample.header_version == 0
        msg = decode_response(sample.frame, 18, version)
        assert msg.problems == [] and msg.header_version == 0
        assert msg.body["ErrorCode"] == sample.values["ErrorCode"]


@needs_shared
@pytest.mark.parametrize("asked", [3, 4])
def test_apiversions_unsupported_version_answer_decodes_as_v0(asked: int) -> None:
    v0 = protocol_wire.schema_for(18, "response", 0)
    values = {"ErrorCode": 35, "ApiKeys": [
        {"ApiKey": 18, "MinVersion": 0, "MaxVersion": 2}, {"ApiKey": 0, "MinVersion": 0, "MaxVersion": 7}]}
    body = protocol_wire.Encoder(0, False).struct(v0.fields, values)
    frame = struct.pack(">i", 77) + body
    msg = decode_response(frame, 18, asked)
    assert msg.problems == []
    assert msg.api_version == asked and msg.header["_body_version"] == 0
    assert msg.body == values and msg.body_end == len(frame)


def test_unknown_api_key_keeps_header_and_raw_body() -> None:
    body = b"\x01\x02\x03\x04\x05"
    frame = struct.pack(">hhih", 250, 1, 9, 3) + b"cli" + body
    msg = decode_request(frame)
    assert (msg.api_key, msg.api_version, msg.correlation_id, msg.client_id) == (250, 1, 9, "cli")
    assert msg.body is None
    assert frame[msg.body_offset:] == body
    assert msg.problems == ["unknown API key 250: body of 5 bytes not decoded"]


def test_unknown_version_keeps_header() -> None:
    frame = struct.pack(">hhih", 0, 99, 9, 3) + b"cli" + b"\x00" + b"\xaa\xbb"
    msg = decode_request(frame)
    assert msg.header_version == 2 and msg.client_id == "cli"
    assert msg.body is None and msg.body_offset == len(frame) - 2
    assert len(msg.problems) == 1
    assert "Produce request v99 is not a known version (kwsniff decodes v0-v13)" in msg.problems[0]


def test_unknown_response_version() -> None:
    frame = struct.pack(">i", 4) + b"\x00\x01\x02"
    msg = decode_response(frame, 3, 77)
    assert msg.correlation_id == 4 and msg.body is None
    assert "Metadata response v77 is not a known version" in msg.problems[0]


def test_short_frames() -> None:
    assert "too short" in decode_request(b"\x00\x03\x00").problems[0]
    msg = decode_request(b"\x00\x03")
    assert msg.api_key == 3 and msg.api_version is None
    assert "too short" in decode_response(b"\x00\x01", 3, 1).problems[0]
    assert decode_request(b"").problems


def test_truncated_client_id() -> None:
    msg = decode_request(struct.pack(">hhih", 3, 1, 9, 30) + b"abc")
    assert msg.body is None and msg.client_id is None
    assert msg.problems and "RequestHeader v1 decoded only partly" in msg.problems[0]
