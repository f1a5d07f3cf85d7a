"""iter_tcp_events end to end over capture files, cross-checked with tshark."""

from __future__ import annotations

import shutil
import struct
import subprocess
from collections import Counter, defaultdict

import pytest
from scapy.layers.inet import IP, TCP, UDP, fragment
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt
from scapy.layers.l2 import CookedLinuxV2, Dot1AD, Dot1Q, Ether
from scapy.packet import Raw
from tcp_helpers import check_contract, tshark_streams

from kwsniff.capture import linktypes as lt
from kwsniff.capture import open_capture
from kwsniff.capture.writer import PcapngWriter, PcapWriter
from kwsniff.tcp import StreamData, StreamGap, TcpOptions, iter_tcp_events

MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


class Peer:
    """Builds the TCP packets one endpoint sends, tracking sequence numbers."""

    def __init__(self, ip_layer, sport, dport, isn):
        self.ip, self.sport, self.dport, self.seq, self.isn = ip_layer, sport, dport, isn, isn
        self.other = None

    def pkt(self, flags, data=b"", seq=None):
        ack = self.other.seq if self.other else 0
        tcp = TCP(sport=self.sport, dport=self.dport, flags=flags,
                  seq=self.seq if seq is None else seq, ack=ack if "A" in flags else 0)
        p = self.ip.copy() / tcp
        if data:
            p = p / Raw(data)
        if seq is None:
            self.seq = (self.seq + len(data) + (1 if ("S" in flags or "F" in flags) else 0)) \
                & 0xFFFFFFFF
        return p


def conversation(cip, sip, cport, isn_c, isn_s, messages):
    c = Peer(cip, cport, 9092, isn_c)
    s = Peer(sip, 9092, cport, isn_s)
    c.other, s.other = s, c
    pkts = [c.pkt("S"), s.pkt("SA"), c.pkt("A")]
    for req, resp in messages:
        pkts += [c.pkt("PA", req), s.pkt("PA", resp)]
    return c, s, pkts


def tshark_stream_counts(path):
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "tcp.stream",
                          "-e", "tcp.srcport", "-e", "tcp.len", "-e", "frame.number"],
                         capture_output=True, text=True, check=True).stdout
    packets = Counter()
    nbytes = defaultdict(int)
    for line in out.splitlines():
        stream, sport, tcplen, _frame = line.split("\t")
        if stream:
            packets[int(stream)] += 1
            nbytes[int(stream), int(sport)] += int(tcplen)
    return packets, nbytes


def decode(path, options=None):
    with open_capture(path) as src:
        stream = iter_tcp_events(src, options)
        events = list(stream)
    check_contract(events)
    return events, stream.stats


def data_by_conn(events):
    out = defaultdict(bytes)
    gaps = []
    for e in events:
        if isinstance(e, StreamData):
            out[e.conn.index, e.direction] += e.data
        elif isinstance(e, StreamGap):
            gaps.append(e)
    return dict(out), gaps


def build_mixed_capture(path):
    """Several link types in one pcapng, with reordering, retransmission, VLANs, IPv6,
    fragments, port reuse and non-TCP packets."""
    w = PcapngWriter(path)
    eth = w.add_interface(lt.ETHERNET)
    sll2 = w.add_interface(lt.LINUX_SLL2, tsresol=9)
    null = w.add_interface(lt.NULL)
    ts = [1_700_000_000.0]

    def put(iface, pkt):
        ts[0] += 0.001
        w.write(ts[0], bytes(pkt), interface=iface)

    # connection 0: Ethernet + QinQ, with a reordered pair and a retransmission
    c, s, pkts = conversation(IP(src="10.0.0.1", dst="10.0.0.2"),
                              IP(src="10.0.0.2", dst="10.0.0.1"),
                              40001, 0xFFFFFF00, 7, [(b"req-one" * 20, b"resp-one" * 30)])
    vlan = Ether(**MACS) / Dot1AD(vlan=3) / Dot1Q(vlan=4)
    for p in pkts:
        put(eth, vlan / p)
    a = c.pkt("PA", b"A" * 300)
    b = c.pkt("PA", b"B" * 300)
    put(eth, vlan / b)
    put(eth, vlan / a)
    put(eth, vlan / a)                                   # retransmission
    put(eth, vlan / s.pkt("PA", b"ok"))
    # connection 1: IPv6 with a destination-options header over SLL2
    c6, s6, pkts6 = conversation(IPv6(src="2001:db8::1", dst="2001:db8::2") / IPv6ExtHdrDestOpt(),
                                 IPv6(src="2001:db8::2", dst="2001:db8::1"), 40002, 1, 2,
                                 [(b"six" * 100, b"xis" * 50)])
    for p in pkts6:
        put(sll2, CookedLinuxV2(proto=0x86DD) / p)
    # non-TCP packets
    put(eth, Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.9") / UDP(sport=5, dport=53) / b"q")
    # connection 2: loopback, with a fragmented request
    c2, s2, pkts2 = conversation(IP(src="127.0.0.1", dst="127.0.0.1"),
                                 IP(src="127.0.0.1", dst="127.0.0.1"), 40003, 100, 200, [])
    for p in pkts2:
        put(null, struct.pack("<I", 2) + bytes(p))
    big = c2.pkt("PA", bytes(range(256)) * 4)
    big[IP].id = 777
    for frag in fragment(big, fragsize=400):
        put(null, struct.pack("<I", 2) + bytes(frag))
    put(null, struct.pack("<I", 2) + bytes(s2.pkt("PA", b"fragment ok")))
    put(null, struct.pack("<I", 2) + bytes(c2.pkt("FA")))
    put(null, struct.pack("<I", 2) + bytes(s2.pkt("FA")))
    put(null, struct.pack("<I", 2) + bytes(c2.pkt("A")))
    # connection 3: the same 4-tuple as connection 2, reused after the close
    c3, s3, pkts3 = conversation(IP(src="127.0.0.1", dst="127.0.0.1"),
                                 IP(src="127.0.0.1", dst="127.0.0.1"), 40003, 9000, 9100,
                                 [(b"again", b"yes")])
    for p in pkts3:
        put(null, struct.pack("<I", 2) + bytes(p))
    put(null, struct.pack("<I", 2) + bytes(c3.pkt("R")))
    w.close()


def test_mixed_capture_streams(tmp_path):
    path = tmp_path / "mixed.pcapng"
    build_mixed_capture(path)
    events, stats = decode(path)
    data, gaps = data_by_conn(events)
    assert gaps == []
    assert data == {
        (0, 0): b"req-one" * 20 + b"A" * 300 + b"B" * 300, (0, 1): b"resp-one" * 30 + b"ok",
        (1, 0): b"six" * 100, (1, 1): b"xis" * 50,
        (2, 0): bytes(range(256)) * 4, (2, 1): b"fragment ok",
        (3, 0): b"again", (3, 1): b"yes",
    }
    conns = {e.conn.index: e.conn for e in events}
    assert [conns[i].close_reason for i in range(4)] == ["end of capture", "end of capture",
                                                         "fin", "rst"]
    assert all(conns[i].a_is_client for i in range(4))
    assert conns[1].a == ("2001:db8::1", 40002)
    assert stats.connections == 4 and stats.non_tcp_packets == 1
    assert stats.retransmissions == 1 and stats.out_of_order == 1
    assert stats.fragments_reassembled == 1 and stats.problems == ()


@needs_tshark
def test_connection_indices_and_counts_match_tshark(tmp_path):
    path = tmp_path / "mixed.pcapng"
    build_mixed_capture(path)
    events, _ = decode(path)
    conns = {e.conn.index: e.conn for e in events}
    packets, nbytes = tshark_stream_counts(path)
    assert sorted(conns) == sorted(packets)
    for idx, conn in conns.items():
        # tshark counts a reassembled IPv4 datagram once (on its last fragment), as we do
        assert sum(conn.packets) == packets[idx], idx
        assert conn.bytes == [nbytes[idx, conn.a[1]], nbytes[idx, conn.b[1]]], idx


def test_snaplen_capture_has_exact_gaps(tmp_path):
    path = tmp_path / "snap.pcap"
    c, s, pkts = conversation(IP(src="10.0.0.1", dst="10.0.0.2"),
                              IP(src="10.0.0.2", dst="10.0.0.1"), 40000, 5, 6,
                              [(b"r" * 200, b"R" * 1000), (b"small", b"tiny")])
    snap = 100
    with PcapWriter(path, snaplen=snap) as w:
        for i, p in enumerate(pkts):
            raw = bytes(Ether(**MACS) / p)
            w.write(1.0 + i, raw[:snap], len(raw))
    events, stats = decode(path)
    data, gaps = data_by_conn(events)
    head = snap - 14 - 20 - 20
    assert data[0, 0] == b"r" * head + b"small"
    assert data[0, 1] == b"R" * head + b"tiny"
    assert [(g.direction, g.offset, g.length, g.reason) for g in gaps] == [
        (0, head, 200 - head, "snaplen"), (1, head, 1000 - head, "snaplen")]
    assert stats.gap_bytes == 200 - head + 1000 - head


def test_capture_loss_is_a_gap_the_peer_acknowledged(tmp_path):
    path = tmp_path / "loss.pcap"
    c, s, pkts = conversation(IP(src="10.0.0.1", dst="10.0.0.2"),
                              IP(src="10.0.0.2", dst="10.0.0.1"), 40000, 5, 6, [])
    p1, lost, p3 = c.pkt("PA", b"one"), c.pkt("PA", b"lost"), c.pkt("PA", b"three")
    ack = s.pkt("A")
    with PcapWriter(path) as w:
        for i, p in enumerate(pkts + [p1, p3, ack]):
            w.write(1.0 + i, bytes(Ether(**MACS) / p))
    assert lost is not None
    events, _ = decode(path)
    data, gaps = data_by_conn(events)
    assert data[0, 0] == b"onethree"
    assert [(g.offset, g.length, g.reason, g.frame) for g in gaps] == [
        (3, 4, "acked but not captured", 5)]


def test_stats_snapshot_while_iterating(tmp_path):
    path = tmp_path / "s.pcap"
    _, _, pkts = conversation(IP(src="10.0.0.1", dst="10.0.0.2"),
                              IP(src="10.0.0.2", dst="10.0.0.1"), 40000, 5, 6, [(b"a", b"b")])
    with PcapWriter(path) as w:
        for i, p in enumerate(pkts):
            w.write(1.0 + i, bytes(Ether(**MACS) / p))
    with open_capture(path) as src:
        stream = iter_tcp_events(src, TcpOptions(max_problems=5))
        it = iter(stream)
        first = next(it)
        assert first.__class__.__name__ == "ConnectionOpened"
        assert stream.stats.packets == 1 and stream.stats.connections == 1
        rest = list(it)
    assert stream.stats.packets == 5 and stream.stats.tcp_packets == 5
    assert rest[-1].__class__.__name__ == "ConnectionClosed"


def _v4():
    return IP(src="10.3.0.1", dst="10.3.0.2"), IP(src="10.3.0.2", dst="10.3.0.1")


def _v6():
    return IPv6(src="2001:db8::a", dst="2001:db8::b"), IPv6(src="2001:db8::b", dst="2001:db8::a")


LINK_MATRIX = {
    # name: (linktype, framing function(ip packet bytes, is_v6) -> frame bytes, IP family)
    "ethernet": (lt.ETHERNET, lambda p, v6: bytes(Ether(**MACS, type=0x0800)) + p, _v4),
    "ethernet-ipv6": (lt.ETHERNET, lambda p, v6: bytes(Ether(**MACS, type=0x86DD)) + p, _v6),
    "802.1q": (lt.ETHERNET, lambda p, v6: bytes(Ether(**MACS) / Dot1Q(vlan=7, type=0x0800)) + p,
               _v4),
    "qinq-ipv6": (lt.ETHERNET, lambda p, v6: bytes(Ether(**MACS) / Dot1AD(vlan=1)
                                                   / Dot1Q(vlan=2, type=0x86DD)) + p, _v6),
    "sll": (lt.LINUX_SLL, lambda p, v6: struct.pack("!HHH8sH", 0, 1, 6, b"\x02" * 8, 0x0800)
            + p, _v4),
    "sll2-ipv6": (lt.LINUX_SLL2, lambda p, v6: bytes(CookedLinuxV2(proto=0x86DD)) + p, _v6),
    "null-le": (lt.NULL, lambda p, v6: struct.pack("<I", 2) + p, _v4),
    "null-be-ipv6": (lt.NULL, lambda p, v6: struct.pack(">I", 30) + p, _v6),
    "loop": (lt.LOOP, lambda p, v6: struct.pack(">I", 2) + p, _v4),
    "raw": (lt.RAW, lambda p, v6: p, _v4),
    "raw-ipv6": (lt.RAW, lambda p, v6: p, _v6),
    "ipv4": (lt.IPV4, lambda p, v6: p, _v4),
    "ipv6": (lt.IPV6, lambda p, v6: p, _v6),
}


@pytest.mark.parametrize("name", list(LINK_MATRIX))
def test_link_type_matrix_end_to_end(tmp_path, name):
    """Every link type, through a file, with reordering and a retransmission: the exact
    streams come out, and tshark (when installed) rebuilds the same streams."""
    linktype, frame_of, family = LINK_MATRIX[name]
    cip, sip = family()
    v6 = isinstance(cip, IPv6)
    c, s, pkts = conversation(cip, sip, 41000, 0xFFFFFFF0, 3,
                              [(b"request " * 40, b"response " * 90)])
    first, second = c.pkt("PA", b"1" * 700), c.pkt("PA", b"2" * 500)
    pkts += [second, first, first, s.pkt("A"), c.pkt("FA"), s.pkt("FA"), c.pkt("A")]
    path = tmp_path / f"{name}.pcap"
    with PcapWriter(path, linktype) as w:
        for i, p in enumerate(pkts):
            w.write(1_700_000_000 + i / 100, frame_of(bytes(p), v6))
    events, stats = decode(path)
    data, gaps = data_by_conn(events)
    assert gaps == [] and stats.problems == () and stats.non_tcp_packets == 0
    assert data == {(0, 0): b"request " * 40 + b"1" * 700 + b"2" * 500,
                    (0, 1): b"response " * 90}
    conn = events[0].conn
    assert conn.close_reason == "fin" and conn.a_is_client is True
    assert stats.retransmissions == 1 and stats.out_of_order == 1


@pytest.mark.slow
@needs_tshark
@pytest.mark.parametrize("name", list(LINK_MATRIX))
def test_link_type_matrix_agrees_with_tshark(tmp_path, name):
    """tshark rebuilds the same streams from the same files (independent parser)."""
    linktype, frame_of, family = LINK_MATRIX[name]
    cip, sip = family()
    c, s, pkts = conversation(cip, sip, 41000, 0xFFFFFFF0, 3, [(b"q" * 900, b"r" * 3000)])
    first, second = c.pkt("PA", b"1" * 700), c.pkt("PA", b"2" * 500)
    pkts += [second, first, first, s.pkt("A")]
    path = tmp_path / f"{name}.pcap"
    with PcapWriter(path, linktype) as w:
        for i, p in enumerate(pkts):
            w.write(1_700_000_000 + i / 100, frame_of(bytes(p), isinstance(cip, IPv6)))
    events, _ = decode(path)
    data, _ = data_by_conn(events)
    conn = events[0].conn
    assert tshark_streams(path) == {(conn.index, *conn.endpoints(d)[0]): payload
                                    for (_, d), payload in data.items()}
