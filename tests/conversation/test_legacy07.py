"""The Kafka 0.7 wire protocol, built from the layouts of ``../shared/seeds/`` (the
"Kafka Wire Format" documents): request header (length, type, topic, partition),
PRODUCE/MULTIPRODUCE (no response), FETCH, MULTIFETCH, OFFSETS, responses with an error
code, messages with magic 0 (<= 0.6) and magic 1 (compression byte)."""

from __future__ import annotations

import gzip
import struct
import zlib

import pytest
from convsim import Sim, merge

from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka import legacy07
from kwsniff.kafka.model import NO_RESPONSE_EXPECTED, ORPHAN_RESPONSE, PAIRED, UNANSWERED


def message(payload: bytes, magic: int = 1, compression: int = 0) -> bytes:
    body = bytes([magic]) + (bytes([compression]) if magic == 1 else b"") + \
        struct.pack(">I", zlib.crc32(payload)) + payload
    return struct.pack(">i", len(body)) + body


def topic(name: str) -> bytes:
    return struct.pack(">h", len(name)) + name.encode()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def produce(name: str, partition: int, msgs: list[bytes]) -> bytes:
    ms = b"".join(msgs)
    return frame(struct.pack(">h", 0) + topic(name) + struct.pack(">ii", partition, len(ms)) + ms)


def multiproduce(parts: list[tuple[str, int, list[bytes]]]) -> bytes:
    body = b""
    for name, partition, msgs in parts:
        ms = b"".join(msgs)
        body += topic(name) + struct.pack(">ii", partition, len(ms)) + ms
    return frame(struct.pack(">hh", 3, len(parts)) + body)


def fetch(name: str, partition: int, offset: int, max_size: int) -> bytes:
    return frame(struct.pack(">h", 1) + topic(name) + struct.pack(">iqi", partition, offset, max_size))


def multifetch(parts: list[tuple[str, int, int, int]]) -> bytes:
    return frame(struct.pack(">hh", 2, len(parts)) + b"".join(
        topic(n) + struct.pack(">iqi", p, o, m) for n, p, o, m in parts))


def offsets(name: str, partition: int, time: int, max_number: int) -> bytes:
    return frame(struct.pack(">h", 4) + topic(name) + struct.pack(">iqi", partition, time, max_number))


def response(error: int, body: bytes = b"") -> bytes:
    return frame(struct.pack(">h", error) + body)


def multifetch_response(parts: list[tuple[int, bytes]]) -> bytes:
    return response(0, b"".join(struct.pack(">ih", 2 + len(ms), err) + ms for err, ms in parts))


def conversation(sim: Sim) -> None:
    sim.c(produce("test", 0, [message(b"hello"), message(b"old", magic=0)]))
    sim.c(multiproduce([("test", 0, [message(b"a")]),
                        ("logs", 3, [message(gzip.compress(message(b"inner")), compression=1)])]))
    sim.c(fetch("test", 0, 0, 300 * 1024))
    sim.s(response(0, message(b"hello") + message(b"old", magic=0)))
    sim.c(offsets("test", 0, -2, 1))
    sim.s(response(0, struct.pack(">iq", 1, 0)))
    sim.c(multifetch([("test", 0, 0, 1000), ("logs", 3, 17, 1000)]))
    sim.s(multifetch_response([(0, message(b"hello")), (1, b"")]))
    sim.c(fetch("test", 7, 0, 1000))
    sim.s(response(3))                       # WrongPartition


@pytest.mark.parametrize("port", [9092, 7070])
def test_07_decoded_and_paired_in_order(port: int) -> None:
    s = Sim(server=("10.0.0.7", port))
    conversation(s)
    s.fin()
    eng = Engine()
    out = list(eng.run(merge(s)))
    assert [(e.protocol, e.status, e.api_key) for e in out] == [
        ("kafka-0.7", NO_RESPONSE_EXPECTED, 0), ("kafka-0.7", NO_RESPONSE_EXPECTED, 3),
        ("kafka-0.7", PAIRED, 1), ("kafka-0.7", PAIRED, 4), ("kafka-0.7", PAIRED, 2),
        ("kafka-0.7", PAIRED, 1)]
    assert all(e.correlation_id is None and not e.all_problems() for e in out)
    prod = out[0].request.body
    assert prod["Topic"] == "test" and prod["Partition"] == 0
    recs = list(prod["Messages"].iter_records())
    assert [r.value for r in recs] == [b"hello", b"old"]
    assert out[1].request.body["Produces"][1]["Topic"] == "logs"
    f = out[2]
    assert f.request.body == {"Topic": "test", "Partition": 0, "Offset": 0, "MaxSize": 300 * 1024}
    assert f.response.body["ErrorCode"] == 0
    assert [r.value for r in f.response.body["Messages"].iter_records()] == [b"hello", b"old"]
    assert out[3].response.body["Offsets"] == [0]
    mf = out[4].response.body["Responses"]
    assert [(p["Topic"], p["Partition"], p["ErrorCode"]) for p in mf] == [("test", 0, 0), ("logs", 3, 1)]
    assert out[5].response.header["ErrorName"] == "WrongPartition"
    assert out[5].latency_ms is not None and out[5].latency_ms > 0
    c = eng.connection_summaries()[0]
    assert c.protocol == "kafka-0.7" and c.errors == {3: 1, 1: 1} or c.errors == {3: 1}
    assert eng.summary.kafka07_connections == 1


def test_07_unanswered_and_orphan() -> None:
    s = Sim()
    s.s(response(0, struct.pack(">iqq", 2, 500, 0)))     # orphan: an OFFSETS answer
    s.c(fetch("test", 0, 0, 1000))
    s.c(fetch("test", 0, 0, 1000))
    s.s(response(0))                                     # answers the first fetch
    s.fin()
    out = list(Engine().run(merge(s)))
    assert [e.status for e in out] == [ORPHAN_RESPONSE, PAIRED, UNANSWERED]
    orphan = out[0].response
    assert orphan.api_key == legacy07.OFFSETS and orphan.body["Offsets"] == [500, 0]
    assert orphan.inferred and orphan.inferred.startswith("bytes:")


def test_07_request_parser_is_exact() -> None:
    raw = fetch("test", 0, 0, 10)[4:]
    assert legacy07.parse_request(raw) is not None
    assert legacy07.parse_request(raw + b"\x00") is None          # trailing byte
    assert legacy07.parse_request(raw[:-1]) is None               # cut
    bad_topic = struct.pack(">h", 1) + topic("te st") + struct.pack(">iqi", 0, 0, 10)
    assert legacy07.parse_request(bad_topic) is None
    msg = legacy07.decode_request(b"\x00\x09garbage")
    assert msg.body is None and "not a well-formed" in msg.problems[0]
    resp = legacy07.decode_response(b"\x00", None)
    assert resp.problems


def test_07_gap_resyncs_on_next_request() -> None:
    s = Sim()
    s.c(fetch("test", 0, 0, 1000))
    s.s(response(0, message(b"x" * 3000)))
    lost = s.c(fetch("test", 0, 3000, 1000))
    s.s(response(0, message(b"y" * 10)))
    s.c(fetch("test", 0, 3020, 1000))
    s.s(response(0))
    s.fin()
    eng = Engine(EngineOptions())
    out = list(eng.run(merge(s, drop=[(0, i) for i in lost])))
    # the lost request's response is paired with nothing invented: FIFO pairing resumes
    assert out[0].status == PAIRED
    assert out[-1].status == PAIRED and out[-1].request.body["Offset"] == 3020


def test_07_pipelined_with_lost_response_stays_aligned() -> None:
    s = Sim()
    s.c(fetch("test", 0, 0, 1000))
    s.c(offsets("test", 0, -1, 5))
    s.c(fetch("test", 0, 10, 1000))
    lost = s.s(response(0, message(b"first")))          # answer to the first FETCH: lost
    s.s(response(0, struct.pack(">iqq", 2, 9, 0)))      # OFFSETS answer
    s.s(response(0, message(b"third")))
    s.fin()
    out = list(Engine().run(merge(s, drop=[(0, i) for i in lost])))
    assert [e.status for e in out] == [UNANSWERED, PAIRED, PAIRED]
    assert out[1].api_key == legacy07.OFFSETS and out[1].response.body["Offsets"] == [9, 0]
    assert "uncertain" in out[1].problems[0]
    assert out[2].request.body["Offset"] == 10 and not out[2].problems


def test_07_response_before_request_completes_is_not_paired_with_it() -> None:
    s = Sim()
    s.s(response(0, message(b"old")))                  # answers a request before the capture
    s.c(fetch("test", 0, 0, 1000))
    s.s(response(0))
    s.fin()
    out = list(Engine().run(merge(s)))
    assert [e.status for e in out] == [ORPHAN_RESPONSE, PAIRED]
