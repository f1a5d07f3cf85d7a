"""Records decoded from the real captures in ``pcaps/`` against what the clients sent.

Every ``pcaps/*.json`` manifest lists the messages handed to producers (``produced``)
and received by consumers (``consumed``). The capture is decoded through the whole
pipeline (capture -> TCP -> conversations -> protocol -> records) and:

* every produced message that went on the wire (delivered, or refused by the broker)
  is found in a Produce request for its topic and partition, in the message format of
  the protocol version its client was forced to, with the same key, value and headers (and the codec the producer used, when
  the batch carrying it is compressed at all: clients send a batch uncompressed when
  compression does not pay off, but every codec of the scenario must appear);
* every consumed message is found in a Fetch response at its topic, partition and offset
  with the same key, value and headers;
* the transaction markers fetched are those of the transactions' outcomes;
* record sets decode without problems (one documented quirk of librdkafka's mock
  cluster excepted).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from kwsniff.kafka.records import Batch, Record
from record_sets import record_sets

PCAPS = Path(__file__).resolve().parents[2] / "pcaps"
MANIFESTS = sorted(p for p in PCAPS.glob("*.json") if (PCAPS / json.loads(p.read_text())
                                                        .get("capture_file", "-")).is_file())


def _matches(enc: dict[str, Any] | None, data: bytes | None) -> bool:
    """Compare a manifest byte encoding (utf8 / base64 / sha256 + length) with bytes."""
    if enc is None:
        return data is None
    if data is None or len(data) != enc["length"]:
        return False
    if "utf8" in enc:
        return data == enc["utf8"].encode("utf-8")
    if "base64" in enc:
        return data == base64.b64decode(enc["base64"])
    return hashlib.sha256(data).hexdigest() == enc["sha256"]


def _headers_match(expected: list[dict[str, Any]] | None, got: list[tuple[str, bytes | None]]) -> bool:
    expected = expected or []
    return len(expected) == len(got) and all(
        e["key"] == k and _matches(e["value"], v) for e, (k, v) in zip(expected, got))


def _mock_broker(manifest: dict[str, Any]) -> bool:
    return any("mock" in (b.get("software") or "") for b in manifest.get("brokers", []))


def _known_quirk(manifest: dict[str, Any], batch: Batch, problem: str) -> bool:
    """librdkafka's mock cluster writes transaction control batches with CRC 0 (real
    brokers compute it): kwsniff rightly reports it; the test accepts only that."""
    return batch.control and _mock_broker(manifest) and problem.startswith("CRC mismatch: stored 0x00000000")


def _decode_capture(manifest: dict[str, Any]) -> tuple[dict, dict, set[str], list[str]]:
    """(produced records by (topic, partition), fetched records by (topic, partition, offset),
    control record types fetched, problems) of the whole capture."""
    from kwsniff.capture import open_capture
    from kwsniff.engine import EngineOptions, iter_exchanges

    produced: dict[tuple[str, int], list[tuple[Batch, Record]]] = defaultdict(list)
    fetched: dict[tuple[str, int, int], list[Record]] = defaultdict(list)
    markers: set[str] = set()
    problems: list[str] = []
    ports = tuple(manifest.get("capture", {}).get("ports") or (9092,))
    with open_capture(PCAPS / manifest["capture_file"]) as src:
        for ex in iter_exchanges(src, EngineOptions(ports=ports)):
            for msg in (ex.request, ex.response):
                if msg is None or msg.body is None:
                    continue
                for rs in record_sets(msg.body):
                    where = f"exchange {ex.index} {msg.kind} {rs.topic}[{rs.partition}]"
                    rs.decode()
                    problems.extend(f"{where}: {p}" for p in rs.problems if not p.startswith("batch "))
                    for batch in rs.batches:
                        problems.extend(f"{where} offset {batch.base_offset}: {p}" for p in batch.problems
                                        if not _known_quirk(manifest, batch, p))
                        for rec in batch.records:
                            if msg.api_key == 0 and msg.kind == "request":
                                produced[(rs.topic, rs.partition)].append((batch, rec))
                            elif msg.api_key == 1 and msg.kind == "response":
                                if rec.control is not None:
                                    markers.add(rec.control["type"])
                                else:
                                    fetched[(rs.topic, rs.partition, rec.offset)].append(rec)
    return produced, fetched, markers, problems


def _on_the_wire(entry: dict[str, Any]) -> bool:
    """Whether a produced message was certainly sent while capturing: delivered, or
    refused by the broker (an error the broker answered). Local failures (librdkafka's "_..." errors, timeouts)
    may have happened before sending."""
    if entry.get("before_capture") or entry.get("in_flight_at_capture_start"):
        return False  # sent before tcpdump started, or cut by the start of the capture
    err = entry.get("error")
    return not err or not (err.startswith("_") or "Timeout" in err or "TIMED_OUT" in err)


def _expected_magics(manifest: dict[str, Any]) -> dict[str, int]:
    """Message format of clients forced to an old protocol version (Kafka's rule: magic 1
    from 0.10.0, magic 2 from 0.11.0)."""
    out = {}
    for c in manifest.get("clients", []):
        forced = c.get("forced_api_version")
        if c.get("role") == "producer" and forced:
            version = tuple(int(x) for x in str(forced).split("."))
            out[c["client_id"]] = 0 if version < (0, 10) else 1 if version < (0, 11) else 2
    return out


@pytest.mark.skipif(not MANIFESTS, reason="no captures in pcaps/ yet (tools/make_pcaps.py)")
@pytest.mark.parametrize("manifest_path", MANIFESTS, ids=[p.stem for p in MANIFESTS])
def test_capture_records_match_manifest(manifest_path: Path) -> None:
    manifest = json.loads(manifest_path.read_text())
    produced, fetched, markers, problems = _decode_capture(manifest)
    assert problems == []

    sent = [e for e in manifest.get("produced", []) if _on_the_wire(e)]
    magic_of = _expected_magics(manifest)
    codecs_expected: set[str] = set()
    codecs_seen: set[str] = set()
    for entry in sent:
        cands = [(b, r) for (t, p), recs in produced.items()
                 if t == entry["topic"] and (entry["partition"] is None or p == entry["partition"])
                 for b, r in recs]
        found = [(b, r) for b, r in cands if _matches(entry["key"], r.key)
                 and _matches(entry["value"], r.value) and _headers_match(entry["headers"], r.headers)]
        assert found, f"produced message not in any Produce request: {entry}"
        codecs_expected.add(entry["codec"])
        for b, _ in found:
            if b.codec_name != "none":
                assert b.codec_name == entry["codec"], entry
            codecs_seen.add(b.codec_name)
            want_magic = entry.get("magic", magic_of.get(entry["client_id"]))
            if want_magic is not None:
                assert b.magic == want_magic, entry
    if codecs_expected - {"none"}:
        assert codecs_expected - {"none"} <= codecs_seen, (codecs_expected, codecs_seen)

    for entry in manifest.get("consumed", []):
        if entry.get("before_capture"):
            continue
        # Fetch v13+ names topics by id: without a Metadata exchange in the capture
        # (e.g. one that starts mid-stream) the name is unknown, the record set untagged
        recs = (fetched.get((entry["topic"], entry["partition"], entry["offset"]), [])
                + fetched.get((None, entry["partition"], entry["offset"]), []))
        ok = [r for r in recs if _matches(entry["key"], r.key) and _matches(entry["value"], r.value)
              and _headers_match(entry["headers"], r.headers)]
        assert ok, f"consumed message not in any Fetch response: {entry}"

    outcomes = {t["outcome"].upper() for t in manifest.get("transactions", [])
                if t.get("outcome") in ("commit", "abort")}
    if outcomes and manifest.get("consumed"):
        # consumers of transactional topics fetch the COMMIT/ABORT markers too
        assert markers == outcomes
    else:
        assert markers <= {"COMMIT", "ABORT"}
