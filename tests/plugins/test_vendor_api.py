"""Vendor API extensions: the protocol decoder's extension point and the plugin hook,
from unit decoding to a capture decoded by ``kwsniff decode`` with ``--plugins``."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from kwsniff.cli import main
from kwsniff.kafka.model import PAIRED, Exchange
from kwsniff.kafka.protocol import api_name, decode_request, decode_response, field_spans
from kwsniff.kafka.protocol.extensions import (
    ExtensionError,
    register_vendor_api,
    unregister_vendor_api,
    vendor_apis,
)
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.filter import compile_filter
from kwsniff.output.jsonl import ExportEncoder
from kwsniff.output.names import api_label
from kwsniff.output.tree import build_tree, render_tree

ECHO_KEY = 1000
# Apache Kafka's JSON message-definition format, as a vendor would write it
ECHO_REQUEST = {
    "apiKey": ECHO_KEY, "type": "request", "name": "AcmeEchoRequest",
    "validVersions": "0-1", "flexibleVersions": "1+",
    "fields": [
        {"name": "Message", "type": "string", "versions": "0+", "about": "Text to echo."},
        {"name": "Repeat", "type": "int16", "versions": "0+"},
        {"name": "Targets", "type": "[]Target", "versions": "0+", "fields": [
            {"name": "NodeId", "type": "int32", "versions": "0+"},
            {"name": "Rack", "type": "string", "versions": "1+", "nullableVersions": "1+"}]},
        {"name": "Trace", "type": "string", "versions": "1+", "taggedVersions": "1+",
         "tag": 0, "nullableVersions": "1+", "default": "null"},
    ],
}
ECHO_RESPONSE = {
    "apiKey": ECHO_KEY, "type": "response", "name": "AcmeEchoResponse",
    "validVersions": "0-1", "flexibleVersions": "1+",
    "fields": [
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "Echoes", "type": "[]string", "versions": "0+"},
    ],
}


def s16(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def cstr(text: str | None) -> bytes:
    return b"\x00" if text is None else bytes([len(text) + 1]) + text.encode()


def echo_request_v0(corr: int = 7) -> bytes:
    header = struct.pack(">hhi", ECHO_KEY, 0, corr) + s16("acme-client")
    body = s16("hello") + struct.pack(">h", 3) + struct.pack(">i", 2) + \
        struct.pack(">i", 1) + struct.pack(">i", 2)
    return header + body


def echo_request_v1(corr: int = 8) -> bytes:
    # request header v2: client id (int16 string) + tagged fields
    header = struct.pack(">hhi", ECHO_KEY, 1, corr) + s16("acme-client") + b"\x00"
    trace = cstr("t-1")
    body = cstr("hi") + struct.pack(">h", 1) + bytes([2]) + struct.pack(">i", 5) + cstr(None) + \
        b"\x00" + b"\x01" + b"\x00" + bytes([len(trace)]) + trace
    return header + body


def echo_response_v0(corr: int = 7) -> bytes:
    return struct.pack(">i", corr) + struct.pack(">h", 0) + struct.pack(">i", 3) + \
        s16("hello") * 3


@pytest.fixture
def echo_api():
    handle = register_vendor_api(ECHO_KEY, "AcmeEcho", request=ECHO_REQUEST,
                                 response=ECHO_RESPONSE, owner="test")
    api_label.cache_clear()
    yield handle
    unregister_vendor_api(handle)
    api_label.cache_clear()


def test_json_definition_decodes_with_spans(echo_api) -> None:
    msg = decode_request(echo_request_v0())
    assert msg.problems == []
    assert msg.body == {"Message": "hello", "Repeat": 3,
                        "Targets": [{"NodeId": 1}, {"NodeId": 2}]}
    assert msg.header_version == 1 and msg.client_id == "acme-client"
    spans = {s.path: (s.offset, s.length) for s in field_spans(msg) if s.section == "body"}
    assert spans[("Message",)] == (msg.body_offset, 7)
    assert spans[("Targets", 1, "NodeId")][1] == 4
    flex = decode_request(echo_request_v1())
    assert flex.problems == [] and flex.header_version == 2
    assert flex.body == {"Message": "hi", "Repeat": 1,
                         "Targets": [{"NodeId": 5, "Rack": None}], "Trace": "t-1"}
    resp = decode_response(echo_response_v0(), ECHO_KEY, 0)
    assert resp.problems == [] and resp.body == {"ErrorCode": 0, "Echoes": ["hello"] * 3}
    assert api_name(ECHO_KEY) == "AcmeEcho"


def test_unknown_versions_and_unregistering(echo_api) -> None:
    raw = bytearray(echo_request_v0())
    raw[2:4] = struct.pack(">h", 5)
    msg = decode_request(bytes(raw))
    assert msg.body is None and msg.problems == [
        f"unknown API key {ECHO_KEY}: body of {len(raw) - msg.body_offset} bytes not decoded"]
    unregister_vendor_api(echo_api)
    msg = decode_request(echo_request_v0())
    assert msg.body is None and api_name(ECHO_KEY) == f"Unknown({ECHO_KEY})"
    assert vendor_apis() == []


def test_builtin_apis_are_never_overridden() -> None:
    handle = register_vendor_api(18, "NotApiVersions", request=lambda raw, pos, v: {"x": 1},
                                 versions="0+")
    try:
        raw = struct.pack(">hhi", 18, 2, 1) + s16("c")
        assert decode_request(raw).body == {}          # ApiVersions v2: Kafka's decoder
        future = struct.pack(">hhi", 18, 99, 1) + s16("c") + b"\x00"
        assert decode_request(future).body == {"x": 1}  # a version Kafka lacks: the vendor's
    finally:
        unregister_vendor_api(handle)


def _deep(levels: int) -> dict:
    body: dict = {"X": 1}
    for _ in range(levels - 1):
        body = {"Inner": body}
    return body


@pytest.mark.parametrize("levels, kept", [(64, True), (65, False), (20_000, False)])
def test_a_vendor_body_nested_too_deeply_is_not_decoded(levels: int, kept: bool) -> None:
    handle = register_vendor_api(2001, "Deep", request=lambda raw, pos, v: _deep(levels))
    try:
        msg = decode_request(struct.pack(">hhi", 2001, 0, 1) + s16("c"))
        if kept:
            assert msg.body == _deep(levels) and msg.problems == []
        else:
            assert msg.body is None and msg.problems == [
                "vendor API Deep (extension) request v0 decoder returned a body nested more "
                "than 64 levels deep: body not decoded"]
    finally:
        unregister_vendor_api(handle)


def test_bad_registrations() -> None:
    with pytest.raises(ExtensionError, match="API key"):
        register_vendor_api(-1, "X", request=lambda r, p, v: {})
    with pytest.raises(ExtensionError, match="give a request or a response"):
        register_vendor_api(2000, "X")
    with pytest.raises(ExtensionError, match="unknown type"):
        register_vendor_api(2000, "X", request={"fields": [{"name": "A", "type": "Nope",
                                                            "versions": "0+"}]})
    with pytest.raises(ExtensionError, match="bad version range"):
        register_vendor_api(2000, "X", request=lambda r, p, v: {}, versions="zero")
    assert vendor_apis() == []


# ----------------------------------------------------------------------------- via plugins

VENDOR_PLUGIN = """
def register(api):
    def request(reader, version):
        if version == 3:
            raise RuntimeError("v3 is not supported by this plugin")
        if version == 4:
            return ["not", "a", "dict"]
        if version == 2:
            deep = {}
            for _ in range(70):
                deep = {"In": deep}
            return deep
        body = {"Message": reader.string(), "Repeat": reader.int16()}
        body["Targets"] = reader.array(lambda r: {"NodeId": r.int32()})
        return body

    api.vendor_api(1000, "AcmeEcho", request=request,
                   response={"fields": [{"name": "ErrorCode", "type": "int16",
                                         "versions": "0+"},
                                        {"name": "Echoes", "type": "[]string",
                                         "versions": "0+"}]},
                   versions="0-4")
    api.digest(1000, request=lambda body, v, facts: f"echo {body['Message']!r}")
"""


def test_vendor_plugin_callable_reader_and_failures(manager, plugin_dir, reports) -> None:
    d = plugin_dir("acme", VENDOR_PLUGIN)
    [plugin] = manager.load([d], shipped=False, entry_points=False)
    assert plugin.status == "active"
    msg = decode_request(echo_request_v0())
    assert msg.body == {"Message": "hello", "Repeat": 3,
                        "Targets": [{"NodeId": 1}, {"NodeId": 2}]}
    assert msg.problems == []
    longer = decode_request(echo_request_v0() + b"\x01\x02")
    assert longer.problems == ["2 bytes left over after the body"]
    cut = decode_request(echo_request_v0()[:-3])
    assert cut.body is None and "decoder failed: TruncatedError" in cut.problems[0]
    for version, text in ((3, "RuntimeError: v3 is not supported"), (4, "returned list"),
                          (2, "BadResult: returned a body nested more than 64 levels deep")):
        raw = bytearray(echo_request_v0())
        raw[2:4] = struct.pack(">h", version)
        bad = decode_request(bytes(raw))
        assert bad.body is None and text in bad.problems[0], bad.problems
        assert bad.problems[0].startswith(f"vendor API AcmeEcho (plugin acme) request v{version}")
    [line] = reports    # one hook: its first failure is shown, the others counted
    assert line.startswith("plugin acme: AcmeEcho request decoder failed (v0): "
                           "TruncatedError: needs 4 bytes at offset 38, 1 left")
    resp = decode_response(echo_response_v0(), ECHO_KEY, 0)
    ex = Exchange(1, 0, ("10.0.0.1", 5000), ("10.0.0.2", 9092), PAIRED, msg, resp)
    assert compile_filter('api == "acmeecho"').matches(ExchangeFacts(ex))
    obj = ExportEncoder("c").exchange_object(ex)
    assert (obj["api_name"], obj["request"]["Message"], obj["response"]["Echoes"]) == \
        ("AcmeEcho", "hello", ["hello"] * 3)
    text = "\n".join(render_tree(build_tree(ex)))
    assert "AcmeEcho request v0" in text and 'Message: "hello"' in text
    assert "AcmeEcho response v0" in text and 'Echoes: ["hello", "hello", "hello"]' in text
    assert manager.close() == ["plugin acme: AcmeEcho request decoder failed 4 times in all"]
    assert decode_request(echo_request_v0()).body is None
    assert api_label(ECHO_KEY) == f"Unknown({ECHO_KEY})"


def _capture_with(frames: list[tuple[bool, bytes]], path: Path) -> None:
    """A TCP conversation on port 9092 (handshake, frames, FIN) written by scapy."""
    from scapy.all import IP, TCP, Ether, wrpcap

    client, broker = ("10.1.0.1", 40000), ("10.1.0.2", 9092)
    seq = {True: 1000, False: 5000}
    pkts = []
    t = 1_700_000_000.0

    def pkt(from_client: bool, flags: str, data: bytes = b"") -> None:
        nonlocal t
        src, dst = (client, broker) if from_client else (broker, client)
        p = Ether() / IP(src=src[0], dst=dst[0]) / TCP(
            sport=src[1], dport=dst[1], flags=flags, seq=seq[from_client],
            ack=seq[not from_client]) / data
        p.time = t
        t += 0.001
        pkts.append(p)
        seq[from_client] += len(data) + (1 if "S" in flags or "F" in flags else 0)

    pkt(True, "S")
    pkt(False, "SA")
    pkt(True, "A")
    for from_client, frame in frames:
        pkt(from_client, "PA", struct.pack(">i", len(frame)) + frame)
    pkt(True, "FA")
    pkt(False, "FA")
    pkt(True, "A")
    wrpcap(str(path), pkts)


def test_vendor_api_capture_decoded_by_the_cli(plugin_dir, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    d = plugin_dir("acme", VENDOR_PLUGIN)
    cap = tmp_path / "vendor.pcap"
    _capture_with([(True, echo_request_v0(7)), (False, echo_response_v0(7))], cap)
    assert main(["decode", str(cap), "--plugins", str(d), "--no-default-plugins"]) == 0
    out, err = capsys.readouterr()
    assert "AcmeEcho v0 #7" in out and "echo 'hello'" in out, out + err
    assert main(["decode", str(cap), "--plugins", str(d), "-V", "--no-default-plugins",
                 "-Y", 'api == "AcmeEcho"']) == 0
    out, _ = capsys.readouterr()
    assert 'Message: "hello"' in out and "Echoes" in out and "Problem" not in out
    assert main(["export", str(cap), "--plugins", str(d), "--no-default-plugins",
                 "-o", "-"]) == 0
    out, _ = capsys.readouterr()
    ex = json.loads(out.splitlines()[0])
    assert ex["api_name"] == "AcmeEcho" and ex["request"]["Targets"] == [{"NodeId": 1},
                                                                        {"NodeId": 2}]
    assert ex["problems"] == []
    # without the plugin: the frames are still paired, bodies undecoded
    assert main(["export", str(cap), "--no-default-plugins", "-o", "-"]) == 0
    out, _ = capsys.readouterr()
    ex = json.loads(out.splitlines()[0])
    assert ex["api_name"] == "Unknown(1000)" and ex["status"] == "paired"
    assert ex["request"] is None and "unknown API key 1000" in ex["problems"][0]
