"""field_spans: every decoded field has a byte range that really holds its value."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kwsniff.kafka.protocol import decode_request, decode_response, field_info, field_spans

protocol_wire = pytest.importorskip("protocol_wire")
if not protocol_wire.SHARED.is_dir():
    pytest.skip("../shared/kafka-protocol is not present", allow_module_level=True)

_FMT = {"int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I",
        "int64": ">q", "float64": ">d", "bool": ">?"}

CASES = [(key, kind, v) for key in protocol_wire.all_api_keys() for kind in ("request", "response")
         for v in protocol_wire.all_versions(key, kind)[-1:]] + [
    (0, "request", 0), (1, "response", 3), (3, "response", 0), (7, "request", 0)]


def _walk(obj: Any, path: tuple) -> Any:
    for p in path:
        obj = obj[p]
    return obj


@pytest.mark.parametrize("key,kind,version", CASES)
def test_spans_cover_every_value(key: int, kind: str, version: int) -> None:
    sample = protocol_wire.make_sample(key, kind, version, "full")
    msg = (decode_request(sample.frame) if kind == "request"
           else decode_response(sample.frame, key, version))
    assert msg.problems == []
    spans = field_spans(msg)
    by_path = {(s.section, s.path): s for s in spans}
    # every top-level body field and every header field has a span
    for section, tree in (("body", msg.body), ("header", msg.header)):
        for name, value in tree.items():
            if name == "_unknown_tags":
                assert all((section, (name, i)) in by_path for i in range(len(value)))
            else:
                assert (section, (name,)) in by_path
    for s in spans:
        assert 0 <= s.offset and s.offset + s.length <= len(sample.frame)
        if s.section == "body":
            assert s.offset >= msg.body_offset
        tree = msg.body if s.section == "body" else msg.header
        value = _walk(tree, s.path)
        chunk = sample.frame[s.offset:s.offset + s.length]
        if "_unknown_tags" in s.path:
            tag, data = value
            assert chunk.endswith(data)
            continue
        if s.section == "body" and not isinstance(s.path[-1], int):
            info = field_info(key, kind, version, s.path)
            assert info is not None, s.path
            if info.type in _FMT:
                assert struct.unpack(_FMT[info.type], chunk)[0] == value
            elif info.type == "string" and value is not None:
                assert chunk.endswith(value.encode())
            elif info.type == "uuid":
                assert chunk.hex() == value.replace("-", "")
            elif info.type in ("bytes", "records") and value is not None:
                assert chunk.endswith(bytes(getattr(value, "data", value)))


def test_spans_of_a_failed_body_stop_at_the_failure() -> None:
    frame = struct.pack(">hhih", 3, 0, 1, 0) + struct.pack(">ih", 2, 3) + b"abc" + b"\x00\x09x"
    msg = decode_request(frame)
    assert msg.problems and "after Topics[0].Name (offset 19)" in msg.problems[0]
    paths = [s.path for s in field_spans(msg) if s.section == "body"]
    assert ("Topics", 0, "Name") in paths
    assert ("Topics", 1, "Name") not in paths


def test_spans_never_raise_on_an_undecoded_message() -> None:
    msg = decode_request(b"\x00")
    assert field_spans(msg) == []
    msg = decode_request(struct.pack(">hhih", 300, 0, 1, -1) + b"zz")
    assert [s.path for s in field_spans(msg)] == [
        ("RequestApiKey",), ("RequestApiVersion",), ("CorrelationId",), ("ClientId",)]
