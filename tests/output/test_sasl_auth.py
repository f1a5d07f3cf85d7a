"""SASL authentication outcomes (kwsniff.output.sasl_auth) and the stats section.

Messages are encoded by kafka-python and decoded by kwsniff (builders.py); raw tokens
after a v0 handshake go through kwsniff's own token decoder. The real capture
(pcaps/tansu-sasl.pcap: Tansu refusing librdkafka and kafka-python) is checked too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from builders import build, exchange, request, response
from kwsniff.cli import main
from kwsniff.kafka import decoding
from kwsniff.kafka.model import PAIRED, UNANSWERED, Exchange, KafkaMessage
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.names import SASL_PROTOCOL
from kwsniff.output.sasl_auth import AuthTracker
from kwsniff.output.stats import StatsCollector, render_report

CAPTURE = Path(__file__).resolve().parents[2] / "pcaps" / "tansu-sasl.pcap"


class Conn:
    """Builds the exchanges of one connection, in order."""

    def __init__(self, stream: int, client_id: str = "app") -> None:
        self.stream, self.client_id, self.corr, self.out = stream, client_id, 0, []

    def _add(self, req: KafkaMessage, resp: KafkaMessage | None, **kw: Any) -> None:
        status = PAIRED if resp is not None else UNANSWERED
        self.out.append(exchange(req, resp, index=len(self.out) + 1, stream=self.stream,
                                 status=status, **kw))

    def handshake(self, mech: str, error: int = 0, offered: tuple[str, ...] = (),
                  answered: bool = True, version: int = 1) -> Conn:
        self.corr += 1
        req = request(build(SaslHandshakeRequest, version, {"Mechanism": mech}),
                      correlation_id=self.corr, client_id=self.client_id)
        resp = response(build(SaslHandshakeResponse, version, {
            "ErrorCode": error, "Mechanisms": list(offered or (mech,))}), req) \
            if answered else None
        self._add(req, resp)
        return self

    def authenticate(self, token: bytes, answer: bytes | None, error: int = 0,
                     message: str | None = None) -> Conn:
        self.corr += 1
        req = request(build(SaslAuthenticateRequest, 1, {"AuthBytes": token}),
                      correlation_id=self.corr, client_id=self.client_id)
        resp = response(build(SaslAuthenticateResponse, 1, {
            "ErrorCode": error, "ErrorMessage": message, "AuthBytes": answer,
            "SessionLifetimeMs": 0}), req) if answer is not None else None
        self._add(req, resp)
        return self

    def raw(self, mech: str, token: bytes, answer: bytes | None) -> Conn:
        body, raw = decoding.decode_sasl_token(token, mech, True)
        req = KafkaMessage(kind="request", raw=raw, header={"SaslMechanism": mech}, body=body,
                           client_id=self.client_id)
        resp = None
        if answer is not None:
            rbody, rraw = decoding.decode_sasl_token(answer, mech, False)
            resp = KafkaMessage(kind="response", raw=rraw, header={"SaslMechanism": mech},
                                body=rbody)
        ex = Exchange(index=len(self.out) + 1, stream=self.stream, client=("10.0.0.1", 1),
                      broker=("10.0.0.2", 9092), status=PAIRED if resp else UNANSWERED,
                      request=req, response=resp, protocol=SASL_PROTOCOL)
        self.out.append(ex)
        return self

    def metadata(self) -> Conn:
        self.corr += 1
        req = request(build(MetadataRequest, 1, {"Topics": None}), correlation_id=self.corr,
                      client_id=self.client_id)
        self._add(req, None)
        return self


def _rows(*conns: Conn, interleave: bool = False) -> dict[str, Any]:
    tracker = AuthTracker()
    exchanges = [ex for c in conns for ex in c.out]
    if interleave:      # one step of each connection in turn
        width = max(len(c.out) for c in conns)
        exchanges = [c.out[i] for i in range(width) for c in conns if i < len(c.out)]
    for ex in exchanges:
        tracker.add(ExchangeFacts(ex))
    return tracker.report()


def _one(report: dict[str, Any]) -> tuple[Any, ...]:
    assert report["attempts"] == 1, report
    r = report["rows"][0]
    return r["mechanism"], r["user"], r["client_id"], r["outcome"], r["reason"]


def test_scram_success_is_the_server_final_without_error() -> None:
    c = Conn(0, "orders").handshake("SCRAM-SHA-256") \
        .authenticate(b"n,,n=alice,r=abc", b"r=abcdef,s=c2FsdA==,i=4096") \
        .authenticate(b"c=biws,r=abcdef,p=cHJvb2Y=", b"v=c2lnbmF0dXJl")
    assert _one(_rows(c)) == ("SCRAM-SHA-256", "alice", "orders", "succeeded", None)


def test_scram_refusal_inside_the_token_with_error_code_zero() -> None:
    c = Conn(0).handshake("SCRAM-SHA-512") \
        .authenticate(b"n,,n=bob,r=abc", b"r=abcdef,s=c2FsdA==,i=4096") \
        .authenticate(b"c=biws,r=abcdef,p=cHJvb2Y=", b"e=invalid-proof")
    assert _one(_rows(c))[3:] == ("failed", "SASL error invalid-proof")


def test_error_codes_refuse_with_their_names_and_messages() -> None:
    mech = Conn(0).handshake("GSSAPI", error=33, offered=("PLAIN", "SCRAM-SHA-256"))
    assert _one(_rows(mech))[3:] == (
        "failed", "UNSUPPORTED_SASL_MECHANISM (broker offers PLAIN, SCRAM-SHA-256)")
    bad = Conn(1).handshake("PLAIN").authenticate(
        b"\x00carol\x00secret", b"", error=58, message="Invalid username or password")
    assert _one(_rows(bad)) == ("PLAIN", "carol", "app", "failed",
                                "SASL_AUTHENTICATION_FAILED: Invalid username or password")


def test_plain_answered_without_error_succeeds() -> None:
    c = Conn(0).handshake("PLAIN").authenticate(b"\x00carol\x00secret", b"")
    assert _one(_rows(c))[3] == "succeeded"


def test_unanswered_handshake_is_no_response() -> None:
    c = Conn(0, "rdk").handshake("PLAIN", answered=False)
    assert _one(_rows(c)) == ("PLAIN", None, "rdk", "no response",
                              "the SaslHandshake was not answered")


def test_gssapi_outcome_comes_from_the_requests_that_follow() -> None:
    token = b"\x60\x82\x01\x00" + b"k" * 40
    c = Conn(0).handshake("GSSAPI").authenticate(token, b"\x60\x10" + b"s" * 16)
    assert _one(_rows(c))[3:] == ("unfinished", "no outcome before the end of the capture")
    c.authenticate(b"\x05\x04" + b"w" * 20, b"\x05\x04" + b"x" * 20).metadata()
    assert _one(_rows(c))[3:] == ("succeeded", "Kafka requests followed on the connection")


def test_raw_tokens_after_a_v0_handshake() -> None:
    ok = Conn(0, "old-client").handshake("SCRAM-SHA-256", version=0) \
        .raw("SCRAM-SHA-256", b"n,,n=erin,r=abc", b"r=abcdef,s=c2FsdA==,i=4096") \
        .raw("SCRAM-SHA-256", b"c=biws,r=abcdef,p=cHJvb2Y=", b"v=c2lnbmF0dXJl")
    refused = Conn(1, "old-client").handshake("SCRAM-SHA-256", version=0) \
        .raw("SCRAM-SHA-256", b"n,,n=erin,r=abc", b"r=abcdef,s=c2FsdA==,i=4096") \
        .raw("SCRAM-SHA-256", b"c=biws,r=abcdef,p=cHJvb2Y=", b"e=unknown-user")
    closed = Conn(2, "old-client").handshake("PLAIN", version=0) \
        .raw("PLAIN", b"\x00frank\x00pw", None)
    plain = Conn(3, "old-client").handshake("PLAIN", version=0) \
        .raw("PLAIN", b"\x00gina\x00pw", b"")
    report = _rows(ok, refused, closed, plain, interleave=True)
    assert report["outcomes"] == {"failed": 1, "no response": 1, "unfinished": 0,
                                  "succeeded": 2}
    got = {(r["user"], r["outcome"], r["reason"]) for r in report["rows"]}
    assert got == {("erin", "succeeded", None), ("erin", "failed", "SASL error unknown-user"),
                   ("frank", "no response", "the SASL token was not answered"),
                   ("gina", "succeeded", None)}
    assert [r["outcome"] for r in report["rows"]] == ["failed", "no response", "succeeded",
                                                      "succeeded"]


def test_reauthentication_starts_a_new_attempt_and_rows_group_repeats() -> None:
    c = Conn(0).handshake("PLAIN").authenticate(b"\x00u\x00p", b"")
    c.handshake("PLAIN").authenticate(b"\x00u\x00p", b"")
    for stream in (1, 2, 3):
        c2 = Conn(stream).handshake("PLAIN").authenticate(b"\x00u\x00bad", b"", error=58)
        c.out += c2.out
    report = _rows(c)
    assert report["outcomes"]["succeeded"] == 2 and report["outcomes"]["failed"] == 3
    assert [(r["outcome"], r["attempts"], r["first_stream"]) for r in report["rows"]] == [
        ("failed", 3, 1), ("succeeded", 2, 0)]


def test_memory_stays_bounded() -> None:
    tracker = AuthTracker(limit=10)
    for stream in range(100):
        for ex in Conn(stream, f"client-{stream}").handshake("PLAIN").out:
            tracker.add(ExchangeFacts(ex))
        assert len(tracker.open) <= 10 and len(tracker.rows) <= 10
    report = tracker.report()
    assert report["attempts"] == 100
    assert report["outcomes"]["unfinished"] == 100
    assert report["approximate"]


def test_stats_on_the_real_refusals(capsys: pytest.CaptureFixture[str]) -> None:
    if not CAPTURE.exists():
        pytest.skip("pcaps/tansu-sasl.pcap missing")
    assert main(["stats", "--json", "-p", "19993", str(CAPTURE)]) == 0
    auth = json.loads(capsys.readouterr().out)["authentication"]
    assert auth["outcomes"] == {"failed": 4, "no response": 1, "unfinished": 0, "succeeded": 0}
    rows = {(r["mechanism"], r["user"], r["client_id"], r["outcome"], r["reason"])
            for r in auth["rows"]}
    refused = "SASL error unknown-user"
    assert rows == {
        ("SCRAM-SHA-512", "alice", "rdk-scram512", "failed", refused),
        ("SCRAM-SHA-256", "bob", "rdk-scram256", "failed", refused),
        ("SCRAM-SHA-512", "dave", "kp-scram512", "failed", refused),
        # raw tokens after SaslHandshake v0: the client id is the handshake's
        ("SCRAM-SHA-256", "erin", "kp-scram256-v0", "failed", refused),
        ("PLAIN", None, "rdk-plain", "no response", "the SaslHandshake was not answered")}


def test_stats_text_section_only_with_attempts() -> None:
    stats = StatsCollector()
    for ex in Conn(0, "svc").handshake("PLAIN").authenticate(b"\x00svc\x00pw", b"").out:
        stats.add(ExchangeFacts(ex))
    text = "\n".join(render_report(stats.report()))
    assert "SASL authentication: 1 attempt (succeeded 1)" in text
    assert "PLAIN      svc   svc        succeeded" in text
    assert "SASL authentication" not in "\n".join(render_report(StatsCollector().report()))
