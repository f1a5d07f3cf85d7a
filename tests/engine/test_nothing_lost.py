"""Nothing silently lost (issue 36): every request frame becomes an exchange, connections
not recognised as Kafka are reported, learned broker endpoints decode every connection to
them. Real captures from pcaps/ (edited copies) plus crafted corner cases."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import pytest

from capture_edit import PCAPS, decode, message_at, packets, patch
from convsim import Sim, frame, kreq, kresp, merge, write_pcap
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from kwsniff.cli import main
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka.model import PAIRED, UNANSWERED

AIOKAFKA_PORT = json.loads((PCAPS / "aiokafka.json").read_text())["brokers"][0]["port"]


def _cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[str, str]:
    assert main(argv) == 0
    return capsys.readouterr()


def _header(key: int, version: int, corr: int, client_id: bytes = b"cli") -> bytes:
    return struct.pack(">hhih", key, version, corr, len(client_id)) + client_id


def _tcp_payload_bytes(pkts: list[tuple]) -> dict[tuple, int]:
    """TCP payload bytes per connection (unordered endpoint pair), from the Ethernet,
    IPv4 and TCP headers alone (independent of kwsniff's TCP layer)."""
    out: dict[tuple, int] = {}
    for _f, _ts, _lt, data, _orig in pkts:
        if data[12:14] != b"\x08\x00" or data[23] != 6:
            continue
        ihl = (data[14] & 15) * 4
        total = struct.unpack_from(">H", data, 16)[0]
        tcp = 14 + ihl
        doff = (data[tcp + 12] >> 4) * 4
        src = (data[26:30], struct.unpack_from(">H", data, tcp)[0])
        dst = (data[30:34], struct.unpack_from(">H", data, tcp + 2)[0])
        key = tuple(sorted((src, dst)))
        out[key] = out.get(key, 0) + total - ihl - doff
    return out


# -- every request frame becomes an exchange ----------------------------------------------

@pytest.mark.parametrize("key", [500, 501, 502, 10000, 32767])
def test_unknown_api_key_in_a_real_capture_is_exported_with_its_raw_body(
        key: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pkts = packets("aiokafka.pcap")
    _, base = decode(pkts)
    victim = next(ex for ex in base if ex.status == PAIRED and ex.request.frame_first ==
                  ex.request.frame_last and ex.api_key != 18 and ex.request.body_offset
                  < len(ex.request.raw))
    i, at = message_at(pkts, victim.request.raw, victim.request.frame_first)
    edited = patch(pkts, i, at + 4, struct.pack(">h", key))
    _, out = decode(edited)
    assert len(out) == len(base)
    ex = next(e for e in out if e.stream == victim.stream and
              e.correlation_id == victim.correlation_id)
    assert ex.api_key == key and ex.request.body is None and ex.request.problems
    path = tmp_path / "unknown.pcap"
    write_pcap(path, edited)
    _cli(capsys, ["export", str(path), "-o", str(tmp_path / "x.jsonl")])
    lines = [json.loads(x) for x in (tmp_path / "x.jsonl").read_text().splitlines()]
    obj = next(o for o in lines if o.get("kind") == "exchange" and o["stream"] ==
               victim.stream and o["correlation_id"] == victim.correlation_id)
    assert obj["api_name"] == f"Unknown({key})"
    assert obj["problems"]
    body = victim.request.raw[ex.request.body_offset:]
    assert base64.b64decode(obj["request_raw"]["base64"]) == body
    assert all("request_raw" not in o for o in lines
               if o.get("kind") == "exchange" and o is not obj)
    text, _ = _cli(capsys, ["decode", "-V", "-Y", f"correlation_id == "
                            f"{victim.correlation_id} && stream == {victim.stream}",
                            str(path)])
    assert f"Unknown({key})" in text and body[:16].hex() in text.replace(" ", "")


def _without_handshake(pkts: list[tuple]) -> list[tuple]:
    """``pkts`` without their SYN and SYN-ACK packets (as if the capture began after)."""
    out = []
    for p in pkts:
        d = p[3]
        t = 14 + (d[14] & 15) * 4
        if not d[t + 13] & 0x02:
            out.append(p)
    return out


@pytest.mark.parametrize("key", [500, 10001])
def test_unknown_api_key_as_first_frame_without_handshake_is_exported(key: int) -> None:
    """The first request of every connection of a real capture gets an unknown key and
    the handshakes are cut: each is still an exchange, paired with its real response."""
    pkts = packets("aiokafka.pcap")
    _, base = decode(pkts)
    firsts = {}
    for ex in base:
        if ex.request is not None:
            firsts.setdefault(ex.stream, ex)
    edited = pkts
    for ex in firsts.values():
        i, at = message_at(edited, ex.request.raw, ex.request.frame_first)
        edited = patch(edited, i, at + 4, struct.pack(">h", key))
    eng, out = decode(_without_handshake(edited))
    assert len(out) == len(base)
    for stream, ex in firsts.items():
        got = next(e for e in out if e.stream == stream and
                   e.correlation_id == ex.correlation_id)
        assert got.api_key == key and got.status == PAIRED
        assert any(f"unknown API key {key}" in p for p in got.request.problems)
    assert eng.summary.skipped_bytes == 0


@pytest.mark.parametrize("with_response", [False, True])
def test_lone_unknown_api_key_request_on_a_kafka_port_is_exported(with_response: bool) -> None:
    """A connection without handshake that holds only a request of an unknown key
    (a real ApiVersions request with its key changed), and maybe its real response."""
    _, base = decode(packets("aiokafka.pcap"))
    first = base[0]
    raw = struct.pack(">h", 10001) + first.request.raw[2:]
    sim = Sim(client=("127.0.0.1", 40001), server=("127.0.0.1", AIOKAFKA_PORT),
              handshake=False)
    sim.c(struct.pack(">i", len(raw)) + raw)
    if with_response:
        sim.s(struct.pack(">i", len(first.response.raw)) + first.response.raw)
    eng, out = decode(merge(sim), ports=(AIOKAFKA_PORT,))
    assert [(e.api_key, e.correlation_id) for e in out] == [(10001, first.correlation_id)]
    assert out[0].status == (PAIRED if with_response else UNANSWERED)
    assert eng.summary.not_kafka_connections == 0 and eng.summary.skipped_bytes == 0


@pytest.mark.parametrize("name, expect", [
    (struct.pack(">h", -1), "null in a non-nullable field"),
    (struct.pack(">h", -2), "negative length -2"),
])
def test_odd_string_gives_one_exchange_with_the_problem_at_the_field(name: bytes,
                                                                       expect: str) -> None:
    sim = Sim()
    sim.c(frame(_header(3, 1, 5) + struct.pack(">i", 1) + name))
    sim.fin()
    eng, out = decode(merge(sim))
    assert len(out) == 1 and out[0].status == UNANSWERED
    assert out[0].api_key == 3
    assert any("Topics[].Name" in p and expect in p for p in out[0].request.problems)
    assert eng.summary.kafka_connections == 1 and eng.summary.not_kafka_connections == 0


def test_non_ascii_name_is_one_exchange() -> None:
    sim = Sim()
    sim.c(frame(_header(3, 1, 5) + struct.pack(">ih", 1, 4) + b"\xff\xfe\xc3\x28"))
    sim.fin()
    _, out = decode(merge(sim))
    assert len(out) == 1 and out[0].request.body["Topics"][0]["Name"].endswith("(")


def test_one_packet_connection_with_trailing_bytes_is_an_unanswered_exchange() -> None:
    """The first request of a real connection, alone (no handshake, no response), with
    three bytes after its body inside the frame."""
    pkts = packets("aiokafka.pcap")
    _, base = decode(pkts)
    first = base[0]
    raw = first.request.raw + b"xyz"
    sim = Sim(client=("127.0.0.1", 40001), server=("127.0.0.1", AIOKAFKA_PORT),
              handshake=False)
    sim.c(struct.pack(">i", len(raw)) + raw)
    eng, out = decode(merge(sim), ports=(AIOKAFKA_PORT,))
    assert len(out) == 1
    ex = out[0]
    assert ex.status == UNANSWERED and ex.api_key == first.api_key
    assert ex.correlation_id == first.correlation_id
    assert any("3 bytes left over" in p for p in ex.request.problems)


@pytest.mark.parametrize("after", [b"abcd", b"\x00\x00\x00\x10abc"])
def test_one_packet_connection_with_trailing_bytes_inside_and_after_the_frame(
        after: bytes) -> None:
    """As above, and bytes after the frame too (too few for a message, or the start of
    one): the request is still an exchange with its problem, the bytes after it are
    counted and said."""
    pkts = packets("aiokafka.pcap")
    _, base = decode(pkts)
    first = base[0]
    raw = first.request.raw + b"xyz"
    sim = Sim(client=("127.0.0.1", 40001), server=("127.0.0.1", AIOKAFKA_PORT),
              handshake=False)
    sim.c(struct.pack(">i", len(raw)) + raw + after)
    eng, out = decode(merge(sim), ports=(AIOKAFKA_PORT,))
    assert [(e.api_key, e.correlation_id, e.status) for e in out] == \
        [(first.api_key, first.correlation_id, UNANSWERED)]
    assert any("3 bytes left over" in p for p in out[0].request.problems)
    s = eng.summary
    assert s.frame_bytes == 4 + len(raw)
    assert s.skipped_bytes + s.gap_bytes == len(after) and s.problems


# -- connections not recognised as Kafka ---------------------------------------------------

def test_not_kafka_connections_are_reported_with_bytes_and_a_port_hint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = str(PCAPS / "aiokafka.pcap")
    sizes = _tcp_payload_bytes(packets("aiokafka.pcap"))
    n = sum(1 for v in sizes.values() if v)
    total = sum(sizes.values())
    _, err = _cli(capsys, ["decode", "--no-detect", capture])
    want = (f"{n} TCP connection{'s' if n != 1 else ''} not recognised as Kafka (")
    assert want in err and f"127.0.0.1:{AIOKAFKA_PORT}" in err
    assert err.rstrip().endswith(f"try -p {AIOKAFKA_PORT}")
    out, _ = _cli(capsys, ["stats", "--no-detect", capture])
    assert want in out and f"try -p {AIOKAFKA_PORT}" in out
    _cli(capsys, ["export", "--no-detect", capture, "-o", str(tmp_path / "x.jsonl")])
    summary = json.loads((tmp_path / "x.jsonl").read_text().splitlines()[-1])
    assert summary["kind"] == "summary"
    assert summary["not_kafka_connections"] == n
    assert summary["not_kafka_bytes"] == total
    assert sum(r["bytes"] for r in summary["not_kafka"]) == total
    assert {r["server"] for r in summary["not_kafka"]} == {f"127.0.0.1:{AIOKAFKA_PORT}"}
    # with the port, none
    _, err = _cli(capsys, ["decode", "--no-detect", "-p", str(AIOKAFKA_PORT), capture])
    assert "not recognised" not in err


def test_other_protocols_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    data = Path(__file__).resolve().parents[1] / "conversation" / "data" / "nonkafka.pcap"
    _, err = _cli(capsys, ["decode", str(data)])
    assert "TCP connections not recognised as Kafka (" in err and "try -p " in err


@pytest.mark.parametrize("linktype, expect", [(0, "link type NULL/LOOP"),
                                              (147, "linktype 147 is not supported")])
def test_undecoded_link_type_is_named(linktype: int, expect: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    data = bytearray((PCAPS / "aiokafka.pcap").read_bytes())
    data[20:24] = linktype.to_bytes(4, "little")
    path = tmp_path / "lt.pcap"
    path.write_bytes(bytes(data))
    for argv in (["decode", str(path)], ["export", str(path), "-o", str(tmp_path / "x")]):
        _, err = _cli(capsys, argv)
        assert expect in err and "; 1 problem;" in err


# -- endpoint learning -------------------------------------------------------------------

def test_midstream_connection_before_learning_is_decoded() -> None:
    pkts = packets("midstream.pcap")
    eng, out = decode(pkts)
    s = eng.summary
    assert s.tcp_connections == 3 and s.kafka_connections == 3
    assert s.late_kafka_connections == 1 and s.not_kafka_connections == 0
    streams = {ex.stream for ex in out}
    assert len(streams) == 3
    producer = [ex for ex in out if ex.stream == 0]
    assert any(ex.api_key == 0 and ex.status == PAIRED for ex in producer)
    assert any("now known to be a Kafka broker" in p for p in s.problems)
    # the same bytes are accounted for as with the port given
    port = json.loads((PCAPS / "midstream.json").read_text())["brokers"][0]["port"]
    eng_p, out_p = decode(pkts, ports=(port,))
    assert len(out) == len(out_p)
    assert s.not_kafka_bytes + s.skipped_bytes + s.gap_bytes == \
        eng_p.summary.skipped_bytes + eng_p.summary.gap_bytes


def _api_versions(sim: Sim, corr: int) -> None:
    sim.c(kreq(ApiVersionsRequest, 1, corr))
    sim.s(kresp(ApiVersionsResponse, 1, corr, error_code=0, api_keys=[], throttle_time_ms=0))


def test_connection_judged_not_kafka_is_decoded_once_its_endpoint_is_learned() -> None:
    broker = ("10.0.0.9", 19999)
    late = Sim(client=("10.0.0.1", 40001), server=broker, t0=10.0)
    junk = bytes(range(256)) * 300                 # more than the detection budget
    late.c(junk)
    late.wait(1.0)
    _api_versions(late, 7)
    late.fin()
    proof = Sim(client=("10.0.0.3", 40003), server=broker, t0=10.5)
    for corr in (1, 2):
        _api_versions(proof, corr)
    proof.fin()
    eng, out = decode(merge(late, proof))
    s = eng.summary
    assert s.kafka_connections == 2 and s.late_kafka_connections == 1
    mine = [ex for ex in out if ex.stream == 0]
    assert [(ex.api_key, ex.correlation_id, ex.status) for ex in mine] == [(18, 7, PAIRED)]
    assert s.not_kafka_bytes + s.skipped_bytes == len(junk)
    assert s.not_kafka_connections == 0 and s.gap_bytes == 0


def test_undecided_connection_is_judged_as_on_a_kafka_port_once_learned() -> None:
    """A one-way connection (one request, no answer) to a non-standard port is Kafka
    once another connection shows its endpoint speaks Kafka."""
    broker = ("10.0.0.9", 19999)
    oneway = Sim(client=("10.0.0.1", 40001), server=broker, t0=10.0)
    oneway.c(kreq(ApiVersionsRequest, 1, 3))
    proof = Sim(client=("10.0.0.3", 40003), server=broker, t0=10.1)
    _api_versions(proof, 1)
    proof.fin()
    oneway.wait(1.0)
    oneway.fin()
    eng, out = decode(merge(oneway, proof))
    assert eng.summary.kafka_connections == 2
    assert [(ex.stream, ex.status) for ex in out if ex.stream == 0] == [(0, UNANSWERED)]


def _first_connection_unknown_keys(key: int = 500) -> tuple[list[tuple], list]:
    """aiokafka.pcap with every request of its first connection given an unknown API
    key: that connection (closed before the second one proves the broker) is judged
    not Kafka when it closes."""
    pkts = packets("aiokafka.pcap")
    _, base = decode(pkts)
    mine = [e for e in base if e.stream == 0 and e.request is not None]
    for ex in mine:
        i, at = message_at(pkts, ex.request.raw, ex.request.frame_first)
        pkts = patch(pkts, i, at + 4, struct.pack(">h", key))
    return pkts, mine


def test_connection_closed_before_learning_is_decoded_again() -> None:
    from test_byte_accounting import tcp_payload_bytes
    pkts, mine = _first_connection_unknown_keys()
    assert len(mine) == 2
    eng, out = decode(pkts)
    s = eng.summary
    got = [(e.api_key, e.correlation_id, e.status) for e in out if e.stream == 0]
    assert got == [(500, e.correlation_id, PAIRED) for e in mine]
    assert s.not_kafka_connections == 0 and s.late_kafka_connections == 1
    assert any("connection 0 (closed)" in p and "decoded again" in p for p in s.problems)
    assert s.frame_bytes + s.skipped_bytes + s.gap_bytes + s.not_kafka_bytes == \
        tcp_payload_bytes(pkts)
    assert s.not_kafka_bytes == 0


def test_kept_starts_of_connections_judged_not_kafka_are_bounded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Only START_KEEP bytes per direction are kept (the rest is counted as not Kafka
    and said); beyond MAX_START_BYTES the oldest starts are dropped (not decoded)."""
    from test_byte_accounting import tcp_payload_bytes
    import kwsniff.engine as engine_mod
    pkts, mine = _first_connection_unknown_keys()
    first = len(mine[0].request.raw) + 4
    monkeypatch.setattr(engine_mod, "START_KEEP", first)
    eng, out = decode(pkts)
    s = eng.summary
    got = [(e.api_key, e.correlation_id) for e in out if e.stream == 0]
    assert got == [(500, mine[0].correlation_id)]
    assert any("connection 0 (closed)" in p and "bytes after it were not kept" in p
               for p in s.problems)
    assert s.not_kafka_bytes > 0
    assert s.frame_bytes + s.skipped_bytes + s.gap_bytes + s.not_kafka_bytes == \
        tcp_payload_bytes(pkts)
    monkeypatch.setattr(engine_mod, "MAX_START_BYTES", first - 1)
    eng, out = decode(pkts)
    assert [e for e in out if e.stream == 0] == []
    assert eng.summary.not_kafka_connections == 1


def test_parked_connections_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the newest MAX_PARKED connections judged not Kafka can still be decoded."""
    import kwsniff.engine as engine_mod
    monkeypatch.setattr(engine_mod, "MAX_PARKED", 2)
    broker = ("10.0.0.9", 19999)
    sims = []
    for i in range(5):
        sim = Sim(client=("10.0.0.1", 41000 + i), server=broker, t0=10.0 + i * 0.01)
        sim.c(bytes(70_000))
        sim.wait(2.0)
        _api_versions(sim, 9)
        sim.fin()
        sims.append(sim)
    proof = Sim(client=("10.0.0.3", 40003), server=broker, t0=11.0)
    _api_versions(proof, 1)
    proof.fin()
    eng = Engine(EngineOptions())
    out = list(eng.run(merge(*sims, proof)))
    s = eng.summary
    assert s.late_kafka_connections == 2 and s.not_kafka_connections == 3
    assert sorted(ex.stream for ex in out if ex.correlation_id == 9) == [3, 4]


# -- resynchronisation of the request direction ------------------------------------------

def _later_pairs_kept(base: list, out: list, victim: object) -> tuple[int, int]:
    """(kept, total): pairs of the victim's connection whose request starts after it."""
    ends = {tuple(victim.client), tuple(victim.broker)}
    got = {(tuple(e.client), e.correlation_id): e.status for e in out}
    later = [e for e in base if e.status == PAIRED and {tuple(e.client), tuple(e.broker)} ==
             ends and e.request.frame_first > victim.request.frame_last]
    kept = sum(got.get((tuple(e.client), e.correlation_id)) == PAIRED for e in later)
    return kept, len(later)


@pytest.mark.parametrize("capture", ["rdkafka-consumer-group.pcap", "aiokafka.pcap",
                                     "kafka-python-0.11.pcap", "tansu-admin.pcap"])
@pytest.mark.parametrize("wrong", ["zero", "one more"])
def test_requests_after_a_wrong_request_length_are_recovered(capture: str, wrong: str) -> None:
    pkts = packets(capture)
    _, base = decode(pkts)
    reqs = [e for e in base if e.status == PAIRED]
    kept = total = 0
    for victim in reqs[len(reqs) // 4::max(1, len(reqs) // 6)][:5]:
        i, at = message_at(pkts, victim.request.raw, victim.request.frame_first)
        size = 0 if wrong == "zero" else len(victim.request.raw) + 1
        _, out = decode(patch(pkts, i, at, struct.pack(">i", size)))
        # pairs complete before the damage stay paired
        got = {(tuple(e.client), e.correlation_id): e.status for e in out}
        for e in base:
            if e.status == PAIRED and e.response.frame_last < victim.request.frame_first:
                assert got.get((tuple(e.client), e.correlation_id)) == PAIRED
        k, n = _later_pairs_kept(base, out, victim)
        kept += k
        total += n
    assert total > 0
    # (before the request framer checked headers: 0 of them; one more byte can cut
    # the next request's size prefix, which costs that request and sometimes the next)
    assert kept >= (total if wrong == "zero" else total // 2)


# -- a gap in the client's direction ---------------------------------------------------

@pytest.mark.parametrize("capture", ["rdkafka-consumer-group.pcap", "aiokafka.pcap",
                                     "tansu-admin.pcap", "rdkafka-idempotent-txn.pcap"])
def test_pairs_before_a_client_side_gap_stay_paired(capture: str) -> None:
    """Client packets dropped (one, or three in a row) at points spread over a real
    capture: every request that ended before the hole keeps its response, also when the
    response comes after the hole (the issue's "unanswered + orphan response" could not
    be reproduced; this guards it)."""
    pkts = packets(capture)
    _, base = decode(pkts)
    req_frames = sorted({f for e in base if e.request is not None
                         for f in range(e.request.frame_first, e.request.frame_last + 1)})
    checked = across = 0
    for i in range(0, len(req_frames), max(1, len(req_frames) // 8)):
        for width in (1, 3):
            drop = set(req_frames[i:i + width])
            _, out = decode([p for p in pkts if p[0] not in drop])
            got = {(tuple(e.client), e.correlation_id): e.status for e in out}
            for e in base:
                if e.status != PAIRED or e.correlation_id is None or \
                        e.request.frame_last >= min(drop) or \
                        drop & set(range(e.response.frame_first, e.response.frame_last + 1)):
                    continue
                checked += 1
                across += e.response.frame_first > min(drop)
                assert got.get((tuple(e.client), e.correlation_id)) == PAIRED, \
                    (sorted(drop), e.stream, e.correlation_id)
    assert checked > 0 and across > 0


# -- RST / FIN in the middle of a connection ---------------------------------------------

def _with_flag(pkts: list[tuple], index: int, flag: int) -> list[tuple]:
    f, ts, lt, data, orig = pkts[index]
    tcp = 14 + (data[14] & 15) * 4
    data = data[:tcp + 13] + bytes([data[tcp + 13] | flag]) + data[tcp + 14:]
    out = list(pkts)
    out[index] = (f, ts, lt, data, orig)
    return out


@pytest.mark.parametrize("capture", ["rdkafka-consumer-group.pcap", "aiokafka.pcap",
                                     "kafka-python-0.11.pcap", "tansu-admin.pcap"])
@pytest.mark.parametrize("flag", [0x04, 0x05, 0x01], ids=["RST", "RST+FIN", "FIN"])
def test_exchanges_after_a_rst_or_fin_in_the_middle_are_kept(capture: str, flag: int) -> None:
    pkts = packets(capture)
    eng0, base = decode(pkts)
    paired = [e for e in base if e.status == PAIRED]
    kept = total = 0
    for victim in paired[len(paired) // 4::max(1, len(paired) // 5)][:4]:
        i = victim.request.frame_last - 1          # the request's last data segment
        eng, out = decode(_with_flag(pkts, i, flag))
        k, n = _later_pairs_kept(base, out, victim)
        kept += k
        total += n
        assert eng.summary.tcp_connections == eng0.summary.tcp_connections
        if n:      # the TCP layer says what it did
            assert any("decoding continues" in p for p in eng.summary.tcp.problems)
    assert total > 0 and kept == total


@pytest.mark.parametrize("flag", [0x04, 0x05], ids=["RST", "RST+FIN"])
def test_a_reopened_connection_keeps_the_summary_of_each_part(flag: int) -> None:
    """RST (or RST+FIN) on a data segment in the middle of a real connection: the bytes after
    it reopen the connection; connection_summaries() has a summary for each part, and
    their requests add up to the connection's."""
    pkts = packets("rdkafka-consumer-group.pcap")
    eng0, base = decode(pkts)
    counts = {cs.stream: sum(cs.requests.values()) for cs in eng0.connection_summaries()}
    stream = max(counts, key=counts.get)
    mine = [e for e in base if e.stream == stream and e.status == PAIRED]
    victim = mine[len(mine) // 2]
    eng, _ = decode(_with_flag(pkts, victim.request.frame_last - 1, flag))
    assert eng.summary.reopened_connections == 1
    parts = [cs for cs in eng.connection_summaries() if cs.stream == stream]
    assert len(parts) == 2 and parts[0].last_ts < parts[1].last_ts
    assert all(cs.protocol == "kafka" and cs.requests for cs in parts)
    assert sum(sum(cs.requests.values()) for cs in parts) == counts[stream]
    assert len(eng.connection_summaries()) == len(eng0.connection_summaries()) + 1


def _slipped(pkts: list[tuple], index: int, delta: int) -> list[tuple]:
    """Packet ``index`` with its sequence number moved by ``delta`` (a 1-byte hole and a
    1-byte overlap, or the reverse)."""
    f, ts, lt, data, orig = pkts[index]
    tcp = 14 + (data[14] & 15) * 4
    seq = (struct.unpack_from(">I", data, tcp + 4)[0] + delta) & 0xFFFFFFFF
    data = data[:tcp + 4] + struct.pack(">I", seq) + data[tcp + 8:]
    out = list(pkts)
    out[index] = (f, ts, lt, data, orig)
    return out


@pytest.mark.parametrize("capture", ["rdkafka-consumer-group.pcap", "aiokafka.pcap",
                                     "kafka-python-0.11.pcap", "tansu-admin.pcap"])
def test_one_byte_sequence_slips_keep_most_later_exchanges(capture: str) -> None:
    """Both directions: a message's first segment moved one byte (its size prefix then
    loses or gains a byte in the next segment); the framers find the next message."""
    pkts = packets(capture)
    _, base = decode(pkts)
    paired = [e for e in base if e.status == PAIRED]
    kept = total = 0
    for victim in paired[len(paired) // 4::max(1, len(paired) // 5)][:4]:
        for msg in (victim.request, victim.response):
            for delta in (1, -1):
                _, out = decode(_slipped(pkts, msg.frame_first - 1, delta))
                k, n = _later_pairs_kept(base, out, victim)
                kept += k
                total += n
    assert total > 0
    # (before the framers checked the header of messages spanning segments: 3 of 232 on
    # these four captures; now 201)
    assert kept >= total * 0.8


# -- autodetection on a single frame ------------------------------------------------------

@pytest.mark.parametrize("capture", ["rdkafka-acks.pcap", "aiokafka.pcap",
                                     "kafka-python-0.11.pcap"])
@pytest.mark.parametrize("key", [0, 3, 18])
def test_a_lone_request_on_another_port_is_detected(capture: str, key: int) -> None:
    """A one-packet capture of a real request (no handshake, no response) on a port that
    is not a Kafka port."""
    _, base = decode(packets(capture))
    ex = next(e for e in base if e.api_key == key and e.request is not None
              and not e.request.problems)
    sim = Sim(client=("10.1.1.1", 50000), server=("10.1.1.2", 7777), handshake=False)
    sim.c(struct.pack(">i", len(ex.request.raw)) + ex.request.raw)
    eng, out = decode(merge(sim))
    assert [(e.api_key, e.api_version, e.correlation_id) for e in out] == \
        [(key, ex.api_version, ex.correlation_id)]
    assert eng.summary.kafka_connections == 1
    # a request with a byte too many is not taken for Kafka on another port
    sim = Sim(client=("10.1.1.1", 50000), server=("10.1.1.2", 7777), handshake=False)
    sim.c(struct.pack(">i", len(ex.request.raw) + 1) + ex.request.raw + b"\x00")
    eng, out = decode(merge(sim))
    assert out == [] and eng.summary.not_kafka_connections == 1
