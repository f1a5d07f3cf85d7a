"""Connections the TCP layer forgets are counted then, not kept to the end of the run.

The engine folds a forgotten connection's not-Kafka and TLS bytes into the run's
counters and its not-Kafka row into a bounded list of the largest (see the engine's
module docstring). Checked here: the run's summary and exchanges are the same as when
the engine keeps every connection to the end (a driver that does not call
``Engine.follow``), while the engine's table of not-Kafka connections stays bounded by
the TCP layer's table. Real TLS captures replicated onto other client ports, HTTP-like
connections (with ties in size) and the capture whose first connection is judged not
Kafka, forgotten, and decoded again once its broker is learned.
"""

from __future__ import annotations

import struct

import pytest

from capture_edit import packets
from convsim import Sim, merge
from test_nothing_lost import _first_connection_unknown_keys

import kwsniff.engine as engine_mod
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka.model import PAIRED
from kwsniff.tcp import TcpEventStream, TcpOptions
from kwsniff.tls.keylog import KeyLog
from test_byte_accounting import PCAPS, accounted


def _run(pkts: list[tuple], follow: bool, max_connections: int,
         **opts: object) -> tuple[Engine, list[tuple], int]:
    """Decode with the sans-IO driver; ``follow``: hand the engine the TCP layer's
    forgotten connections. Returns the engine, the exchanges as tuples and the largest
    number of not-Kafka connections the engine held at once."""
    eng = Engine(EngineOptions(tcp=TcpOptions(max_connections=max_connections), **opts))
    tcp = TcpEventStream(pkts, eng.options.tcp)
    if follow:
        eng.follow(tcp)
    out = []
    most = 0
    for ev in tcp:
        out += eng.feed_event(ev)
        most = max(most, len(eng._other))
    out += eng.finish()
    rows = [(e.index, e.stream, e.api_key, e.correlation_id, e.status) for e in out]
    return eng, rows, most


def _same(pkts: list[tuple], max_connections: int, **opts: object) -> tuple[Engine, int, int]:
    """Both ways give the same summary and exchanges: (folding engine, its most held,
    the most held by the engine that keeps everything)."""
    kept, rows_kept, most_kept = _run(pkts, False, max_connections, **opts)
    folded, rows_folded, most_folded = _run(pkts, True, max_connections, **opts)
    assert rows_folded == rows_kept
    assert folded.summary.to_dict() == kept.summary.to_dict()
    return folded, most_folded, most_kept


def _http(n: int) -> list[tuple]:
    """``n`` short HTTP-like connections, sizes repeating (ties); each even one closes
    after the next, of its size (judged, at its close, after the next, and forgotten
    before it: the TCP layer forgets closed connections in the order they opened)."""
    sims = []
    for i in range(n):
        sim = Sim(client=(f"10.1.{i // 250}.{i % 250 + 1}", 40000 + i), server=("10.2.0.1", 8080),
                  t0=1_700_000_000.0 + i * 0.01)
        sim.c(b"GET /x HTTP/1.1\r\nHost: example\r\n" + b"X: y\r\n" * (i // 2 % 7) +
              b"\r\n")
        sim.s(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc")
        if i % 2 == 0:
            sim.wait(0.015)
        sim.fin()
        sims.append(sim)
    return merge(*sims)


@pytest.mark.parametrize("start_bytes", [0, 20_000, 64 << 20])
def test_not_kafka_connections_are_counted_when_forgotten(
        monkeypatch: pytest.MonkeyPatch, start_bytes: int) -> None:
    """The largest rows (ties in the order judged) and every byte, with the kept starts
    of none, some or all of them (a forgotten connection with a kept start is counted
    when its start is dropped)."""
    monkeypatch.setattr(engine_mod, "MAX_NOT_KAFKA_LISTED", 5)
    monkeypatch.setattr(engine_mod, "MAX_START_BYTES", start_bytes)
    pkts = _http(120)
    eng, most, most_kept = _same(pkts, 8)
    s = eng.summary
    assert s.not_kafka_connections == 120 and len(s.not_kafka) == 5
    assert [r["bytes"] for r in s.not_kafka] == sorted((r["bytes"] for r in s.not_kafka),
                                                       reverse=True)
    assert most_kept == 120
    if start_bytes == 0:
        assert most <= 8 + 1          # the TCP layer's table (and the one judged last)
    elif start_bytes < 64 << 20:
        assert most < 120
    assert eng._other == {} and eng._gone == set() and eng._other_top == []


def _replicated(name: str, copies: int, server_port: int | None = None) -> list[tuple]:
    """``copies`` copies of a capture one after the other, each on other client ports
    (and the broker on ``server_port`` if given). Ethernet/IPv4/TCP only."""
    pkts = packets(name)
    broker = 9092
    span = pkts[-1][1] - pkts[0][1] + 1.0
    out = []
    frame = 0
    for k in range(copies):
        for _f, ts, lt, data, orig in pkts:
            assert lt == 1 and data[12:14] == b"\x08\x00" and data[23] == 6
            tcp = 14 + (data[14] & 15) * 4
            sport, dport = struct.unpack_from(">HH", data, tcp)
            ports = [sport, dport]
            for j in (0, 1):
                if ports[j] == broker:
                    ports[j] = server_port or broker
                else:
                    ports[j] = 20000 + (ports[j] + 97 * k) % 40000
            b = bytearray(data)
            struct.pack_into(">HH", b, tcp, *ports)
            frame += 1
            out.append((frame, ts + k * span, lt, bytes(b), orig))
    return out


@pytest.mark.parametrize("capture", ["tls/tls13-aes128.pcap", "tls/tls12-cbc.pcap"])
@pytest.mark.parametrize("keys", [False, True])
def test_tls_connections_are_counted_when_forgotten(capture: str, keys: bool) -> None:
    log = None
    if keys:
        log = KeyLog()
        log.add_text((PCAPS / capture).with_suffix(".keys").read_text())
    pkts = _replicated(capture, 12)
    eng, _most, _ = _same(pkts, 2, tls_keylog=log)
    s = eng.summary
    assert s.tls_bytes > 0 and accounted(s) == sum(
        len(d) - 14 - (d[14] & 15) * 4 - (d[14 + (d[14] & 15) * 4 + 12] >> 4) * 4
        for _f, _ts, _lt, d, _o in pkts)
    if keys:
        assert s.tls_decrypted_bytes > 0
    assert eng._tls_done == {}
    # the broker on a port that is not Kafka's: TLS judged not Kafka
    other = _replicated(capture, 12, server_port=8443)
    eng, most, most_kept = _same(other, 2)
    assert eng.summary.not_kafka_connections == most_kept > most


def test_connection_forgotten_while_its_start_is_kept_is_decoded_again() -> None:
    """Its broker is learned after the TCP layer forgot it: decoded again as when kept."""
    pkts, mine = _first_connection_unknown_keys()
    eng, _most, _ = _same(pkts, 1)
    s = eng.summary
    assert s.late_kafka_connections >= 1
    assert any("connection 0 (closed)" in p and "decoded again" in p for p in s.problems)
    eng, rows, _ = _run(pkts, True, 1)
    got = [(r[2], r[3], r[4]) for r in rows if r[1] == 0]
    assert got == [(500, e.correlation_id, PAIRED) for e in mine]
