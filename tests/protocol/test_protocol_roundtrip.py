"""Every (api key, version, request/response) in the union of the definitions decodes.

Messages are built by the test-only encoder in ``protocol_wire`` (raw shared definitions,
not kwsniff's table) with non-default values in every field, every known tagged field
and an unknown tag in every struct of flexible versions ("full"), with nullable fields
null and arrays empty ("nulls"), and without tagged fields ("notags").
"""

from __future__ import annotations

from typing import Any

import pytest

from kwsniff.kafka.protocol import decode_request, decode_response, version_range

protocol_wire = pytest.importorskip("protocol_wire")
if not protocol_wire.SHARED.is_dir():
    pytest.skip("../shared/kafka-protocol is not present", allow_module_level=True)


def _cases() -> list[tuple[int, str, int]]:
    out = []
    for key in protocol_wire.all_api_keys():
        for kind in ("request", "response"):
            for v in protocol_wire.all_versions(key, kind):
                out.append((key, kind, v))
    return out


CASES = _cases()


def norm(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: norm(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(norm(v) for v in obj)
    if hasattr(obj, "data") and not isinstance(obj, (bytes, str)):
        return ("records", bytes(obj.data))
    return obj


def decode(sample: Any) -> Any:
    if sample.kind == "request":
        return decode_request(sample.frame)
    return decode_response(sample.frame, sample.key, sample.version)


def check_body(sample: Any, msg: Any) -> None:
    assert msg.problems == [], msg.problems
    assert msg.body_end == len(sample.frame)
    assert msg.body_offset == len(sample.frame) - len(sample.body)
    if sample.schema.origin == "json":
        assert norm(msg.body) == norm(sample.values)
    else:  # franz-go defined: kwsniff renames fields to Kafka's names; compare by position
        assert protocol_wire.positional(msg.body) == protocol_wire.positional(sample.values)


def test_union_matches_decoder_coverage() -> None:
    keys = protocol_wire.all_api_keys()
    assert keys == list(range(93))
    for key in keys:
        for kind in ("request", "response"):
            vs = protocol_wire.all_versions(key, kind)
            assert version_range(key, kind) == (vs[0], vs[-1])
            assert vs == list(range(vs[0], vs[-1] + 1))


@pytest.mark.parametrize("key,kind,version", CASES)
def test_full_values_with_tags(key: int, kind: str, version: int) -> None:
    sample = protocol_wire.make_sample(key, kind, version, "full")
    msg = decode(sample)
    check_body(sample, msg)
    assert msg.api_key == key and msg.api_version == version
    assert msg.correlation_id == 0x1234567 + version
    assert msg.header_version == sample.header_version
    if kind == "request" and sample.header_version >= 1:
        assert msg.client_id == "kwsniff-test"
    if sample.header_version == (2 if kind == "request" else 1):
        assert msg.header["_unknown_tags"] == [(9, b"\x01\x02")]


@pytest.mark.parametrize("key,kind,version", CASES)
def test_nulls_and_empty_arrays(key: int, kind: str, version: int) -> None:
    sample = protocol_wire.make_sample(key, kind, version, "nulls")
    check_body(sample, decode(sample))


@pytest.mark.parametrize("key,kind,version", CASES)
def test_without_tagged_fields(key: int, kind: str, version: int) -> None:
    sample = protocol_wire.make_sample(key, kind, version, "notags")
    check_body(sample, decode(sample))
