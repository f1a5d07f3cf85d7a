"""The summary lane (kwsniff/output/skim.py): summary lines of exchanges with deferred
bodies, made without decoding them into Records, must be exactly the lines of the full
decoding, and the lane must decline (and complete the bodies) wherever they could
differ. Compared here on every committed capture (command line, with the lane and with
the lane switched off), on messages kafka-python encodes, on crafted damage, and on
seeded mutations of real Produce and Fetch frames."""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import pytest
from fuzz.checks import lane_lines
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from kwsniff.capture import open_capture
from kwsniff.cli import main
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka import decoding, embedded
from kwsniff.kafka.model import NO_RESPONSE_EXPECTED, PAIRED, Exchange
from kwsniff.output import digest as digest_mod
from kwsniff.output import extra_fields, skim
from kwsniff.output.pipeline import Selection
from kwsniff.output.skim import SkimFacts, SummaryLane
from tests.output.builders import build, record_batch

ROOT = Path(__file__).resolve().parents[2]
PCAPS = sorted((ROOT / "pcaps").glob("*.pcap"))

pytestmark = pytest.mark.skipif(not SummaryLane.available(),
                                reason="the summary lane needs the field-decoder kernel")


def both_lines(req_raw: bytes, resp_raw: bytes | None, status: str = PAIRED
               ) -> tuple[str, str, bool]:
    """(line of the full decoding, line through the lane, whether the lane took it)."""
    return lane_lines(req_raw, resp_raw, status)


def _pair(req_raw: bytes, resp_raw: bytes | None, defer: bool,
          status: str = PAIRED) -> Exchange:
    req = decoding.decode_request(req_raw, defer=defer)
    resp = None if resp_raw is None else \
        decoding.decode_response(resp_raw, req.api_key, req.api_version, defer=defer)
    return Exchange(index=1, stream=0, client=("10.0.0.1", 50000), broker=("10.0.0.2", 9092),
                    status=status, request=req, response=resp)


def _encode(obj: Any, correlation_id: int = 7) -> bytes:
    obj.with_header(correlation_id=correlation_id, client_id="lane-test")
    return bytes(obj.encode(header=True))


def _response(obj: Any, correlation_id: int = 7) -> bytes:
    obj.with_header(correlation_id=correlation_id)
    return bytes(obj.encode(header=True))


def produce_pair(version: int = 8, records: bytes | None = None, error: int = 0,
                 acks: int = 1) -> tuple[bytes, bytes]:
    records = record_batch([b"v1", b"v2"]) if records is None else records
    req = _encode(build(ProduceRequest, version, {
        "TransactionalId": None, "Acks": acks, "TimeoutMs": 1000,
        "TopicData": [{"Name": "orders", "PartitionData": [
            {"Index": 0, "Records": records}, {"Index": 1, "Records": records}]}]}))
    resp = _response(build(ProduceResponse, version, {
        "Responses": [{"Name": "orders", "PartitionResponses": [
            {"Index": 0, "ErrorCode": error, "BaseOffset": 41, "LogAppendTimeMs": -1,
             "LogStartOffset": 0, "RecordErrors": [], "ErrorMessage": None},
            {"Index": 1, "ErrorCode": 0, "BaseOffset": 42, "LogAppendTimeMs": -1,
             "LogStartOffset": 0, "RecordErrors": [], "ErrorMessage": None}]}],
        "ThrottleTimeMs": 0}))
    return req, resp


def fetch_pair(version: int = 11, records: bytes | None = None, error: int = 0,
               top_error: int = 0) -> tuple[bytes, bytes]:
    records = record_batch([b"a" * 30, b"b" * 40], codec=1) if records is None else records
    req = _encode(build(FetchRequest, version, {
        "ReplicaId": -1, "MaxWaitMs": 500, "MinBytes": 1, "MaxBytes": 1 << 20,
        "IsolationLevel": 0, "SessionId": 0, "SessionEpoch": -1,
        "Topics": [{"Topic": "orders", "Partitions": [
            {"Partition": 3, "CurrentLeaderEpoch": -1, "FetchOffset": 1200,
             "LogStartOffset": -1, "PartitionMaxBytes": 1 << 20}]}],
        "ForgottenTopicsData": [], "RackId": ""}))
    resp = _response(build(FetchResponse, version, {
        "ThrottleTimeMs": 0, "ErrorCode": top_error, "SessionId": 0,
        "Responses": [{"Topic": "orders", "Partitions": [
            {"PartitionIndex": 3, "ErrorCode": error, "HighWatermark": 1300,
             "LastStableOffset": 1300, "LogStartOffset": 0, "AbortedTransactions": None,
             "PreferredReadReplica": -1, "Records": records}]}]}))
    return req, resp


# ----------------------------------------------------------------------------- taken

@pytest.mark.parametrize("version", [3, 5, 7, 8, 9])
def test_produce_is_taken_and_identical(version: int) -> None:
    full, lane, taken = both_lines(*produce_pair(version))
    assert taken
    assert lane == full
    assert "orders[0,1] 2 batches 4 records" in lane and "acks=1" in lane


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_fetch_is_taken_and_identical(version: int) -> None:
    full, lane, taken = both_lines(*fetch_pair(version))
    assert taken
    assert lane == full
    assert "orders[3] offset 1200 wait 500 ms → 2 records" in lane


def test_error_codes_come_out_the_same() -> None:
    """Error codes of the response (the summary line's error column and the digest)."""
    for pair in (produce_pair(error=6), fetch_pair(error=1), fetch_pair(top_error=71)):
        full, lane, taken = both_lines(*pair)
        assert taken
        assert lane == full
    assert "NOT_LEADER" in both_lines(*produce_pair(error=6))[1]


def test_acks0_produce_without_response() -> None:
    req, _ = produce_pair(acks=0)
    full, lane, taken = both_lines(req, None, NO_RESPONSE_EXPECTED)
    assert taken
    assert lane == full
    assert lane.endswith("(no response expected)")


# ----------------------------------------------------------------------------- declined

def _flip(raw: bytes, at: int) -> bytes:
    b = bytearray(raw)
    b[at] ^= 0x55
    return bytes(b)


def test_crc_mismatch_is_declined_and_counted() -> None:
    req, resp = produce_pair()
    bad = _flip(req, len(req) - 3)           # inside the last batch's records: its CRC
    full, lane, taken = both_lines(bad, resp)
    assert not taken
    assert lane == full
    assert lane.endswith("[1 problem]")


def test_bytes_after_the_body_are_declined() -> None:
    req, resp = produce_pair()
    full, lane, taken = both_lines(req, resp + b"\x00\x01")
    assert not taken
    assert lane == full and "problem" in lane


def test_truncated_fetch_batch_is_declined() -> None:
    batch = record_batch([b"x" * 100, b"y" * 100])
    cut = batch + batch[:40]                   # brokers cut the last batch of a fetch
    full, lane, taken = both_lines(*fetch_pair(records=cut))
    assert not taken
    assert lane == full


def test_legacy_message_set_is_declined() -> None:
    value = b"hello"
    body = struct.pack(">bbi", 1, 0, -1) + struct.pack(">qi", 0, -1)  # magic 1, no key
    body = body[:2] + struct.pack(">q", 0) + struct.pack(">i", -1) + \
        struct.pack(">i", len(value)) + value
    import zlib
    msg = struct.pack(">I", zlib.crc32(body)) + body
    legacy = struct.pack(">qi", 0, len(msg)) + msg
    full, lane, taken = both_lines(*produce_pair(version=2, records=legacy))
    assert not taken
    assert lane == full


def test_plugin_digest_and_fields_turn_the_lane_off(monkeypatch: pytest.MonkeyPatch) -> None:
    pair = produce_pair()
    monkeypatch.setitem(digest_mod._REQUEST, 0, lambda b, v, f: "plugin says hi")
    full, lane, taken = both_lines(*pair)
    assert not taken and lane == full and "plugin says hi" in lane
    monkeypatch.undo()
    shown = extra_fields.ExtraField("t.x", lambda ex: "y", digest=True)
    monkeypatch.setitem(extra_fields._extra, "t.x", shown)
    full, lane, taken = both_lines(*pair)
    assert not taken and lane == full and lane.endswith("t.x=y")
    monkeypatch.setitem(extra_fields._extra, "t.x",
                        extra_fields.ExtraField("t.x", lambda ex: "y", digest=False))
    assert both_lines(*pair)[2]


def test_facts_of_the_lane() -> None:
    lazy = _pair(*produce_pair(error=6), True)
    facts = SummaryLane(embedded.AnnotateContext()).facts(lazy)
    assert isinstance(facts, SkimFacts)
    assert list(facts.response_side.errors) == [6] and facts.record_problems == 0
    # the exchange keeps its deferred bodies: nothing was decoded into it
    assert lazy.request.deferred is not None and lazy.request.body is None


# ----------------------------------------------------------------------------- mutations

def _real_frames() -> list[tuple[bytes, bytes | None]]:
    """(request, response) frames of every Produce and Fetch of the committed captures
    whose versions the engine defers."""
    frames = []
    for pcap in PCAPS:
        engine = Engine(EngineOptions(defer_bodies=True))
        with open_capture(str(pcap)) as source:
            for ex in engine.run(source):
                req, resp = ex.request, ex.response
                if ex.protocol == "kafka" and req is not None and req.deferred is not None \
                        and req.api_key in (0, 1):
                    frames.append((req.raw, resp.raw if resp is not None else None))
    return frames


def test_seeded_mutations_of_real_frames() -> None:
    frames = _real_frames()
    assert len(frames) > 50
    rng = random.Random(20261123)
    taken = declined = 0
    for _ in range(1500):
        req, resp = rng.choice(frames)
        target = rng.random()
        raw = req if target < 0.5 or resp is None else resp
        b = bytearray(raw)
        how = rng.randrange(4)
        if how == 0:
            for _ in range(rng.randint(1, 3)):
                b[rng.randrange(8, len(b))] = rng.randrange(256)
        elif how == 1:
            del b[rng.randrange(8, len(b)):]
        elif how == 2:
            at = rng.randrange(8, len(b))
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        # how == 3: unchanged
        if raw is req:
            req = bytes(b)
        else:
            resp = bytes(b)
        status = PAIRED if resp is not None else NO_RESPONSE_EXPECTED
        full, lane, was_taken = both_lines(req, resp, status)
        assert lane == full, (req.hex(), resp.hex() if resp else None)
        taken += was_taken
        declined += not was_taken
    assert taken > 300 and declined > 300


# ----------------------------------------------------------------------------- captures

def _cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("pcap", PCAPS, ids=lambda p: p.name)
def test_captures_identical_without_the_lane(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch,
                                             pcap: Path) -> None:
    lane = _cli(capsys, ["decode", "-j", "1", str(pcap)])
    monkeypatch.setattr(skim, "_skim_fields", None)     # (no lane)
    full = _cli(capsys, ["decode", "-j", "1", str(pcap)])
    assert lane == full


def test_real_traffic_goes_through_the_lane() -> None:
    """Most Produce/Fetch exchanges of real clients take the lane (the speed-up is real)."""
    for name in ("rdkafka-produce-codecs", "rdkafka-consumer-group", "aiokafka"):
        engine = Engine(EngineOptions(defer_bodies=True))
        selection = Selection()
        selection.lane = SummaryLane(engine.ctx.annotate_ctx, selection.names)
        with open_capture(str(ROOT / "pcaps" / f"{name}.pcap")) as source:
            for _ in selection(engine.run(source)):
                pass
        assert selection.lane.tried > 0
        assert selection.lane.taken >= 0.8 * selection.lane.tried, name


BENCH = ROOT / "benchmarks" / "data"


@pytest.mark.parametrize("name", ["chatty", "bulk", "mixed"])
def test_benchmark_captures_identical_without_the_lane(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       name: str) -> None:
    """The first 20,000 exchanges of a benchmark capture (built by benchmarks/captures.py;
    skipped where it is not)."""
    pcap = BENCH / f"{name}.pcap"
    if not pcap.exists():
        pytest.skip(f"{pcap} is not built (benchmarks/captures.py)")
    ports = {"chatty": ["39092", "39093", "39094"], "bulk": ["29092", "29093", "29094"],
             "mixed": ["49092", "49093", "49094"]}[name]
    argv = ["decode", "-j", "1", "-c", "20000", *[a for p in ports for a in ("-p", p)],
            str(pcap)]
    lane = _cli(capsys, argv)
    monkeypatch.setattr(skim, "_skim_fields", None)     # (no lane)
    full = _cli(capsys, argv)
    assert lane == full
    assert lane[1].count("\n") == 20000 or name == "bulk"
