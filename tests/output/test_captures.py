"""Golden outputs and the export round trip on the sample captures in pcaps/.

Golden files live in tests/output/golden/. After an intended change of the output (or
after pcaps/ was regenerated) rewrite them with::

    KWSNIFF_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/output/test_captures.py

and review the diff.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import os
import re
from pathlib import Path

import jsonschema
import pytest

from kwsniff.output.jsonl import decode_bytes

from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[2]
PCAPS = ROOT / "pcaps"
GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = bool(os.environ.get("KWSNIFF_UPDATE_GOLDEN"))
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")

MANIFESTS = sorted(PCAPS.glob("*.json"))
CAPTURES = [m for m in MANIFESTS if m.with_suffix(".pcap").exists()]
# Detail trees: one capture per client family and feature set.
TREE_CAPTURES = ["kafka-python-0.8.2", "kafka-python-0.11", "rdkafka-consumer-group",
                 "rdkafka-idempotent-txn", "rdkafka-produce-codecs", "tansu-sasl"]

pytestmark = pytest.mark.skipif(not CAPTURES, reason="no sample captures in pcaps/")


def _ports(manifest: Path) -> list[str]:
    ports = json.loads(manifest.read_text())["capture"]["ports"]
    return [arg for p in ports for arg in ("-p", str(p))]


_run = run_cli


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"missing golden file {path}; create it with KWSNIFF_UPDATE_GOLDEN=1"
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        got, want = text.splitlines(), expected.splitlines()
        for i, (a, b) in enumerate(zip(got, want)):
            if a != b:
                pytest.fail(f"{name} line {i + 1} differs:\n  got:  {a}\n  want: {b}")
        pytest.fail(f"{name}: {len(got)} lines, golden has {len(want)}")


def _case(manifest: Path, view: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    pcap = manifest.with_suffix(".pcap")
    code, out, err = _run(capsys, ["decode", str(pcap.relative_to(ROOT)), *_ports(manifest),
                                   "--color", "never", *argv])
    assert code == 0, err
    assert "Traceback" not in err
    _golden(f"{manifest.stem}.{view}.txt", out + "# stderr\n" + err)


@pytest.fixture(autouse=True)
def _in_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize("manifest", CAPTURES, ids=lambda m: m.stem)
def test_summary_golden(manifest: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _case(manifest, "summary", [], capsys)


@pytest.mark.parametrize("name", TREE_CAPTURES)
def test_tree_golden(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = PCAPS / f"{name}.json"
    if manifest not in CAPTURES:
        pytest.skip(f"{name} not in pcaps/")
    _case(manifest, "tree", ["-V"], capsys)


def test_hex_and_offsets_golden(capsys: pytest.CaptureFixture[str]) -> None:
    manifest = PCAPS / "rdkafka-acks.json"
    if manifest not in CAPTURES:
        pytest.skip("rdkafka-acks not in pcaps/")
    _case(manifest, "hex", ["-x"], capsys)
    _case(manifest, "offsets", ["-V", "--offsets", "-x", "-Y", "api in {Produce Fetch}",
                                "-c", "3"], capsys)


@pytest.mark.parametrize("manifest", CAPTURES, ids=lambda m: m.stem)
def test_stats_golden(manifest: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pcap = manifest.with_suffix(".pcap")
    code, out, err = _run(capsys, ["stats", str(pcap.relative_to(ROOT)), *_ports(manifest),
                                   "--color", "never"])
    assert code == 0, err
    _golden(f"{manifest.stem}.stats.txt", out)


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads((ROOT / "kwsniff" / "output" / "export_schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("manifest", CAPTURES, ids=lambda m: m.stem)
def test_export_round_trip(manifest: Path, capsys: pytest.CaptureFixture[str],
                           validator: jsonschema.Draft202012Validator) -> None:
    """Every request the clients sent is in the export with the right API, version,
    topics and record counts; every line is valid; records match what was produced."""
    info = json.loads(manifest.read_text())
    pcap = manifest.with_suffix(".pcap")
    code, out, err = _run(capsys, ["export", str(pcap.relative_to(ROOT)), *_ports(manifest),
                                   "-o", "-", "--records"])
    assert code == 0, err
    objs = [json.loads(line) for line in out.splitlines()]
    for obj in objs:
        errors = list(validator.iter_errors(obj))
        assert not errors, (obj.get("kind"), obj.get("index"), errors[0].message[:300])
    exchanges = [o for o in objs if o["kind"] == "exchange"]
    records = [o for o in objs if o["kind"] == "record"]
    summary = objs[-1]
    assert summary["kind"] == "summary" and summary["exported_exchanges"] == len(exchanges)
    assert summary["exported_records"] == len(records)
    assert [e["index"] for e in exchanges] == list(range(1, len(exchanges) + 1))
    assert f"{len(exchanges)} exchanges ({len(exchanges)} exported)" in err

    # 1. every request sent (per the clients' own logs) is there: api, version, ids
    def key(client_id, api_key, version, corr, port):
        return client_id, api_key, version, corr, port
    have = collections.Counter(
        key(e["client_id"], e["api_key"], e["api_version"], e["correlation_id"],
            int(e["broker"].rsplit(":", 1)[1])) for e in exchanges if e["request_header"])
    want = collections.Counter(
        key(r["client_id"], r["api_key"], r["api_version"], r["correlation_id"], r["broker_port"])
        for r in info["requests"] if r["in_capture"])
    assert not want - have, f"requests missing from the export: {dict(want - have)}"
    names = {e["api_key"]: e["api_name"] for e in exchanges}
    for r in info["requests"]:
        if r["api_key"] in names:
            assert names[r["api_key"]] == r["api_name"]

    by_index = {e["index"]: e for e in exchanges}

    # 2. produced records: per client and topic, in the exchange counts and as records
    # Mid-stream captures: entries sent before the capture started, or in flight when it
    # started (their request is cut), are not (wholly) in the capture.
    in_capture = [p for p in info["produced"] if not p.get("before_capture")
                  and not p.get("in_flight_at_capture_start")]
    # ``sends``: sent again after a connection cut (insights-idempotent-retry)
    produced = collections.Counter()
    for p in in_capture:
        produced[(p["client_id"], p["topic"])] += p.get("sends", 1)
    counted: collections.Counter[tuple[str, str]] = collections.Counter()
    for e in exchanges:
        if e["api_name"] == "Produce" and e["request"] is not None:
            assert e["topics"], e["index"]
            for t in e["request"]["TopicData"]:
                for p in t["PartitionData"]:
                    counted[(e["client_id"], t["Name"])] += (p["Records"] or {}).get(
                        "record_count", 0)
    assert counted == produced
    sent = collections.Counter()
    for r in records:
        ex = by_index[r["exchange"]]
        if r["side"] == "request" and ex["api_name"] == "Produce":
            headers = tuple((h["key"], _digest(decode_bytes(h["value"]))) for h in r["headers"])
            sent[(ex["client_id"], r["topic"], r["partition"], _digest(decode_bytes(r["key"])),
                  _digest(decode_bytes(r["value"])), headers)] += 1
    expected = collections.Counter()
    for p in in_capture:
        expected[(p["client_id"], p["topic"], p["partition"], _manifest_digest(p["key"]),
                  _manifest_digest(p["value"]),
                  tuple((h["key"], _manifest_digest(h["value"]))
                        for h in p.get("headers") or ()))] += p.get("sends", 1)
    assert sent == expected

    # 3. consumed records were fetched (data records of Fetch responses)
    consumed = collections.Counter((c["client_id"], c["topic"]) for c in info["consumed"]
                                   if not c.get("before_capture"))
    fetched: collections.Counter[tuple[str, str]] = collections.Counter()
    for r in records:
        ex = by_index[r["exchange"]]
        if r["side"] == "response" and ex["api_name"] == "Fetch" and r["control"] is None:
            fetched[(ex["client_id"], r["topic"])] += 1
    # A topic id whose name the capture never shows (mid-stream) stays a UUID: it may
    # stand for any topic of that client.
    unnamed = collections.Counter()
    for (client, topic), n in fetched.items():
        if UUID_RE.match(topic or ""):
            unnamed[client] += n
    for (client, topic), n in consumed.items():
        assert fetched[(client, topic)] + unnamed[client] >= n, (client, topic, n)
    for e in exchanges:
        if e["api_name"] == "Fetch" and e["record_count"]:
            assert e["topics"], e["index"]


def _digest(data: bytes | None) -> tuple[int, str] | None:
    return None if data is None else (len(data), hashlib.sha256(data).hexdigest())


def _manifest_digest(desc: dict | None) -> tuple[int, str] | None:
    """The manifests describe bytes as {"length", "utf8"}, {"length", "base64"} or
    {"length", "sha256"}."""
    if desc is None:
        return None
    if "utf8" in desc:
        return _digest(desc["utf8"].encode("utf-8"))
    if "base64" in desc:
        return _digest(base64.b64decode(desc["base64"]))
    return desc["length"], desc["sha256"]
