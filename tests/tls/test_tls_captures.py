"""The committed TLS captures (tools/make_tls_pcaps.py): Tansu behind a TLS-terminating
proxy (Python ``ssl``), clients confluent-kafka and kafka-python over SSL, TLS 1.2 and
1.3 with six cipher suites. Both legs were captured: the plaintext leg (proxy to
broker) is the ground truth for the decrypted TLS leg."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.output.jsonl import ExportEncoder
from kwsniff.tls.keylog import KeyLog

PCAPS = Path(__file__).resolve().parents[2] / "pcaps"
NAMES = sorted(p.name[:-5] for p in PCAPS.glob("tls*.keys"))
SUITES = {"tls13-aes256": ("TLS 1.3", "TLS_AES_256_GCM_SHA384"),
          "tls13-aes128": ("TLS 1.3", "TLS_AES_128_GCM_SHA256"),
          "tls13-chacha": ("TLS 1.3", "TLS_CHACHA20_POLY1305_SHA256"),
          "tls12-aes128gcm": ("TLS 1.2", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
          "tls12-chacha": ("TLS 1.2", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"),
          "tls12-cbc": ("TLS 1.2", "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384")}


def decode(path: Path, keys: Path | None = None):
    kl = None
    if keys is not None:
        kl = KeyLog()
        kl.add_file(str(keys))
    eng = Engine(EngineOptions(tls_keylog=kl))
    enc = ExportEncoder(path.name)
    with open_capture(str(path)) as src:
        objs = [enc.exchange_object(ex) for ex in eng.run(src)]
    return eng, objs


def key(o: dict) -> tuple:
    return (o["client_id"], o["api_key"], o["api_version"], o["correlation_id"], o["status"],
            o["record_count"], tuple(o["error_codes"]), tuple(o["topics"]),
            o["request_bytes"], o["response_bytes"], len(o["problems"]))


def test_the_six_captures_are_there():
    assert set(NAMES) == set(SUITES)


@pytest.mark.parametrize("name", NAMES)
def test_decrypted_leg_equals_plaintext_leg(name):
    eng, tls = decode(PCAPS / f"{name}.pcap", PCAPS / f"{name}.keys")
    _, plain = decode(PCAPS / f"{name}-plain.pcap")
    assert len(plain) > 40
    assert Counter(map(key, tls)) == Counter(map(key, plain))
    version, suite = SUITES[name]
    s = eng.summary
    assert s.tls_decrypted == s.kafka_connections == s.tls_connections == 11
    assert s.tls_undecrypted == 0 and s.problems == []
    for o in tls:
        assert o["tls"] == {"version": version, "suite": suite, "sni": o["tls"]["sni"],
                            "decrypted": True, **({"subject": o["tls"]["subject"]}
                                                  if "subject" in o["tls"] else {})}
    # (no SNI: the clients bootstrap from an IP address, and send none then)
    assert all(o["tls"]["sni"] is None for o in tls)
    assert {o["client_id"] for o in tls} >= {"tls-admin", "tls-rdkafka-producer",
                                            "tls-rdkafka-consumer", "tls-kafka-python"}
    if version == "TLS 1.2":       # the certificate is visible in TLS 1.2 only
        assert all(o["tls"]["subject"] == "CN=kafka.tls.test,O=kwsniff sample" for o in tls)


@pytest.mark.parametrize("name", NAMES)
def test_without_keys_every_connection_is_reported_and_nothing_decoded(name):
    eng, tls = decode(PCAPS / f"{name}.pcap")
    assert tls == []
    s = eng.summary
    version, suite = SUITES[name]
    assert s.tls_undecrypted == s.tls_connections > 0
    assert len(s.problems) == s.tls_connections
    for p in s.problems:
        assert f"TLS-encrypted ({version}, {suite}, " in p
        assert p.endswith("not decrypted: no key log (--tls-keylog)")
    conns = eng.connection_summaries()
    assert len(conns) == s.tls_connections and all(c.protocol == "tls" for c in conns)
    assert all(c.tls.version_name == version for c in conns)
