"""Payload rendering and hooks; SASL token decoding and redaction."""

from __future__ import annotations

import json
import re

import pytest

from kwsniff.kafka import payload
from kwsniff.kafka.payload import register_payload_decoder, render_headers, render_payload, unregister_payload_decoder
from kwsniff.kafka.sasl import REDACTED, decode_sasl_token, decode_token, redact_token


def test_builtin_views() -> None:
    assert render_payload(None).kind == "null"
    assert render_payload(b"").kind == "empty"
    r = render_payload(b'  {"a": [1, 2], "b": "\xc3\xa9"}')
    assert r.kind == "json" and r.obj == {"a": [1, 2], "b": "é"}
    assert r.text == json.dumps({"a": [1, 2], "b": "é"}, indent=2, ensure_ascii=False)
    assert render_payload(b"hello world\n").kind == "text"
    assert render_payload(b"123").kind == "text"           # scalars stay text
    assert render_payload(b"{not json").kind == "text"
    assert render_payload(b"\x00\x01\xff").text == "0001ff"
    assert render_payload(b"ab\x00cd").kind == "hex"       # valid UTF-8 but binary
    assert render_payload(b"\xc3\x28").kind == "hex"       # invalid UTF-8


def test_max_chars_shortens() -> None:
    r = render_payload(b"x" * 100, max_chars=10)
    assert r.text == "x" * 10 + "..." and r.truncated
    h = render_payload(b"\xff" * 100, max_chars=9)
    assert h.text == "ff" * 4 + "f..." and h.truncated


def test_hooks_by_topic_pattern_and_part() -> None:
    calls = []

    def upper(topic, partition, part, data):
        calls.append((topic, partition, part))
        return data.decode().upper() if data.startswith(b"u:") else None

    h1 = register_payload_decoder("orders.*", upper, parts=("value",), name="upper")
    h2 = register_payload_decoder(re.compile(r"metrics-\d+"), lambda t, p, part, d: {"n": len(d)})
    try:
        r = render_payload(b"u:abc", topic="orders.eu", partition=3)
        assert (r.kind, r.text, r.decoder) == ("decoded", "U:ABC", "upper")
        assert render_payload(b"other", topic="orders.eu").kind == "text"  # decoder declined
        assert render_payload(b"u:abc", topic="orders.eu", part="key").kind == "text"
        assert render_payload(b"u:abc", topic="payments").kind == "text"
        assert render_payload(b"u:abc", topic=None).kind == "text"
        m = render_payload(b"\x01\x02", topic="metrics-7")
        assert m.kind == "decoded" and m.obj == {"n": 2}
        assert calls[0] == ("orders.eu", 3, "value")
        assert [n for n, _, _ in payload.registered_decoders()] == ["upper", "<lambda>"]
    finally:
        unregister_payload_decoder(h1)
        unregister_payload_decoder(h2)
    assert payload.registered_decoders() == []


def test_failing_hook_falls_back_and_reports() -> None:
    def broken(topic, partition, part, data):
        raise RuntimeError("schema registry unreachable")

    h = register_payload_decoder("*", broken, name="avro")
    try:
        r = render_payload(b'{"a": 1}', topic=None)
        assert r.kind == "json" and r.obj == {"a": 1}
        assert r.problems == ["payload decoder avro failed: RuntimeError: schema registry unreachable"]
        ((k, hv),) = render_headers([("trace", b"abc")], topic="x")
        assert k == "trace" and hv.kind == "text" and hv.problems
    finally:
        unregister_payload_decoder(h)
    with pytest.raises(ValueError):
        register_payload_decoder("*", broken, parts=("body",))


def test_sasl_plain_scram_oauth() -> None:
    p = decode_sasl_token(b"admin\x00alice\x00pw", "PLAIN")
    assert (p["authzid"], p["username"], p["password"], p["redacted"]) == ("admin", "alice", REDACTED, True)
    assert redact_token(b"admin\x00alice\x00pw", p["secret_spans"]) == b"admin\x00alice\x00**"
    cf = decode_sasl_token(b"n,a=bo=2Cb,n=bo=3Db,r=nonce,tokenauth=true", "SCRAM-SHA-256")
    assert cf["authzid"] == "bo,b" and cf["username"] == "bo=b"
    assert cf["extensions"] == {"tokenauth": "true"} and cf["mechanism"] == "SCRAM-SHA-256"
    sf = decode_sasl_token(b"r=nonceXYZ,s=c2FsdA==,i=bad")
    assert sf["message"] == "server-first" and sf["problems"]
    err = decode_sasl_token(b"e=invalid-proof")
    assert err["error"] == "invalid-proof" and not err["redacted"]
    o = decode_sasl_token(b"n,,\x01auth=Bearer abc.def\x01\x01", show_secrets=True)
    assert o["token"] == "abc.def" and o["redacted"] is False and o["secret_spans"] == [[16, 23]]
    assert decode_sasl_token(b'{"status":"invalid_token","scope":"x"}')["error"]["status"] == "invalid_token"
    assert decode_sasl_token(b"\x01", "OAUTHBEARER")["message"] == "client-ack"


def test_sasl_odd_inputs_never_raise() -> None:
    assert decode_sasl_token(b"")["message"] == "empty"
    assert decode_sasl_token(None)["message"] == "empty"
    assert decode_sasl_token(b"\x60\x82\x02\x00")["mechanism"] == "GSSAPI"
    x = decode_sasl_token(b"\x00\x00", "PLAIN")
    assert x["password"] == REDACTED or x.get("problems")
    bad = decode_sasl_token(b"\x00only-one-nul", "PLAIN")
    assert bad["problems"] and bad["secret_spans"] == [[0, 13]]
    assert decode_sasl_token(b"random bytes", "SCRAM-SHA-512")["problems"]
    for blob in (b"n,", b"c=", b"r=,s=,i=", b"v", b"\xff\xfe", b"n,,\x01", b"\x01\x01"):
        decode_sasl_token(blob)
        decode_token(blob, "OAUTHBEARER", True)


@pytest.mark.parametrize("data", [b"plain text", b"\x00\x01\xff" * 300, b'{"a": [1, 2]}',
                                  b" [1,2", "é" .encode() * 400, b"x" * 1000, b"[" * 5000,
                                  b"tab\tand\nnewline", b"bell\x07"])
@pytest.mark.parametrize("limit", [None, 10, 256])
def test_builtin_view_is_what_render_payload_shows(data: bytes, limit: int | None) -> None:
    # the -V tree uses the tuple directly when no decoder is registered
    assert not payload.has_decoders()
    kind, obj, text, truncated = payload.builtin_view(data, limit)
    r = render_payload(data, max_chars=limit)
    assert (kind, obj) == (r.kind, r.obj)
    if kind != "json":
        assert (text, truncated) == (r.text, r.truncated)
    else:
        assert text is None
