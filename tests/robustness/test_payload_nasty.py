"""Embedded payloads built to break parsers: deeply nested JSON in record values and in
OAuth tokens. They are shown as text, and a credential is masked even when its JWT
cannot be parsed."""

from __future__ import annotations

import base64

import pytest

from fuzz import wire
from kwsniff.kafka import sasl
from kwsniff.kafka.payload import render_payload
from nasty import check, decode


@pytest.mark.parametrize("depth", [10, 900, 5000, 100_000])
def test_deeply_nested_json_record_value(depth: int) -> None:
    value = b"[" * depth + b"]" * depth
    assert render_payload(value).text          # JSON when it parses, else its text
    batch = wire.v2_batch([wire.v2_record(0, b"k", value)])
    run = check(decode(wire.packet_tuples(wire.conversation(
        [(False, wire.produce_request(1, batch)), (True, wire.produce_response(1))]))))
    assert run.exchanges[0].status == "paired"


@pytest.mark.parametrize("depth, kind", [(64, "json"), (65, "text"), (900, "text")])
def test_json_is_kept_to_the_nesting_bound(depth: int, kind: str) -> None:
    value = b'{"a":' * (depth - 1) + b"[]" + b"}" * (depth - 1)
    rendered = render_payload(value)
    assert rendered.kind == kind and rendered.problems == []
    if kind == "text":
        assert rendered.text == value.decode()


@pytest.mark.parametrize("depth, parsed", [(64, True), (65, False)])
def test_jwt_claims_are_kept_to_the_nesting_bound(depth: int, parsed: bool) -> None:
    claims = b"[" * depth + b"]" * depth
    jwt = b"eyJhbGciOiJub25lIn0." + base64.urlsafe_b64encode(claims).rstrip(b"=") + b".c2ln"
    out = sasl.decode_sasl_token(b"n,,\x01auth=Bearer " + jwt + b"\x01\x01", "OAUTHBEARER",
                                 from_client=True)
    assert ("token_claims" in out) == parsed, out
    assert out["redacted"]


@pytest.mark.parametrize("claims", [b'{"sub":"alice"}', b"[" * 100_000 + b"]" * 100_000,
                                    b'{"a":' * 50_000 + b"1" + b"}" * 50_000, b"\xff\xfe"])
def test_bearer_token_is_masked_whatever_its_claims(claims: bytes) -> None:
    jwt = b"eyJhbGciOiJub25lIn0." + base64.urlsafe_b64encode(claims).rstrip(b"=") + b".c2ln"
    token = b"n,,\x01auth=Bearer " + jwt + b"\x01\x01"
    out = sasl.decode_sasl_token(token, "OAUTHBEARER", from_client=True)
    assert out["redacted"]
    masked = sasl.redact_token(token, out["secret_spans"])
    assert jwt not in masked and b"Bearer " in masked
    assert not any("RecursionError" in p for p in out.get("problems", []))


def test_undecodable_token_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """If a SASL decoder breaks, the whole token counts as secret."""
    def broken(*args: object) -> dict:
        raise RuntimeError("decoder bug")

    monkeypatch.setattr(sasl, "_decode", broken)
    token = b"\x00alice\x00password"
    out = sasl.decode_sasl_token(token, "PLAIN", from_client=True)
    assert out["secret_spans"] == [[0, len(token)]] and out["redacted"]
    assert sasl.redact_token(token, out["secret_spans"]) == b"*" * len(token)


def test_deeply_nested_json_server_error() -> None:
    out = sasl.decode_sasl_token(b'{"a":' * 100_000, "OAUTHBEARER", from_client=False)
    assert out["message"] == "server-error" and out["problems"]
