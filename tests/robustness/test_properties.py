"""Property-based tests (hypothesis), one group per layer: round trips where the format
allows them, and the fuzz targets' invariants on generated and mutated inputs."""

from __future__ import annotations

import io

import cramjam
import lz4.frame
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz import wire
from fuzz.targets import load
from kwsniff.capture import open_capture
from kwsniff.kafka.compression import decompress
from kwsniff.kafka.framing import NO, SHORT, WEAK, Framer
from kwsniff.kafka.records import Records, parse_message_set_07
from kwsniff.tcp import StreamData, iter_tcp_events

FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def mutate(data: bytes, draw: st.DrawFn) -> bytes:
    """A few byte-level mutations chosen by hypothesis (it shrinks them too)."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(("flip", "set", "insert", "delete", "cut")))
        if not buf and op != "insert":
            continue
        i = draw(st.integers(0, max(len(buf) - 1, 0)))
        if op == "flip":
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            buf[i] = draw(st.sampled_from((0, 0x7F, 0x80, 0xFF)))
        elif op == "insert":
            buf[i:i] = draw(st.binary(max_size=8))
        elif op == "delete":
            del buf[i:i + draw(st.integers(1, 8))]
        else:
            del buf[i:]
    return bytes(buf)


def target_property(name: str):  # noqa: ANN201
    target = load(name)
    seeds = [bytes(s)[:target.MAX_LEN] for s in target.seeds()][:200]

    @FAST
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        if data.draw(st.booleans()):
            raw = data.draw(st.binary(max_size=512))
        else:
            raw = mutate(data.draw(st.sampled_from(seeds)), data.draw)
        target.one_input(raw)

    prop.__name__ = f"test_{name}_invariants_on_mutated_seeds"
    return prop


for _name in ("capture", "tcp_packets", "tcp_reassembly", "framing", "conversation",
              "protocol", "structs", "records", "gzip", "snappy", "lz4", "zstd",
              "legacy07", "embedded", "filter"):
    globals()[f"test_{_name}_invariants_on_mutated_seeds"] = target_property(_name)


# ----------------------------------------------------------------------------- round trips

packets_st = st.lists(st.binary(min_size=0, max_size=300), max_size=12)


@FAST
@given(packets_st, st.booleans(), st.sampled_from([1, 101, 113, 276]))
def test_capture_round_trip(payloads: list[bytes], pcapng: bool, linktype: int) -> None:
    pkts = [(wire.T0 + i * 0.25, p) for i, p in enumerate(payloads)]
    data = wire.pcap_bytes(pkts, linktype, pcapng=pcapng)
    with open_capture(io.BytesIO(data)) as src:
        got = [(f, lt, bytes(d), o) for f, _ts, lt, d, o in src]
        assert not src.problems
    assert got == [(i, linktype, p, len(p)) for i, (_, p) in enumerate(pkts, 1)]


@FAST
@given(st.binary(min_size=1, max_size=3000), st.binary(max_size=2000),
       st.lists(st.integers(1, 700), min_size=1, max_size=20))
def test_tcp_any_segmentation_delivers_the_same_bytes(client: bytes, broker: bytes,
                                                      sizes: list[int]) -> None:
    conn = wire.Connection(broker=("10.0.0.2", 31337))
    conn.handshake()
    conn.send(False, client, sizes=sizes * (len(client) // sum(sizes) + 1))
    if broker:
        conn.send(True, broker, sizes=sizes[::-1] * (len(broker) // sum(sizes) + 1))
    conn.close()
    got = {0: bytearray(), 1: bytearray()}
    for ev in iter_tcp_events(wire.packet_tuples(conn.packets)):
        if type(ev) is StreamData:
            got[ev.direction] += ev.data
    assert bytes(got[0]) == client and bytes(got[1]) == broker


@FAST
@given(st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=15),
       st.lists(st.integers(1, 300), min_size=1, max_size=10))
def test_framing_recovers_every_frame_from_any_chunking(payloads: list[bytes],
                                                        sizes: list[int]) -> None:
    def check(buf: bytearray, pos: int, end: int) -> tuple[int, int]:
        if end - pos < 4:
            return SHORT, 0
        size = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
        return (WEAK, size) if 0 < size <= 1000 else (NO, 0)

    stream = b"".join(wire.frame(p) for p in payloads)
    fr = Framer(check, 1000, 4096)
    fr.start(True)
    frames = []
    pos = 0
    i = 0
    while pos < len(stream):
        n = sizes[i % len(sizes)]
        frames += fr.data(pos, stream[pos:pos + n], i + 1, float(i))
        pos += n
        i += 1
    frames += fr.finish()
    assert [f.raw for f in frames] == payloads
    assert fr.skipped_bytes == 0 and not fr.problems


@FAST
@given(st.binary(max_size=5000), st.sampled_from([1, 2, 3, 4]), st.integers(1, 6000))
def test_decompression_round_trip_and_limit(data: bytes, codec: int, limit: int) -> None:
    comp = {1: lambda d: wire.gzip_bytes(d), 2: lambda d: bytes(cramjam.snappy.compress_raw(d)),
            3: lz4.frame.compress, 4: zstandard.ZstdCompressor().compress}[codec](data)
    full = decompress(codec, comp, 1 << 20)
    assert full.data == data and full.problem is None
    cut = decompress(codec, comp, limit)
    assert len(cut.data) <= limit
    assert data.startswith(cut.data)
    assert (cut.problem is None) == (len(data) <= limit)


record_st = st.tuples(st.one_of(st.none(), st.binary(max_size=30)),
                      st.one_of(st.none(), st.binary(max_size=60)),
                      st.lists(st.tuples(st.binary(max_size=10),
                                         st.one_of(st.none(), st.binary(max_size=10))),
                               max_size=3))


@FAST
@given(st.lists(record_st, min_size=1, max_size=20), st.sampled_from([0, 1, 2, 3, 4]))
def test_record_batch_round_trip(records: list[tuple], codec: int) -> None:
    encoded = [wire.v2_record(i, k, v, h) for i, (k, v, h) in enumerate(records)]
    payload = b"".join(encoded)
    if codec:
        payload = {1: wire.gzip_bytes, 2: lambda d: bytes(cramjam.snappy.compress_raw(d)),
                   3: lz4.frame.compress, 4: zstandard.ZstdCompressor().compress}[codec](payload)
    data = wire.v2_batch(encoded, attributes=codec, payload=payload, count=len(encoded))
    rs = Records(data).decode()
    assert not rs.problems, rs.problems
    got = [(r.key, r.value, [(k, None if v is None else bytes(v)) for k, v in r.headers])
           for r in rs.iter_records()]
    want = [(k, v, [(hk.decode("utf-8", "replace"), hv) for hk, hv in h]) for k, v, h in records]
    assert [(None if k is None else bytes(k), None if v is None else bytes(v), h)
            for k, v, h in got] == want
    assert all(b.crc_ok for b in rs.batches)


@FAST
@given(st.lists(st.binary(min_size=0, max_size=100), min_size=1, max_size=10), st.booleans())
def test_07_message_set_round_trip(payloads: list[bytes], compressed: bool) -> None:
    inner = b"".join(wire.msg07(p) for p in payloads)
    data = wire.msg07(wire.gzip_bytes(inner), 1) if compressed else inner
    rs = parse_message_set_07(data, 100).decode()
    assert not rs.problems
    assert [bytes(r.value) for r in rs.iter_records()] == payloads
    assert all(b.crc_ok for b in rs.batches)
