"""The JSON Lines export: schema validity, bytes encoding, records, streaming memory."""

from __future__ import annotations

import base64
import gc
import io
import json
import math
import tracemalloc
from collections.abc import Iterator
from importlib import resources

import jsonschema
import pytest
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from builders import build, exchange, record_batch, request, response
from kwsniff.kafka import legacy07
from kwsniff.kafka.model import NO_RESPONSE_EXPECTED, ORPHAN_RESPONSE, PAIRED, Exchange, \
    KafkaMessage
from kwsniff.output.jsonl import SCHEMA_ID, ExportEncoder, JsonlWriter, decode_bytes, dumps, \
    encode_bytes


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    text = (resources.files("kwsniff.output") / "export_schema.json").read_text("utf-8")
    schema = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _valid(validator: jsonschema.Draft202012Validator, line: str) -> dict:
    obj = json.loads(line)
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.path))
    assert not errors, [(list(e.path), e.message[:200]) for e in errors[:3]]
    return obj


def _produce_exchange(index: int = 1, value: bytes = b'{"n":1}') -> Exchange:
    batch = record_batch([value, None, b"\xff\xfe binary"], keys=[b"k", None, b"\x00"],
                         headers=[("h", b"v"), ("bin", b"\x80")], producer=(7, 1, 40))
    req = request(build(ProduceRequest, 9, {
        "TransactionalId": None, "Acks": -1, "TimeoutMs": 1000,
        "TopicData": [{"Name": "orders", "PartitionData": [{"Index": 3, "Records": batch}]}]}),
        correlation_id=index)
    resp = response(build(ProduceResponse, 9, {
        "Responses": [{"Name": "orders", "PartitionResponses": [
            {"Index": 3, "ErrorCode": 0, "BaseOffset": 500}]}], "ThrottleTimeMs": 0}), req)
    return exchange(req, resp, index=index)


def test_bytes_encoding_round_trip():
    for data in (b"", b"plain text", "ünïcode".encode(), b"tab\tnewline\n", b"\x00\x01",
                 b"\xff\xfe", b"\x1b[31m"):
        enc = encode_bytes(data)
        assert len(enc) == 1
        assert decode_bytes(enc) == data
    assert encode_bytes(b"abc") == {"text": "abc"}
    assert encode_bytes(b"\x00\xff") == {"base64": base64.b64encode(b"\x00\xff").decode()}
    assert encode_bytes(None) is None and decode_bytes(None) is None


def test_dumps_sanitizes_floats_and_types():
    import uuid
    obj = {"a": math.nan, "b": [math.inf, 1.5], "u": uuid.UUID(int=1), "t": (1, b"x")}
    assert json.loads(dumps(obj)) == {"a": None, "b": [None, 1.5],
                                      "u": "00000000-0000-0000-0000-000000000001",
                                      "t": [1, {"text": "x"}]}


def test_exchange_and_record_objects(validator):
    enc = ExportEncoder("cap.pcap", records=True)
    lines = list(enc.lines(_produce_exchange()))
    assert len(lines) == 4
    ex = _valid(validator, lines[0])
    assert ex["schema"] == SCHEMA_ID and ex["kind"] == "exchange"
    assert (ex["api_name"], ex["api_version"], ex["status"]) == ("Produce", 9, PAIRED)
    assert ex["topics"] == ["orders"] and ex["partitions"] == [3] and ex["record_count"] == 3
    assert ex["request"]["TopicData"][0]["PartitionData"][0]["Records"] == {
        "size": ex["request"]["TopicData"][0]["PartitionData"][0]["Records"]["size"],
        "batch_count": 1, "record_count": 3, "codecs": ["none"], "truncated": False,
        # the batch header: what analyze's insights join produced and fetched batches by
        "batches": [{"base_offset": 0, "last_offset_delta": 2, "record_count": 3,
                     "producer_id": 7, "producer_epoch": 1, "base_sequence": 40,
                     "transactional": False, "control": False, "truncated": False}]}
    assert ex["request_bytes"] == _produce_exchange().request.size
    records = [_valid(validator, line) for line in lines[1:]]
    assert [r["offset"] for r in records] == [0, 1, 2]
    first, second, third = records
    assert first["key"] == {"text": "k"} and first["value"] == {"text": '{"n":1}'}
    assert first["headers"] == [{"key": "h", "value": {"text": "v"}},
                                {"key": "bin", "value": {"base64": "gA=="}}]
    assert second["key"] is None and second["value"] is None
    assert decode_bytes(third["value"]) == b"\xff\xfe binary"
    assert decode_bytes(third["key"]) == b"\x00"
    assert (first["topic"], first["partition"], first["side"]) == ("orders", 3, "request")
    assert (first["producer_id"], first["producer_epoch"], third["sequence"]) == (7, 1, 42)
    assert first["exchange"] == 1 and first["batch_index"] == 0 and third["record_index"] == 2


def test_unpaired_and_odd_exchanges_validate(validator):
    enc = ExportEncoder("-")
    req = request(build(FetchRequest, 4, {"ReplicaId": -1, "MaxWaitMs": 100, "Topics": [
        {"Topic": "t", "Partitions": [{"Partition": 0, "FetchOffset": 5}]}]}))
    resp = response(build(FetchResponse, 4, {"Responses": [{"Topic": "t", "Partitions": [
        {"PartitionIndex": 0, "ErrorCode": 1, "HighWatermark": -1,
         "Records": record_batch([b"x"])}]}]}), req)
    orphan = exchange(None, resp, status=ORPHAN_RESPONSE)
    orphan.problems.append("orphan response: no request seen")
    obj = _valid(validator, next(enc.lines(orphan)))
    assert obj["request"] is None and obj["client_id"] is None and obj["latency_ms"] is None
    assert obj["error_codes"] == [1] and obj["error_names"] == ["OFFSET_OUT_OF_RANGE"]
    assert obj["problems"] == ["orphan response: no request seen"]
    assert obj["ts"] == resp.ts_last and obj["response_ts"] == resp.ts_last

    broken = KafkaMessage(kind="request", raw=b"\x00\x00\x00\x63\x00\x00\x00\x01\xff",
                          api_key=0, api_version=99, correlation_id=1,
                          problems=["Produce v99 is not a known version"])
    obj = _valid(validator, next(enc.lines(exchange(broken, None, status=NO_RESPONSE_EXPECTED))))
    assert obj["request"] is None and obj["problems"] == [
        "request: Produce v99 is not a known version"]

    raw = legacy07.decode_request(b"\x00\x01\x00\x06orders\x00\x00\x00\x02"
                                  b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00")
    old = Exchange(index=9, stream=1, client=("::1", 4000), broker=("::1", 9092),
                   status="unanswered", request=raw, protocol=legacy07.PROTOCOL)
    obj = _valid(validator, next(enc.lines(old)))
    assert obj["api_name"] == "FETCH" and obj["correlation_id"] is None
    assert obj["client"] == "[::1]:4000" and obj["topics"] == ["orders"]


def test_summary_object(validator):
    enc = ExportEncoder("c")
    stream = io.StringIO()
    writer = JsonlWriter(stream, enc)
    writer.write_exchange(_produce_exchange())
    writer.write_summary({"packets": 10, "connections": 1, "exchanges": 1, "problems": 0,
                          "skipped_bytes": 0, "gap_bytes": 5})
    lines = stream.getvalue().splitlines()
    summary = _valid(validator, lines[-1])
    assert summary["kind"] == "summary" and summary["exported_exchanges"] == 1
    assert summary["gap_bytes"] == 5


def _many(n: int) -> Iterator[Exchange]:
    for i in range(1, n + 1):
        yield _produce_exchange(i, value=b"v" * 2000)


def test_export_streams_in_bounded_memory():
    """Memory kept after writing N exchanges does not depend on N (nothing accumulates;
    reference cycles of record sets are left to the garbage collector)."""
    class Sink(io.TextIOBase):
        def write(self, s: str) -> int:      # discard, like a file on disk
            return len(s)

    def retained(n: int) -> int:
        writer = JsonlWriter(Sink(), ExportEncoder("c", records=True))
        gc.collect()
        tracemalloc.start()
        for ex in _many(n):
            writer.write_exchange(ex)
        del ex
        gc.collect()
        current, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return current

    # Each exchange carries > 6 KB of record data: keeping anything per exchange would
    # retain megabytes; allow for unrelated interpreter caches filling up meanwhile.
    small, large = retained(20), retained(300)
    assert large < small + 256 * 1024, (small, large)
