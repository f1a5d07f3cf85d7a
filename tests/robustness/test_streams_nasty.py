"""Hostile or odd conversations on a Kafka port: unknown API keys and versions, garbage
after valid frames, other protocols, TLS, zero-length and 1-byte segments, duplicate
correlation ids, responses before requests."""

from __future__ import annotations

import random

import pytest

from fuzz import wire
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.jsonl import ExportEncoder, dumps
from nasty import FRAME_REF, check, decode


def run_pairs(pairs: list[tuple[bool, bytes]], **kw: object):  # noqa: ANN201
    return check(decode(wire.packet_tuples(wire.conversation(pairs, **kw))))


def _traffic() -> list[tuple[bool, bytes]]:
    batch = wire.v2_batch([wire.v2_record(i, b"k%d" % i, b"v" * 50) for i in range(5)])
    return [(False, wire.api_versions_request(1)), (True, wire.api_versions_response(1)),
            (False, wire.metadata_request(2)), (True, wire.metadata_response(2)),
            (False, wire.produce_request(3, batch)), (True, wire.produce_response(3)),
            (False, wire.fetch_request(4)), (True, wire.fetch_response(4, batch))]


def test_unknown_api_key() -> None:
    run = run_pairs([(False, wire.request(999, 0, 1, b"abc")), (True, wire.response(1, b"xyz"))])
    (ex,) = run.exchanges
    assert ex.status == "paired" and ex.api_key == 999
    assert any("unknown API key 999" in p for p in ex.all_problems())


@pytest.mark.parametrize("version", [99, -1, 32767])
def test_unknown_api_version(version: int) -> None:
    run = run_pairs([(False, wire.request(3, version, 1, b"abc")),
                     (True, wire.response(1, b"xyz")),
                     (False, wire.metadata_request(2)), (True, wire.metadata_response(2))])
    first, second = run.exchanges
    assert first.status == "paired" and first.api_version == version
    assert any(f"v{version} is not a known version" in p for p in first.all_problems())
    assert second.status == "paired" and not second.all_problems()


def test_garbage_after_valid_frames_is_skipped_counted_and_located() -> None:
    garbage = b"GARBAGE!!" * 3
    run = run_pairs([(False, wire.metadata_request(1) + garbage), (True, wire.metadata_response(1)),
                     (False, wire.metadata_request(2)), (True, wire.metadata_response(2))])
    assert [ex.status for ex in run.exchanges] == ["paired", "paired"]
    assert run.summary.skipped_bytes == len(garbage)
    assert any(FRAME_REF.search(p) and str(len(garbage)) in p for p in run.summary.problems)


def test_garbage_at_the_end_of_a_stream() -> None:
    run = run_pairs([(False, wire.metadata_request(1)), (True, wire.metadata_response(1)),
                     (False, b"\x00\x00\x01")])
    assert run.exchanges[0].status == "paired"
    assert run.summary.skipped_bytes == 3
    assert any("3 bytes at the end of the client stream" in p and FRAME_REF.search(p)
               for p in run.summary.problems), run.summary.problems


OTHER_PROTOCOLS = {
    "http": [(False, b"GET / HTTP/1.1\r\nHost: kafka\r\n\r\n"),
             (True, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")],
    "ssh": [(True, b"SSH-2.0-OpenSSH_9.6\r\n"), (False, b"SSH-2.0-Go\r\n" + bytes(200))],
    "redis": [(False, b"*1\r\n$4\r\nPING\r\n"), (True, b"+PONG\r\n")],
    "smtp": [(True, b"220 mail ESMTP\r\n"), (False, b"EHLO x\r\n")],
    "zeros": [(False, bytes(5000)), (True, bytes(300))],
    "random": [(False, random.Random(1).randbytes(3000)), (True, random.Random(2).randbytes(900))],
}


@pytest.mark.parametrize("name", OTHER_PROTOCOLS)
def test_other_protocols_on_the_kafka_port(name: str) -> None:
    run = run_pairs(OTHER_PROTOCOLS[name])
    assert not [ex for ex in run.exchanges if ex.status == "paired"], name
    assert any("no recognisable Kafka traffic" in p and FRAME_REF.search(p)
               for p in run.all_problems()) or run.summary.skipped_bytes, run.all_problems()


def test_tls_on_the_kafka_port() -> None:
    run = run_pairs([(False, wire.tls_client_hello()), (True, b"\x16\x03\x03\x00\x04abcd")])
    assert not run.exchanges
    assert run.summary.tls_connections == 1
    assert any("TLS" in p and FRAME_REF.search(p) for p in run.summary.problems)


def _comparable(run) -> list[str]:  # noqa: ANN001
    enc = ExportEncoder("x")
    out = []
    for ex in run.exchanges:
        obj = enc.exchange_object(ex, ExchangeFacts(ex))
        for key in ("ts", "request_end_ts", "response_ts", "latency_ms", "request_frames",
                    "response_frames"):
            obj.pop(key)
        out.append(dumps(obj))
    return out


@pytest.mark.parametrize("mode", [wire.SEG_TINY, wire.SEG_EMPTY, wire.SEG_CLASS])
def test_tiny_and_empty_segments_decode_like_whole_ones(mode: int) -> None:
    """1-byte segments, zero-length segments between data, 1..32 KiB segments."""
    ops = [(wire.OP_BROKER if broker else 0, payload) for broker, payload in _traffic()]
    whole = check(decode(wire.packet_tuples(wire.script_packets(
        wire.encode_script(wire.PLAIN, ops)))))
    for size_class in (0, 3):
        script = wire.encode_script(wire.PLAIN | (mode << 5), [(c | size_class, p) for c, p in ops])
        odd = check(decode(wire.packet_tuples(wire.script_packets(script))))
        assert _comparable(odd) == _comparable(whole)
    assert [ex.status for ex in whole.exchanges] == ["paired"] * 4


def test_every_payload_byte_in_its_own_segment() -> None:
    conn = wire.Connection()
    conn.handshake()
    for broker, payload in _traffic():
        conn.send(broker, payload, sizes=[1] * len(payload))
        conn.empty(not broker)
    conn.close()
    run = check(decode(wire.packet_tuples(conn.packets)))
    assert [ex.status for ex in run.exchanges] == ["paired"] * 4


def test_duplicate_correlation_ids() -> None:
    run = run_pairs([(False, wire.metadata_request(1)), (False, wire.metadata_request(1)),
                     (True, wire.metadata_response(1)), (True, wire.metadata_response(1))])
    statuses = [ex.status for ex in run.exchanges]
    assert statuses == ["unanswered", "paired", "orphan_response"]
    assert any("reused" in p for p in run.exchanges[0].all_problems())
    assert run.exchanges[2].all_problems()


@pytest.mark.parametrize("handshake", [True, False])
def test_response_before_any_request(handshake: bool) -> None:
    run = run_pairs([(True, wire.metadata_response(5)), (False, wire.metadata_request(6)),
                     (True, wire.metadata_response(6))], handshake=handshake)
    assert [ex.status for ex in run.exchanges] == ["orphan_response", "paired"]
    orphan = run.exchanges[0]
    assert orphan.response is not None and orphan.correlation_id == 5


def test_responses_answering_requests_never_seen_mid_connection() -> None:
    """A capture that starts after requests were sent: their responses come first."""
    pairs = [(True, wire.metadata_response(i)) for i in (1, 2, 3)]
    pairs += [(False, wire.metadata_request(4)), (True, wire.metadata_response(4))]
    run = run_pairs(pairs, handshake=False)
    assert [ex.status for ex in run.exchanges][-1] == "paired"
    assert all(ex.status == "orphan_response" for ex in run.exchanges[:-1])
