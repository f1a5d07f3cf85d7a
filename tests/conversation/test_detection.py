"""Kafka detection on any port, client side, TLS on Kafka ports, and non-Kafka traffic.

``data/nonkafka.pcap`` is real loopback traffic (see ``data/make_nonkafka.py``): HTTP on
18080, TLS 1.2/1.3 on 18443, Redis on 16379 (redis-server + redis-cli) and PostgreSQL on
15432 (postgres + psql, sslmode=prefer), including binary payloads shaped like Kafka
frames.  None of it may be reported as Kafka, whether the port is configured as a Kafka
port or left to auto-detection.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from convsim import Sim, frame, merge
from kscenario import heartbeat, metadata, play, session

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka import detect
from kwsniff.kafka.model import PAIRED

NONKAFKA = Path(__file__).parent / "data" / "nonkafka.pcap"
SERVICES = {"http": 18080, "tls": 18443, "redis": 16379, "postgres": 15432}


def run_capture(path: Path, **opts):  # type: ignore[no-untyped-def]
    eng = Engine(EngineOptions(**opts))
    with open_capture(str(path)) as src:
        out = list(eng.run(src))
    return eng, out


def test_nonkafka_capture_has_all_services() -> None:
    eng, out = run_capture(NONKAFKA)
    ports = {c for c in SERVICES.values()}
    assert eng.summary.tcp_connections >= 20
    assert out == [] and eng.summary.kafka_connections == 0
    assert eng.summary.problems == []
    assert ports  # the four services are in the file (checked by port below)


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_service_on_a_kafka_port_is_not_decoded_as_kafka(service: str) -> None:
    port = SERVICES[service]
    eng, out = run_capture(NONKAFKA, ports=(port,))
    assert out == []
    assert eng.summary.kafka_connections == 0
    conns = [c for c in eng.connection_summaries() if c.broker and c.broker[1] == port]
    if service == "tls":
        assert eng.summary.tls_connections == 2
        tls = [p for p in eng.summary.problems if "TLS-encrypted (" in p
               and "not decrypted" in p]
        assert len(tls) == 2                      # one problem per connection
        assert all(c.protocol == "tls" for c in conns) and len(conns) == 2
    else:
        assert conns and all(c.protocol == "other" for c in conns)
        assert all("no recognisable Kafka traffic" in p for p in eng.summary.problems)
        # one problem per connection that carried bytes, none for empty probes
        assert len(eng.summary.problems) == len(conns)


def test_auto_detection_on_unusual_port_with_and_without_handshake() -> None:
    for handshake in (True, False):
        s = Sim(server=("10.1.1.1", 31000), handshake=handshake)
        steps = session(8, seed=3)
        play(s, steps if handshake else steps[2:])
        eng = Engine()
        out = list(eng.run(merge(s)))
        assert eng.summary.kafka_connections == 1
        assert len(out) == len(steps if handshake else steps[2:])
        c = eng.connection_summaries()[0]
        assert c.broker == ("10.1.1.1", 31000) and c.detected_by.startswith("content")
        assert c.client_side_by == ("syn" if handshake else "content")


def test_auto_detection_can_be_disabled() -> None:
    s = Sim(server=("10.1.1.1", 31000))
    play(s, session(5, seed=3))
    eng = Engine(EngineOptions(auto_detect=False))
    assert list(eng.run(merge(s))) == []
    assert eng.summary.kafka_connections == 0


def test_client_side_from_port_and_from_content_when_reversed_first_packet() -> None:
    # no handshake and the broker speaks first in the capture (a response tail)
    s = Sim(handshake=False)
    s.s(b"\x00\x00\x01\x00\x07\x00")          # tail of a response sent before the capture
    for corr in range(1, 4):
        st = metadata(corr)
        s.c(st.request)
        s.s(st.response)
    eng = Engine()
    out = list(eng.run(merge(s)))
    c = eng.connection_summaries()[0]
    assert c.client == ("10.0.0.1", 40001) and c.client_side_by == "port"
    assert sum(e.status == PAIRED for e in out) == 3
    # same traffic on an unconfigured port: the content decides
    s2 = Sim(handshake=False, server=("10.0.0.2", 30001))
    for corr in range(1, 4):
        st = metadata(corr)
        s2.c(st.request)
        s2.s(st.response)
    eng2 = Engine()
    out2 = list(eng2.run(merge(s2)))
    c2 = eng2.connection_summaries()[0]
    assert c2.client == ("10.0.0.1", 40001) and c2.client_side_by == "content"
    assert sum(e.status == PAIRED for e in out2) == 3


def test_learned_broker_endpoint_needs_no_proof_on_next_connection() -> None:
    a = Sim(server=("10.1.1.1", 31000), client=("10.0.0.1", 40001), t0=10.0)
    st = metadata(1)
    a.c(st.request)
    a.s(st.response)
    b = Sim(server=("10.1.1.1", 31000), client=("10.0.0.1", 40002), t0=20.0)
    hb = heartbeat(1)
    b.c(hb.request)            # a lone request; never enough on an unknown port
    b.s(hb.response)
    eng = Engine()
    out = list(eng.run(merge(a, b)))
    assert eng.summary.kafka_connections == 2 and len(out) == 2


def test_tls_client_hello_on_kafka_port_synthetic() -> None:
    hello = bytes.fromhex("160301") + struct.pack(">H", 200) + b"\x01" + bytes(199)
    s = Sim()
    s.c(hello)
    s.s(bytes.fromhex("160303") + struct.pack(">H", 90) + b"\x02" + bytes(89))
    s.fin()
    eng = Engine()
    assert list(eng.run(merge(s))) == []
    assert eng.summary.tls_connections == 1
    assert len(eng.summary.problems) == 1
    assert eng.summary.problems[0].startswith("frame 1: connection 0 is TLS-encrypted (")


def test_zookeeper_like_length_prefixed_protocol_is_not_kafka() -> None:
    # ZooKeeper's ConnectRequest: int32 length, protocolVersion 0, lastZxid, timeout,
    # sessionId, password: its first bytes look like a Kafka Produce v0 header and the
    # reply echoes 0 where a correlation id would be.
    connect = struct.pack(">iqiq", 0, 0, 30000, 0) + struct.pack(">i", 16) + bytes(16) + b"\x00"
    reply = struct.pack(">iiq", 0, 30000, 0x1234) + struct.pack(">i", 16) + bytes(16) + b"\x00"
    s = Sim(server=("10.0.0.5", 2181))
    s.c(frame(connect))
    s.s(frame(reply))
    ping = struct.pack(">ii", -2, 11)
    for _ in range(3):
        s.c(frame(ping))
        s.s(frame(struct.pack(">iqi", -2, 5, 0)))
    s.fin()
    eng = Engine()
    assert list(eng.run(merge(s))) == []
    assert eng.summary.kafka_connections == 0


def test_classify_needs_more_bytes_before_deciding() -> None:
    st = metadata(1)
    half = memoryview(st.request[:10])
    v = detect.classify((half, memoryview(b"")), ([0], []), 0, False, False, 1 << 16, 1 << 20)
    assert v is None
    full = memoryview(st.request)
    v = detect.classify((full, memoryview(st.response)), ([0], [0]), None, False, False,
                        1 << 16, 1 << 20)
    assert v is not None and v.kind == detect.KAFKA and v.client_dir == 0
