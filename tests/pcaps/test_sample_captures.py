"""The sample captures in pcaps/ and their manifests are present and consistent.

These tests check the fixtures themselves (files, sizes, pcap structure, manifest
schema, manifest-internal consistency, the scenario contracts other tests rely on) and,
with tcpdump/tshark, that the capture agrees with what the clients logged.
"""

from __future__ import annotations

import collections
import json
import shutil
import subprocess
from typing import Any

import jsonschema
import pytest
from samplecaps import (EXPECTED, FIN, MAX_BYTES, PCAPS, RST, SYN, manifest, read_pcap,
                        tcp_segments)

from pcapgen.apinames import API_NAMES
from pcapgen.manifest import decode_bytes, load_schema


def test_every_expected_capture_and_manifest_exists() -> None:
    missing = [n for n in EXPECTED for ext in (".pcap", ".json")
               if not (PCAPS / f"{n}{ext}").is_file()]
    assert missing == []


def test_no_unexpected_files_in_pcaps() -> None:
    """Other tests glob pcaps/*.json: every JSON there must be a capture manifest."""
    names = {p.stem for p in PCAPS.glob("*.json")} | {p.stem for p in PCAPS.glob("*.pcap")}
    assert names == set(EXPECTED)       # (the TLS captures live in pcaps/tls/)


@pytest.mark.parametrize("name", EXPECTED)
def test_capture_is_small(name: str) -> None:
    assert (PCAPS / f"{name}.pcap").stat().st_size < MAX_BYTES


@pytest.mark.parametrize("name", EXPECTED)
def test_manifest_matches_schema(name: str) -> None:
    doc = manifest(name)
    jsonschema.validate(doc, load_schema())
    assert doc["scenario"] == name
    assert doc["capture_file"] == f"{name}.pcap"
    cap = doc["capture"]
    assert cap["packets_dropped_by_kernel"] == 0
    assert cap["packets_dropped_by_interface"] == 0
    assert cap["file_size"] == (PCAPS / f"{name}.pcap").stat().st_size


@pytest.mark.parametrize("name", EXPECTED)
def test_pcap_structure_matches_manifest(name: str) -> None:
    doc = manifest(name)
    pcap = read_pcap(PCAPS / f"{name}.pcap")
    assert pcap.linktype == 1  # EN10MB, as tcpdump writes Linux loopback
    assert pcap.trailing_bytes == 0
    assert len(pcap.frames) == doc["capture"]["packets_captured"]
    assert all(orig == len(data) for _ts, orig, data in pcap.frames), "snaplen truncation"
    stamps = [ts for ts, _o, _d in pcap.frames]
    assert stamps == sorted(stamps)
    assert doc["capture"]["started_at"] - 1 <= stamps[0]
    assert stamps[-1] <= doc["capture"]["stopped_at"] + 1
    ports = set(doc["capture"]["ports"])
    for seg in tcp_segments(pcap):
        assert seg.src_port in ports or seg.dst_port in ports
        assert len(seg.payload) <= doc["capture"]["mtu"] - 40


@pytest.mark.parametrize("name", EXPECTED)
def test_connections_open_and_close_inside_the_capture(name: str) -> None:
    doc = manifest(name)
    ports = set(doc["capture"]["ports"])
    flows: dict[tuple[int, int], list[int]] = collections.defaultdict(list)
    for seg in tcp_segments(read_pcap(PCAPS / f"{name}.pcap")):
        client = seg.src_port if seg.dst_port in ports else seg.dst_port
        broker = seg.dst_port if seg.dst_port in ports else seg.src_port
        flows[(client, broker)].append(seg.flags)
    assert flows
    for key, flags in flows.items():
        assert any(f & (FIN | RST) for f in flags), f"{name}: {key} never closed"
        if doc["capture"]["starts_mid_stream"]:
            continue
        assert flags[0] & SYN, f"{name}: {key} does not start with a SYN"
    if doc["capture"]["starts_mid_stream"]:
        assert not any(flags[0] & SYN for flags in flows.values())


def _bytes_key(enc: dict[str, Any] | None) -> Any:
    return None if enc is None else json.dumps(enc, sort_keys=True)


@pytest.mark.parametrize("name", EXPECTED)
def test_manifest_is_internally_consistent(name: str) -> None:
    doc = manifest(name)
    broker_ports = {b["port"] for b in doc["brokers"]}
    assert broker_ports <= set(doc["capture"]["ports"])
    clients = {c["client_id"] for c in doc["clients"]}
    topics = {t["name"] for t in doc["topics"]}
    for r in doc["requests"]:
        assert API_NAMES[r["api_key"]] == r["api_name"]
        assert r["broker_port"] in broker_ports
        assert r["client_id"] in clients, r
    assert any(r["in_capture"] for r in doc["requests"])
    if not doc["capture"]["starts_mid_stream"]:
        assert all(r["in_capture"] for r in doc["requests"])
    produced = doc["produced"] + doc["setup"]["produced"]
    for p in produced:
        assert p["client_id"] in clients and p["topic"] in topics
        for enc in (p["key"], p["value"]):
            if enc and "utf8" in enc:
                assert len(decode_bytes(enc) or b"") == enc["length"]
    # every consumed message is one a producer here really sent, at its acked offset
    by_offset = {(p["topic"], p["partition"], p["offset"]): p for p in produced
                 if p["offset"] is not None and not p["error"]}
    by_content = collections.defaultdict(list)
    for p in produced:
        by_content[(p["topic"], _bytes_key(p["key"]), _bytes_key(p["value"]))].append(p)
    for c in doc["consumed"]:
        assert c["client_id"] in clients
        p = by_offset.get((c["topic"], c["partition"], c["offset"]))
        if p is None:
            cands = by_content[(c["topic"], _bytes_key(c["key"]), _bytes_key(c["value"]))]
            assert cands, c
            acked = {x["offset"] for x in cands}
            if acked != {None}:
                # a retried batch the broker wrote twice (insights-idempotent-retry):
                # the copy at the acknowledged offset was read back as well
                read = {(d["partition"], d["offset"]) for d in doc["consumed"]
                        if (d["topic"], d["key"], d["value"]) ==
                        (c["topic"], c["key"], c["value"])}
                assert {(x["partition"], x["offset"]) for x in cands} < read, c
            # else acks=0: the producer never learnt the offset
            p = cands[0]
        assert (p["key"], p["value"], p["headers"]) == (c["key"], c["value"], c["headers"])


def _apis(doc: dict[str, Any], in_capture: bool = True) -> set[str]:
    return {r["api_name"] for r in doc["requests"] if r["in_capture"] or not in_capture}


def test_consumer_group_sample_covers_the_group_lifecycle() -> None:
    doc = manifest("rdkafka-consumer-group")
    assert {"FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit",
            "OffsetFetch", "LeaveGroup", "Fetch", "Produce"} <= _apis(doc)
    produced = doc["produced"]
    assert any(p["key"] is None for p in produced)
    assert any(p["value"] is None for p in produced)
    assert any(p["headers"] for p in produced)
    assert any(h["value"] is None for p in produced for h in p["headers"])
    assert max(p["value"]["length"] for p in produced if p["value"]) > 64 * 1024
    assert len(doc["consumed"]) == len(produced)
    assert len(doc["brokers"]) == 3


def test_codec_sample_uses_every_codec() -> None:
    doc = manifest("rdkafka-produce-codecs")
    assert {p["codec"] for p in doc["produced"]} == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert len(doc["consumed"]) == len(doc["produced"])


def test_acks_sample_uses_acks_0_1_all() -> None:
    doc = manifest("rdkafka-acks")
    assert {p["acks"] for p in doc["produced"]} == {0, 1, -1}
    assert all(p["offset"] is None for p in doc["produced"] if p["acks"] == 0)
    assert all(p["offset"] is not None for p in doc["produced"] if p["acks"] != 0)


def test_txn_sample_commits_and_aborts() -> None:
    doc = manifest("rdkafka-idempotent-txn")
    assert {"InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit",
            "EndTxn"} <= _apis(doc)
    assert {t["outcome"] for t in doc["transactions"]} == {"commit", "abort"}
    readers = {c["client_id"] for c in doc["consumed"]}
    assert {"rc-reader", "ru-reader"} <= readers


@pytest.mark.parametrize("label,produce_version", [("0.8.2", 0), ("0.9", 1), ("0.10", 2),
                                                   ("0.11", 3)])
def test_kafka_python_samples_use_the_forced_versions(label: str, produce_version: int) -> None:
    doc = manifest(f"kafka-python-{label}")
    assert {c["forced_api_version"] for c in doc["clients"]} == {label}
    produce = {r["api_version"] for r in doc["requests"] if r["api_name"] == "Produce"}
    assert produce == {produce_version}
    assert {p["codec"] for p in doc["produced"]} == {"none", "gzip", "snappy", "lz4"}
    assert doc["consumed"]
    for p in doc["produced"]:
        if label == "0.11" or p["codec"] == "none":
            assert p["error"] is None and p["offset"] is not None
        else:  # the mock only stores uncompressed magic 0/1 (see the manifest's notes)
            assert p["error"] == "UnsupportedVersionError"


def test_aiokafka_sample() -> None:
    doc = manifest("aiokafka")
    assert {c["library"] for c in doc["clients"]} == {"aiokafka"}
    assert len(doc["consumed"]) == len(doc["produced"]) > 0


def test_tansu_sample_runs_admin_apis_against_tansu() -> None:
    doc = manifest("tansu-admin")
    assert {b["software"] for b in doc["brokers"]} == {"Tansu"}
    sent = {op["api"] for op in doc["admin_operations"] if op["sent"]}
    assert {"CreateTopics", "DescribeConfigs", "IncrementalAlterConfigs", "ListGroups",
            "DeleteGroups", "DeleteTopics", "DeleteRecords"} <= sent
    assert sent <= _apis(doc)
    assert doc["consumed"]


def test_tansu_sasl_sample_is_refused_with_every_mechanism() -> None:
    doc = manifest("tansu-sasl")
    assert {b["software"] for b in doc["brokers"]} == {"Tansu"}
    auth = {a["client_id"]: a for a in doc["authentications"]}
    assert {a["mechanism"] for a in auth.values()} == {"SCRAM-SHA-512", "SCRAM-SHA-256",
                                                        "PLAIN"}
    assert {c["client_id"] for c in doc["clients"]} == set(auth)
    assert {c["library"] for c in doc["clients"]} == {"confluent-kafka", "kafka-python"}
    assert "unknown-user" in auth["rdk-scram512"]["outcome"]
    assert any("bare" in a["handshake"] for a in auth.values())
    assert {"SaslHandshake", "SaslAuthenticate"} <= _apis(doc)
    assert {r["api_version"] for r in doc["requests"]
            if r["api_name"] == "SaslHandshake"} == {0, 1}
    assert not doc["produced"] and not doc["consumed"]


def test_midstream_sample_starts_inside_a_message() -> None:
    doc = manifest("midstream")
    cap = doc["capture"]
    assert cap["starts_mid_stream"] is True
    inflight = cap["in_flight_at_start"]
    assert inflight["size"] > 64 * 1024
    partial = [r for r in doc["requests"] if r.get("partially_in_capture")]
    assert [(r["correlation_id"], r["client_id"]) for r in partial] == \
        [(inflight["correlation_id"], inflight["client_id"])]
    assert any(not r["in_capture"] for r in doc["requests"])


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (tools/setup.sh installs it)")
    return path


@pytest.mark.parametrize("name", EXPECTED)
def test_tcpdump_reads_every_packet(name: str) -> None:
    tcpdump = _tool("tcpdump")
    out = subprocess.run([tcpdump, "-n", "-q", "-r", str(PCAPS / f"{name}.pcap")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == manifest(name)["capture"]["packets_captured"]


def _tshark_requests(name: str, ports: list[int]) -> collections.Counter[tuple]:
    """(broker port, api key, version, correlation id, client id) of every request."""
    cmd = [_tool("tshark"), "-n", "-r", str(PCAPS / f"{name}.pcap")]
    for p in ports:
        cmd += ["-d", f"tcp.port=={p},kafka"]
    cmd += ["-Y", "kafka && tcp.dstport in {%s}" % ",".join(map(str, ports)),
            "-T", "fields", "-e", "tcp.dstport", "-e", "kafka.request_key",
            "-e", "kafka.api_version", "-e", "kafka.correlation_id", "-e", "kafka.client_id"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    seen: collections.Counter[tuple] = collections.Counter()
    for line in out.stdout.splitlines():
        port, keys, vers, corrs, cids = (f.split(",") for f in line.split("\t"))
        for i, key in enumerate(keys):
            if key:
                seen[(int(port[0]), int(key), int(vers[i]), int(corrs[i]),
                      cids[i] if i < len(cids) else "")] += 1
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPECTED)
def test_tshark_finds_exactly_the_logged_requests(name: str) -> None:
    """tshark, an independent decoder, sees the requests the clients logged sending."""
    doc = manifest(name)
    seen = _tshark_requests(name, doc["capture"]["ports"])

    def key(r: dict[str, Any]) -> tuple:
        return (r["broker_port"], r["api_key"], r["api_version"], r["correlation_id"],
                r["client_id"])

    want = collections.Counter(key(r) for r in doc["requests"] if r["in_capture"])
    bare = [a for a in doc.get("authentications", ()) if "bare" in a["handshake"]]
    if bare:
        # SASL tokens sent bare after a v0 SaslHandshake are no Kafka requests; tshark
        # reads their first bytes as an API key none has (kwsniff decodes them as SASL).
        misread = {k for k in seen if k[1] not in API_NAMES}
        assert sum(seen[k] for k in misread) == 2 * len(bare)   # client-first, -final
        seen = collections.Counter({k: v for k, v in seen.items() if k not in misread})
    if not doc["capture"]["starts_mid_stream"]:
        assert seen == want
        return
    # Mid-stream: tshark cannot find frame boundaries again on the connection whose
    # capture begins inside a message, so leave that client out. Requests logged before
    # the capture started (in_capture false) may still have been queued on the
    # rate-limited loopback when it started: they may or may not be in the file.
    blind = doc["capture"]["in_flight_at_start"]["client_id"]
    seen = collections.Counter({k: v for k, v in seen.items() if k[4] != blind})
    want = collections.Counter({k: v for k, v in want.items() if k[4] != blind})
    anywhere = collections.Counter(key(r) for r in doc["requests"] if r["client_id"] != blind)
    assert want - seen == collections.Counter()
    assert seen - anywhere == collections.Counter()


def test_readme_table_matches_the_manifests() -> None:
    from pcapgen import readme_table

    text = (PCAPS / "README.md").read_text()
    table = text.split(readme_table.START, 1)[1].split(readme_table.END, 1)[0].strip()
    assert table == readme_table.render(PCAPS, EXPECTED), \
        "pcaps/README.md table is stale: run tools/make_pcaps.py (or pcapgen.readme_table)"
    for name in EXPECTED:
        assert f"**{name}**" in text, f"pcaps/README.md has no paragraph for {name}"
