"""Byte accounting (issue 36): every byte of every TCP connection is in exactly one of a
Kafka frame, a counted skip, a counted hole, or a connection not recognised as Kafka.

Checked per connection on damaged copies of every capture in pcaps/ (dropped, cut,
slipped, flagged and overwritten packets), and for whole runs against the stream sizes
counted from the packets' IPv4/TCP headers alone."""

from __future__ import annotations

import random
import struct

import pytest

from capture_edit import PCAPS, decode, packets

# the captures with a manifest (the TLS ones, tools/make_tls_pcaps.py, have none: their
# TLS connections are followed by the TLS layer, whose bytes this accounting does not
# cover yet)
CAPTURES = sorted(p.name for p in PCAPS.glob("*.pcap") if p.with_suffix(".json").is_file())


def stream_extents(pkts: list[tuple]) -> int:
    """Bytes of all TCP directions, each from its first byte (after the SYN, else the
    first sequence number seen) to its last captured byte, holes included, copies once:
    from the Ethernet/IPv4/TCP headers, independent of kwsniff's TCP layer."""
    dirs: dict[bytes, list] = {}
    for _f, _ts, _lt, d, _o in pkts:
        if len(d) < 54 or d[12:14] != b"\x08\x00" or d[23] != 6:
            continue
        ihl = (d[14] & 15) * 4
        t = 14 + ihl
        n = struct.unpack_from(">H", d, 16)[0] - ihl - (d[t + 12] >> 4) * 4
        seq = struct.unpack_from(">I", d, t + 4)[0]
        st = dirs.setdefault(bytes(d[26:34]) + bytes(d[t:t + 4]), [None, 0])
        if d[t + 13] & 0x02:                       # SYN
            st[0] = (seq + 1) & 0xFFFFFFFF
            continue
        if n <= 0:
            continue
        if st[0] is None:
            st[0] = seq
        rel = (seq - st[0]) & 0xFFFFFFFF
        if rel < 1 << 31:
            st[1] = max(st[1], rel + n)
    return sum(end for _base, end in dirs.values())


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_byte_of_a_capture_is_accounted_for(capture: str) -> None:
    pkts = packets(capture)
    eng, _ = decode(pkts)
    s = eng.summary
    assert s.frame_bytes + s.skipped_bytes + s.gap_bytes + s.not_kafka_bytes == \
        stream_extents(pkts)
    assert s.frame_bytes > 0


def _damage(pkts: list[tuple], rnd: random.Random) -> list[tuple]:
    p = list(pkts)
    kind = rnd.choice(["drop", "cut end", "cut start", "slip", "rst", "fin", "byte", "size"])
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randrange(len(p))
        f, ts, lt, d, o = p[i]
        t = 14 + (d[14] & 15) * 4
        if kind == "drop":
            del p[i]
        elif kind == "cut end":
            p = p[:i + 1]
        elif kind == "cut start":
            p = p[i:]
        elif kind == "slip":
            seq = (struct.unpack_from(">I", d, t + 4)[0] + rnd.choice([-1, 1, 7])) & 0xFFFFFFFF
            p[i] = (f, ts, lt, d[:t + 4] + struct.pack(">I", seq) + d[t + 8:], o)
        elif kind in ("rst", "fin"):
            flag = 0x04 if kind == "rst" else 0x01
            p[i] = (f, ts, lt, d[:t + 13] + bytes([d[t + 13] | flag]) + d[t + 14:], o)
        elif len(d) > t + 24:
            j = rnd.randrange(t + 20, len(d)) if kind == "byte" else t + 20
            new = bytes([rnd.randrange(256)]) if kind == "byte" else struct.pack(
                ">i", rnd.choice([0, 1, 5, 1 << 20, -3]))
            p[i] = (f, ts, lt, d[:j] + new + d[j + len(new):], o)
    return p


@pytest.mark.parametrize("capture", CAPTURES)
def test_each_connection_accounts_for_its_bytes_on_damaged_copies(capture: str) -> None:
    rnd = random.Random(capture)
    pkts = packets(capture)
    for _ in range(12):
        eng, _ = decode(_damage(pkts, rnd))
        for cs in eng.connection_summaries():
            if cs.protocol not in ("kafka", "kafka-0.7"):
                continue
            assert cs.stream_bytes == cs.frame_bytes + cs.skipped_bytes + cs.gap_bytes + \
                cs.not_kafka_bytes, cs.stream
