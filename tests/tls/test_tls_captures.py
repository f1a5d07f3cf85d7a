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

PCAPS = Path(__file__).resolve().parents[2] / "pcaps" / "tls"
NAMES = sorted(p.name[:-5] for p in PCAPS.glob("tls*.keys"))
SUITES = {"tls13-aes256": ("TLS 1.3", "TLS_AES_256_GCM_SHA384"),
          "tls13-aes128": ("TLS 1.3", "TLS_AES_128_GCM_SHA256"),
          "tls13-chacha": ("TLS 1.3", "TLS_CHACHA20_POLY1305_SHA256"),
          "tls12-aes128gcm": ("TLS 1.2", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
          "tls12-chacha": ("TLS 1.2", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"),
          "tls12-cbc": ("TLS 1.2", "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384"),
          "tls13-sasl": ("TLS 1.3", "TLS_AES_128_GCM_SHA256")}
CLIENTS = {"tls-admin", "tls-rdkafka-producer", "tls-rdkafka-consumer", "tls-kafka-python"}


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
    assert len(plain) > (5 if name == "tls13-sasl" else 40)
    assert Counter(map(key, tls)) == Counter(map(key, plain))
    version, suite = SUITES[name]
    s = eng.summary
    assert s.tls_decrypted == s.kafka_connections == s.tls_connections == s.tcp_connections
    assert s.tls_undecrypted == 0 and s.problems == []
    for o in tls:
        assert o["tls"] == {"version": version, "suite": suite, "sni": o["tls"]["sni"],
                            "decrypted": True, **({"subject": o["tls"]["subject"]}
                                                  if "subject" in o["tls"] else {})}
    # (no SNI: the clients bootstrap from an IP address, and send none then)
    assert all(o["tls"]["sni"] is None for o in tls)
    if name == "tls13-sasl":
        assert {o["client_id"] for o in tls} == {"tls-sasl-scram", "tls-sasl-plain"}
        assert any(o["api_name"] == "SaslAuthenticate" for o in tls)
    else:
        assert {o["client_id"] for o in tls} >= CLIENTS
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
    assert len(s.tls_notes) == s.tls_connections
    assert all(n.startswith("TLS connection ") and f": {version}, {suite}, no SNI" in n
               and " bytes from the client, " in n for n in s.tls_notes)
    conns = eng.connection_summaries()
    assert len(conns) == s.tls_connections and all(c.protocol == "tls" for c in conns)
    assert all(c.tls.version_name == version for c in conns)


def run_cli(*args: str, env: dict | None = None):
    import os
    import subprocess
    import sys
    e = dict(os.environ, PYTHONPATH=str(PCAPS.parents[1]))
    e.pop("SSLKEYLOGFILE", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "kwsniff", *args], capture_output=True,
                          text=True, env=e, timeout=120)


def test_cli_keylog_option_environment_and_hint():
    name = "tls12-aes128gcm"
    pcap, keys = str(PCAPS / f"{name}.pcap"), str(PCAPS / f"{name}.keys")
    with_opt = run_cli("decode", pcap, "--tls-keylog", keys)
    with_env = run_cli("decode", pcap, env={"SSLKEYLOGFILE": keys})
    plain = run_cli("decode", str(PCAPS / f"{name}-plain.pcap"))
    assert with_opt.returncode == with_env.returncode == 0
    assert with_opt.stdout == with_env.stdout
    # the same lines as the plaintext leg but for client ports and the broker port
    assert len(with_opt.stdout.splitlines()) == len(plain.stdout.splitlines()) > 40
    assert "not decrypted" not in with_opt.stderr
    none = run_cli("decode", pcap)
    assert none.stdout == ""
    assert none.stderr.rstrip().endswith(
        "TLS connections not decrypted (no key for them): use --tls-keylog")
    bad = run_cli("decode", pcap, "--tls-keylog", str(PCAPS / "no-such.keys"))
    assert bad.returncode != 0
    assert "cannot read the TLS key log" in bad.stderr and len(bad.stderr.splitlines()) == 1


def tshark_requests(pcap: Path, keys: Path) -> set[tuple[int, int, int]]:
    """(stream, api key, correlation id) of every request tshark decrypts and decodes."""
    import subprocess
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-o", f"tls.keylog_file:{keys}", "-d", "tcp.port==9092,tls",
         "-d", "tls.port==9092,kafka", "-Y", "kafka and tcp.dstport==9092", "-T", "fields",
         "-e", "tcp.stream", "-e", "kafka.request_key", "-e", "kafka.correlation_id"],
        capture_output=True, text=True, timeout=120, check=True).stdout
    found = set()
    for line in out.splitlines():
        stream, api_keys, corrs = line.split("\t")
        for k, c in zip(api_keys.split(","), corrs.split(",")):
            found.add((int(stream), int(k), int(c)))
    return found


@pytest.mark.slow
@pytest.mark.skipif(__import__("shutil").which("tshark") is None, reason="tshark not installed")
@pytest.mark.parametrize("name", NAMES)
def test_kwsniff_finds_every_request_tshark_finds(name):
    pcap, keys = PCAPS / f"{name}.pcap", PCAPS / f"{name}.keys"
    theirs = tshark_requests(pcap, keys)
    _, ours = decode(pcap, keys)
    mine = {(o["stream"], o["api_key"], o["correlation_id"]) for o in ours}
    assert len(theirs) > (5 if name == "tls13-sasl" else 40)
    assert theirs <= mine, sorted(theirs - mine)


@pytest.mark.skipif(__import__("shutil").which("editcap") is None, reason="editcap not installed")
def test_pcapng_decryption_secrets_block_is_used(tmp_path):
    import subprocess
    name = "tls13-chacha"
    out = tmp_path / "with-secrets.pcapng"
    subprocess.run(["editcap", "--inject-secrets", f"tls,{PCAPS / f'{name}.keys'}",
                    str(PCAPS / f"{name}.pcap"), str(out)], check=True, timeout=60)
    eng, embedded = decode(out)
    _, given = decode(PCAPS / f"{name}.pcap", PCAPS / f"{name}.keys")
    assert len(embedded) == len(given) > 40
    assert Counter(map(key, embedded)) == Counter(map(key, given))
    assert eng.summary.tls_undecrypted == 0
