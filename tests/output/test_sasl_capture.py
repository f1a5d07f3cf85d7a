"""Real SASL traffic (``pcaps/tansu-sasl.pcap``: librdkafka and kafka-python refused by
Tansu): what the views say about it, and that no view shows a SCRAM proof.

The proofs are read from the capture file's own bytes (every ``p=`` attribute of a
client-final message); each view's text is searched for them, and so are the bytes its
hex columns spell out.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kwsniff.cli import main

CAPTURE = Path(__file__).resolve().parents[2] / "pcaps" / "tansu-sasl.pcap"
PORT = ["-p", "19993"]
_HEX_ROW = re.compile(r"^[0-9a-f]{4,}  ((?:[0-9a-f]{2} {1,2}){1,16})", re.M)

pytestmark = pytest.mark.skipif(not CAPTURE.exists(), reason="pcaps/tansu-sasl.pcap missing")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main([*args, *PORT, str(CAPTURE)]) == 0
    return capsys.readouterr().out


def _proofs() -> set[bytes]:
    proofs = set(re.findall(rb"p=([A-Za-z0-9+/]{20,}=*)", CAPTURE.read_bytes()))
    assert len(proofs) == 4        # four SCRAM client-final messages
    return proofs


def test_summary_lines_say_who_tried_what_and_why_it_failed(
        capsys: pytest.CaptureFixture[str]) -> None:
    lines = _run(capsys, "decode").splitlines()
    refused = [line for line in lines if "SASL error unknown-user" in line]
    # three SaslAuthenticate client-finals (Kafka error code 0, refused inside the
    # token: "refused", not "ok") and one bare token
    assert len(refused) == 4
    assert sum("SaslAuthenticate" in line and "→ refused server-final" in line
               for line in refused) == 3
    assert not any("→ ok server-final" in line for line in lines)
    assert any("SCRAM-SHA-512 client-first user alice 45 B token → ok server-first" in line
               for line in lines)
    bare = [line for line in lines if " SASL (raw token) " in line]
    assert len(bare) == 2
    # raw tokens carry no header: their client id is their SaslHandshake v0's
    assert all(" kp-scram256-v0 SASL (raw token) " in line for line in bare)
    assert bare[0].endswith("SCRAM-SHA-256 client-first user erin → server-first")
    assert bare[1].endswith("SCRAM-SHA-256 client-final → server-final SASL error unknown-user")
    plain = [line for line in lines if "mechanism PLAIN" in line]
    assert len(plain) == 1 and "no response" in plain[0]


def test_bare_token_tree_shows_the_decoded_token_only(
        capsys: pytest.CaptureFixture[str]) -> None:
    tree = _run(capsys, "decode", "-V")
    block = tree[tree.index("Exchange 18: SASL"):]
    assert "SASL token from the client\n            SASL SCRAM-SHA-256\n" in block
    assert 'message: "client-final"' in block and 'proof: "<redacted>"' in block
    for internal in ("secret_spans", "schema:", "version: null", " data\n"):
        assert internal not in tree


@pytest.mark.parametrize("view", [["decode", "-V"], ["decode", "-x"],
                                  ["decode", "-V", "-x", "--offsets", "--full-values"],
                                  ["export", "--records", "-o", "-"]])
def test_no_view_shows_a_proof(view: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(capsys, *view)
    spelled = b"".join(bytes.fromhex("".join(row.split())) for row in _HEX_ROW.findall(out))
    if view[0] == "export":
        for line in out.splitlines():
            json.loads(line)
    for proof in _proofs():
        assert proof[:12].decode() not in out
        assert proof[:12] not in spelled
    if "-x" in view:
        assert spelled.count(b"p=" + b"*" * 20) == 4


def test_export_names_bare_token_exchanges(capsys: pytest.CaptureFixture[str]) -> None:
    objs = [json.loads(line) for line in _run(capsys, "export", "-o", "-").splitlines()]
    bare = [o for o in objs if o.get("protocol") == "kafka-sasl"]
    assert [(o["api_name"], o["api_key"], o["status"]) for o in bare] == [("SASL", None, "paired")] * 2
    assert bare[1]["response"]["data"]["error"] == "unknown-user"


@pytest.mark.parametrize("expr,count", [
    ('sasl_error == "unknown-user"', 4),
    ("sasl_error", 4),
    ('sasl_user == "alice"', 1),
    ('sasl_user in {"alice", "bob", "dave", "erin"}', 4),    # the client-first messages
    ('sasl_mechanism == "PLAIN"', 1),                        # its handshake only
    ('sasl_mechanism contains "SCRAM" and api == "SaslHandshake"', 4),
    ('sasl_mechanism == "SCRAM-SHA-256" and protocol == "kafka-sasl"', 2),
])
def test_sasl_filter_fields(expr: str, count: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert len(_run(capsys, "decode", "-Y", expr).splitlines()) == count
