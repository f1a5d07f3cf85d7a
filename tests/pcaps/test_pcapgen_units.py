"""Unit tests of the capture generator's pure parts (tools/pcapgen)."""

from __future__ import annotations

import pytest
import samplecaps  # noqa: F401  (puts tools/ on sys.path)

from pcapgen.apinames import API_NAMES, api_key_for_name
from pcapgen.capture import port_filter
from pcapgen.manifest import INLINE_LIMIT, decode_bytes, encode_bytes
from pcapgen.reqlog import RequestLogError, parse_librdkafka_log

PREFIX = "%7|1795253473.937|SEND|cg-producer#producer-2| [thrd:127.0.0.1:19094/3]: "


def test_encode_bytes_variants() -> None:
    assert encode_bytes(None) is None
    assert encode_bytes(b"") == {"length": 0, "utf8": ""}
    assert encode_bytes("héllo") == {"length": 6, "utf8": "héllo"}
    binary = encode_bytes(b"\xff\x00\x01")
    assert binary == {"length": 3, "base64": "/wAB"}
    assert decode_bytes(binary) == b"\xff\x00\x01"
    big = encode_bytes(b"x" * (INLINE_LIMIT + 1))
    assert big is not None and set(big) == {"length", "sha256"}
    assert big["length"] == INLINE_LIMIT + 1 and decode_bytes(big) is None


def test_librdkafka_log_parsing() -> None:
    text = "\n".join([
        PREFIX + "127.0.0.1:19094/3: Sent partial ProduceRequest (v10, 0+50680/103056 bytes,"
                 " CorrId 3)",
        PREFIX + "127.0.0.1:19094/3: Sent ProduceRequest (v10, 103056 bytes @ 76744, "
                 "CorrId 3)",
        "%7|1795253474.100|SEND|cg-consumer-1#consumer-3| [thrd:GroupCoordinator]: "
        "GroupCoordinator/2: Sent JoinGroupRequest (v5, 300 bytes @ 0, CorrId 9)",
        "%7|1795253474.200|SEND|adm#producer-1| [thrd:127.0.0.1:19992/111]: "
        "127.0.0.1:19992/111: Sent IncrementalAlterConfigsRequestRequest (v1, 68 bytes @ 0,"
        " CorrId 7)",
        "%7|1795253474.300|RECV|adm#producer-1| [thrd:x]: x/1: Received Foo (v1, 1 bytes)",
    ])
    reqs = parse_librdkafka_log(text + "\n", {"2": 19093})
    got = [(r["client_id"], r["broker_port"], r["api_key"], r["api_version"],
            r["correlation_id"], r["size"]) for r in reqs]
    assert got == [("cg-producer", 19094, 0, 10, 3, 103056),
                   ("cg-consumer-1", 19093, 11, 5, 9, 300),
                   ("adm", 19992, 44, 1, 7, 68)]
    assert reqs[1]["ts"] == pytest.approx(1795253474.1)
    offsets = [r["_log_offset"] for r in reqs]
    assert offsets == sorted(offsets) and text.encode()[offsets[1]:].startswith(b"%7|")


def test_librdkafka_log_coordinator_before_its_node_is_known() -> None:
    """A logical coordinator handle may log a request without ``/node``; the handle's
    other lines (before, else after) give the node."""
    head = "%7|1795264824.508|{kind}|acks-consumer#consumer-5| [thrd:GroupCoordinator]: "
    text = "\n".join([
        head.format(kind="SEND") + "GroupCoordinator: Sent ApiVersionRequest (v0, 27 bytes "
                                   "@ 0, CorrId 2)",
        head.format(kind="RECV") + "GroupCoordinator/1: Received ApiVersionResponse (v3, 13 "
                                   "bytes, CorrId 1, rtt 0.29ms)",
    ])
    reqs = parse_librdkafka_log(text, {"1": 19292})
    assert [(r["broker_port"], r["api_key"], r["correlation_id"]) for r in reqs] == \
        [(19292, 18, 2)]
    earlier = text.splitlines()[1].replace("CorrId 1", "CorrId 0") + "\n" + \
        text.replace("GroupCoordinator/1", "GroupCoordinator/2")
    assert [r["broker_port"] for r in parse_librdkafka_log(earlier, {"1": 19292, "2": 2})] \
        == [19292]
    with pytest.raises(RequestLogError):  # no other line names the node
        parse_librdkafka_log(text.splitlines()[0], {"1": 19292})


def test_librdkafka_log_errors_are_loud() -> None:
    with pytest.raises(RequestLogError):
        parse_librdkafka_log(PREFIX + "127.0.0.1:1/1: Sent NoSuchThingRequest (v1, 1 bytes "
                             "@ 0, CorrId 1)", {})
    with pytest.raises(RequestLogError):  # coordinator with an unknown node id
        parse_librdkafka_log("%7|1.000|SEND|c#consumer-1| [thrd:GroupCoordinator]: "
                             "GroupCoordinator/9: Sent HeartbeatRequest (v3, 1 bytes @ 0, "
                             "CorrId 1)", {})


def test_api_names() -> None:
    assert api_key_for_name("ApiVersion") == 18  # librdkafka's spelling
    assert api_key_for_name("ApiVersions") == 18
    assert api_key_for_name("Offset") == 2
    assert api_key_for_name("Bogus") is None
    assert API_NAMES[75] == "DescribeTopicPartitions"


def test_port_filter() -> None:
    assert port_filter([19093, 19092, 19093]) == "tcp and (port 19092 or port 19093)"


def test_librdkafka_response_log_parsing() -> None:
    from pcapgen.resplog import client_responses
    text = "\n".join([
        "%7|1795860951.478|RECV|slow-1#consumer-3| [thrd:127.0.0.1:20292/bootstrap]: "
        "127.0.0.1:20292/bootstrap: Received ApiVersionResponse (v3, 13 bytes, CorrId 1, "
        "rtt 0.09ms)",
        "%7|1795860952.593|RECV|fast-1#consumer-2| [thrd:GroupCoordinator]: "
        "GroupCoordinator/1: Received FetchResponse (v16, 105 bytes, CorrId 10, rtt 100.68ms)",
        "%7|1795860952.594|SEND|fast-1#consumer-2| [thrd:GroupCoordinator]: "
        "GroupCoordinator/1: Sent FetchRequest (v16, 130 bytes @ 0, CorrId 11)",
    ])
    assert client_responses(text) == [
        {"client_id": "slow-1", "api": "ApiVersion", "api_version": 3, "correlation_id": 1,
         "ts": 1795860951.478},
        {"client_id": "fast-1", "api": "Fetch", "api_version": 16, "correlation_id": 10,
         "ts": 1795860952.593}]
