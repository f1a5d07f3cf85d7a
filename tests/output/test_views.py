"""Summary lines, the detail tree (with byte ranges) and hex dumps."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.consumer.group import JoinGroupRequest, JoinGroupResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from builders import T0, build, exchange, record_batch, request, response
from kwsniff.kafka.model import KafkaMessage
from kwsniff.output.color import Palette, palette_for
from kwsniff.output.hexdump import frame_bytes, hexdump, hexdump_lines
from kwsniff.output.jsonl import ExportEncoder
from kwsniff.output.summary import SummaryFormatter, format_latency, format_time
from kwsniff.output.tree import build_tree, find_node, render_tree


@pytest.fixture(scope="module")
def produce():
    parts = [{"Index": i, "Records": record_batch([b'{"n":%d}' % j for j in range(3)],
                                                   keys=[b"k%d" % j for j in range(3)],
                                                   codec=1 if i == 1 else 0,
                                                   headers=[("trace", b"\x00\x01")])}
             for i in range(2)]
    req = request(build(ProduceRequest, 9, {
        "TransactionalId": None, "Acks": -1, "TimeoutMs": 30000,
        "TopicData": [{"Name": "orders", "PartitionData": parts}]}), correlation_id=7)
    resp = response(build(ProduceResponse, 9, {
        "Responses": [{"Name": "orders", "PartitionResponses": [
            {"Index": i, "ErrorCode": 6 if i else 0, "BaseOffset": 10} for i in range(2)]}],
        "ThrottleTimeMs": 0}), req)
    return exchange(req, resp, index=3)


def test_hexdump_layout():
    data = bytes(range(0x41, 0x41 + 20))
    lines = list(hexdump_lines(data))
    assert lines[0] == ("0000  41 42 43 44 45 46 47 48  49 4a 4b 4c 4d 4e 4f 50   "
                        "ABCDEFGHIJKLMNOP")
    assert lines[1] == "0010  51 52 53 54" + " " * 37 + "   QRST"
    assert lines[0].index("ABC") == lines[1].index("QRST")
    assert list(hexdump_lines(b"\x00\xff", base=0x100)) == [
        "0100  00 ff" + " " * 43 + "   .."]
    assert hexdump(bytes(40), limit=16).splitlines()[-1] == "... 24 more bytes not shown"
    hl = list(hexdump_lines(b"abc", highlight=(1, 2), palette=Palette(True)))[0]
    assert "\x1b[7m62\x1b[0m" in hl and "\x1b[7mb\x1b[0m" in hl


def test_frame_bytes_prefix():
    assert frame_bytes(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame_bytes(b"abc", size=4 + 10) == b"\x00\x00\x00\x0aabc"


def test_summary_line(produce):
    line = SummaryFormatter().format(produce)
    # the error name once: the digest names it, so there is no error column
    assert line == ("    3   0.000000 10.0.0.1:50000 → 10.0.0.2:9092 test-client Produce v9 #7 "
                    "3.20 ms orders[0,1] 2 batches 6 records "
                    f"{_size(produce)} acks=-1 → 1 ok, 1 NOT_LEADER_OR_FOLLOWER")
    colored = SummaryFormatter(Palette(True)).format(produce)
    assert colored.count("NOT_LEADER_OR_FOLLOWER") == 1
    assert "1 ok, 1 \x1b[1;31mNOT_LEADER_OR_FOLLOWER\x1b[0m" in colored


def _size(ex):
    from kwsniff.output.digest import human_bytes
    total = sum(len(p["Records"]) for p in ex.request.body["TopicData"][0]["PartitionData"])
    return human_bytes(total)


def test_time_and_latency_formats():
    assert format_time(T0 + 1.5, "r", T0) == "1.500000"
    assert format_time(T0, "e", 0) == "1700000000.000000"
    assert format_time(T0 + 0.25, "ud", 0) == "2023-11-14 22:13:20.250000"
    assert format_latency(None) == "-"
    assert format_latency(3.2) == "3.20 ms"
    assert format_latency(45.67) == "45.67 ms"      # one unit style whatever the size
    assert format_latency(2500) == "2500.00 ms"


def test_palette_auto_only_on_tty(monkeypatch):
    class Stream:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert palette_for(Stream(True)).enabled
    assert not palette_for(Stream(False)).enabled
    assert palette_for(Stream(False), "always").enabled
    assert not palette_for(Stream(True), "never").enabled
    monkeypatch.setenv("NO_COLOR", "1")
    assert not palette_for(Stream(True)).enabled


def test_tree_fields_and_values(produce):
    root = build_tree(produce)
    text = "\n".join(render_tree(root))
    assert text.splitlines()[0].startswith("Exchange 3: Produce v9, paired, stream 0")
    for fragment in ("RequestApiKey: 0 (Produce)", "ClientId: \"test-client\"",
                     "Acks: -1", "TopicData: 1 item", "TopicData[0]: \"orders\"",
                     "Records: 1 batch, 3 records, magic 2", "Batch 0: offsets 0-2, 3 records",
                     "CRC: 0x", "(ok)", 'Key: "k0" (2 bytes)', 'Value: {"n":0} (7 bytes)',
                     '"trace": hex 0001 (2 bytes)',
                     "ErrorCode: 6 (NOT_LEADER_OR_FOLLOWER)", "Compressed: "):
        assert fragment in text, fragment
    err = next(n for _, n in root.walk() if n.label == "ErrorCode" and n.style == "error")
    assert err.about.startswith("NOT_LEADER_OR_FOLLOWER: ")
    acks = next(n for _, n in root.walk() if n.label == "Acks")
    assert acks.about and "acknowledgments" in acks.about


def test_tree_byte_ranges_match_hex(produce):
    root = build_tree(produce, spans=True)
    req_bytes = frame_bytes(produce.request.raw, produce.request.size)
    resp_bytes = frame_bytes(produce.response.raw, produce.response.size)
    acks = find_node(root, ("body", "Acks"), "request")
    assert req_bytes[acks.start:acks.end] == struct.pack(">h", -1)
    client = find_node(root, ("header", "ClientId"), "request")
    assert req_bytes[client.start:client.end] == b"\x00\x0btest-client"
    name = find_node(root, ("body", "TopicData", 0, "Name"), "request")
    assert req_bytes[name.start:name.end] == b"\x07orders"   # compact string
    err = find_node(root, ("body", "Responses", 0, "PartitionResponses", 1, "ErrorCode"),
                    "response")
    assert resp_bytes[err.start:err.end] == b"\x00\x06"
    # Batches and uncompressed records point at their own bytes.
    batch = next(n for _, n in root.walk() if n.label == "Batch 0" and n.start is not None)
    assert req_bytes[batch.start:batch.start + 8] == struct.pack(">q", 0)
    records = produce.request.body["TopicData"][0]["PartitionData"][0]["Records"]
    assert req_bytes[batch.start:batch.end] == records.data
    rec = next(n for _, n in root.walk() if n.label == "Record 1" and n.start is not None)
    first = records.batches[0].records[1]
    assert req_bytes[rec.start:rec.end] == records.data[first.start:first.start + first.size]
    # Every located node lies inside its frame.
    for _, node in root.walk():
        if node.start is not None:
            size = produce.request.size if node.message == "request" else produce.response.size
            assert 0 <= node.start <= node.end <= size, node.label
    lines = list(render_tree(root, offsets=True))
    assert any(line.strip().startswith("Acks: -1  [request ") for line in lines)


def test_tree_embedded_consumer_protocol():
    subscription = struct.pack(">hi", 1, 1) + struct.pack(">h", 6) + b"orders" + \
        struct.pack(">i", -1) + struct.pack(">i", 0)
    req = request(build(JoinGroupRequest, 5, {
        "GroupId": "billing", "SessionTimeoutMs": 10000, "RebalanceTimeoutMs": 30000,
        "MemberId": "", "ProtocolType": "consumer",
        "Protocols": [{"Name": "range", "Metadata": subscription}]}))
    resp = response(build(JoinGroupResponse, 5, {
        "ThrottleTimeMs": 0, "ErrorCode": 79, "GenerationId": -1, "MemberId": "m-1",
        "Leader": "", "Members": []}), req)
    text = "\n".join(render_tree(build_tree(exchange(req, resp))))
    assert "ConsumerProtocolSubscription v1" in text
    assert 'Topics: ["orders"]' in text
    assert "ErrorCode: 79 (MEMBER_ID_REQUIRED)" in text


def test_tree_undecodable_message_never_raises():
    msg = KafkaMessage(kind="request", raw=b"\x00\x00\x00\x63\x00\x00\x00\x01\xff",
                       api_key=0, api_version=99, correlation_id=1,
                       problems=["unknown version 99"], body_offset=8)
    ex = exchange(msg, None)
    text = "\n".join(render_tree(build_tree(ex, spans=True)))
    assert "Produce request v99: not decoded" in text
    assert "Raw: 1 bytes: ff" in text
    assert "Problem: unknown version 99" in text


def test_legacy_07_and_raw_sasl_exchanges():
    import zlib

    from kwsniff.kafka import legacy07
    from kwsniff.kafka.model import Exchange

    payload = b"hello 0.7"
    message = struct.pack(">iB", 5 + len(payload), 0) + struct.pack(">I", zlib.crc32(payload)) \
        + payload
    raw = struct.pack(">hh", 0, 6) + b"orders" + struct.pack(">ii", 2, len(message)) + message
    req = legacy07.decode_request(raw)
    old = Exchange(index=1, stream=0, client=("10.0.0.1", 1), broker=("10.0.0.2", 9092),
                   status="no_response_expected", request=req, protocol=legacy07.PROTOCOL)
    line = SummaryFormatter().format(old)
    assert " PRODUCE #- - orders[2] 1 record 18 B (no response expected)" in line
    text = "\n".join(render_tree(build_tree(old)))
    assert "PRODUCE request" in text and 'Value: "hello 0.7" (9 bytes)' in text
    assert "CRC: 0x" in text and "(ok)" in text

    # (the body a raw token gets: kwsniff.kafka.decoding.decode_sasl_token)
    token = KafkaMessage(kind="request", raw=b"\x00alice\x00****", header={"SaslMechanism": "PLAIN"},
                         body={"schema": "SASL PLAIN", "version": None,
                               "data": {"mechanism": "PLAIN", "message": "initial-response",
                                        "username": "alice", "password": "<redacted>",
                                        "secret_spans": [[7, 11]], "redacted": True}})
    sasl = Exchange(index=2, stream=0, client=("10.0.0.1", 1), broker=("10.0.0.2", 9092),
                    status="unanswered", request=token, protocol="kafka-sasl")
    assert SummaryFormatter().format(sasl).endswith(
        " SASL (raw token) - PLAIN initial-response user alice → no response")
    text = "\n".join(render_tree(build_tree(sasl)))
    assert 'Mechanism: "PLAIN"' in text and "SASL token from the client" in text
    assert 'password: "<redacted>"' in text and "secret_spans" not in text
    assert "Request header" not in text
    assert ExportEncoder("t").exchange_object(sasl)["api_name"] == "SASL"


def test_plain_render_matches_the_general_walk_and_survives_deep_trees() -> None:
    from kwsniff.output import tree as tree_mod
    from kwsniff.output.tree import TreeNode, render_tree

    root = TreeNode("Exchange 1", "x")
    a = root.add(TreeNode("A", ""))
    a.add(TreeNode("ctl\x1b", "bell\x07"))
    a.add(TreeNode("B", "2")).add(TreeNode("C", ""))
    root.add(TreeNode("D", "tab\there"))
    plain = list(render_tree(root))
    assert plain == ["Exchange 1: x", "    A", "        ctl\\x1b: bell\\x07", "        B: 2",
                     "            C", "    D: tab\\there"]

    def too_deep(*_args: object) -> list[str]:
        raise RecursionError

    with pytest.MonkeyPatch.context() as mp:      # the general walk gives the same lines
        mp.setattr(tree_mod, "_plain_lines", too_deep)
        assert list(render_tree(root)) == plain
    # deeper than the recursion limit: falls back to the explicit stack, same text
    deep = TreeNode("L0", "")
    node = deep
    for i in range(1, 5000):
        node = node.add(TreeNode(f"L{i}", str(i)))
    lines = list(render_tree(deep))
    assert len(lines) == 5000
    assert lines[4999] == "    " * 4999 + "L4999: 4999"
