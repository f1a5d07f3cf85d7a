"""PacketParser: link types, VLANs, IP options/extension headers, fragments, truncation.

Packets are built with scapy, an independent implementation of the same formats.
"""

from __future__ import annotations

import struct

import pytest
from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption_RR, fragment
from scapy.layers.inet6 import (
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
    fragment6,
)
from scapy.layers.ipsec import AH
from scapy.layers.l2 import ARP, CookedLinux, CookedLinuxV2, Dot1AD, Dot1Q, Ether
from scapy.packet import Raw

from kwsniff.capture import linktypes as lt
from kwsniff.tcp.packet import PacketParser, reverse_key, split_key

V4 = ("192.0.2.1", "198.51.100.7")
MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}
V6 = ("2001:db8::1", "2001:db8:ffff::2")
PAYLOAD = b"kafka-bytes-" * 10


def tcp(**kw):
    fields = {"sport": 51000, "dport": 9092, "seq": 0x01020304, "ack": 0xA0B0C0D0, "flags": "PA"}
    fields.update(kw)
    return TCP(**fields) / Raw(PAYLOAD)


def parse(linktype, pkt, orig_len=None, parser=None):
    data = bytes(pkt)
    p = parser or PacketParser()
    return p.parse(1, 0.0, linktype, data, len(data) if orig_len is None else orig_len), p


def check(seg, family=V4, payload=PAYLOAD, missing=0):
    assert seg is not None
    key, seq, ack, flags, data, miss = seg
    assert split_key(key) == (family[0], 51000, family[1], 9092)
    assert (seq, ack, flags) == (0x01020304, 0xA0B0C0D0, 0x18)
    assert data == payload
    assert miss == missing


def test_ethernet_ipv4_fast_path():
    seg, p = parse(lt.ETHERNET, Ether(**MACS) / IP(src=V4[0], dst=V4[1]) / tcp())
    check(seg)
    assert p.non_tcp == 0


def test_ethernet_padding_is_not_payload():
    pkt = Ether(**MACS) / IP(src=V4[0], dst=V4[1]) / TCP(sport=51000, dport=9092, flags="A")
    data = bytes(pkt) + b"\0" * (60 - len(bytes(pkt)))   # minimum Ethernet frame
    seg = PacketParser().parse(1, 0.0, 1, data, len(data))
    assert seg is not None and seg[4] == b"" and seg[5] == 0


def test_tcp_options_are_skipped():
    opts = [("MSS", 1460), ("NOP", None), ("WScale", 7), ("Timestamp", (1, 2))]
    seg, _ = parse(lt.ETHERNET, Ether(**MACS) / IP(src=V4[0], dst=V4[1]) / tcp(options=opts))
    check(seg)


@pytest.mark.parametrize("tags", [
    [Dot1Q(vlan=10)],
    [Dot1AD(vlan=100), Dot1Q(vlan=10)],
    [Dot1AD(vlan=100), Dot1Q(vlan=10), Dot1Q(vlan=20)],
], ids=["802.1Q", "QinQ", "three-tags"])
def test_vlan_tags(tags):
    pkt = Ether(**MACS)
    for tag in tags:
        pkt = pkt / tag
    seg, _ = parse(lt.ETHERNET, pkt / IP(src=V4[0], dst=V4[1]) / tcp())
    check(seg)
    seg6, _ = parse(lt.ETHERNET, pkt / IPv6(src=V6[0], dst=V6[1]) / tcp())
    check(seg6, V6)


def test_linux_cooked_v1_and_v2():
    seg, _ = parse(lt.LINUX_SLL, CookedLinux(proto=0x0800) / IP(src=V4[0], dst=V4[1]) / tcp())
    check(seg)
    seg, _ = parse(lt.LINUX_SLL2, CookedLinuxV2(proto=0x86DD) / IPv6(src=V6[0], dst=V6[1])
                   / tcp())
    check(seg, V6)
    seg, _ = parse(lt.LINUX_SLL2, CookedLinuxV2(proto=0x0800) / IP(src=V4[0], dst=V4[1]) / tcp())
    check(seg)


def test_linux_cooked_with_vlan_tag_kept():
    seg, _ = parse(lt.LINUX_SLL, CookedLinux(proto=0x8100) / Dot1Q(vlan=5)
                   / IP(src=V4[0], dst=V4[1]) / tcp())
    check(seg)


@pytest.mark.parametrize("linktype,order", [(lt.NULL, "<"), (lt.NULL, ">"), (lt.LOOP, ">")])
@pytest.mark.parametrize("family,ip", [(2, IP(src=V4[0], dst=V4[1])),
                                       (30, IPv6(src=V6[0], dst=V6[1])),
                                       (24, IPv6(src=V6[0], dst=V6[1])),
                                       (28, IPv6(src=V6[0], dst=V6[1])),
                                       (10, IPv6(src=V6[0], dst=V6[1]))])
def test_null_and_loop(linktype, order, family, ip):
    data = struct.pack(order + "I", family) + bytes(ip / tcp())
    seg = PacketParser().parse(1, 0.0, linktype, data, len(data))
    check(seg, V4 if family == 2 else V6)


@pytest.mark.parametrize("linktype", [lt.RAW, lt.RAW_DLT12, lt.RAW_DLT14, lt.IPV4, lt.IPV6])
def test_raw_ip(linktype):
    if linktype != lt.IPV6:
        check(parse(linktype, IP(src=V4[0], dst=V4[1]) / tcp())[0])
    if linktype != lt.IPV4:
        check(parse(linktype, IPv6(src=V6[0], dst=V6[1]) / tcp())[0], V6)


def test_ipv4_options():
    pkt = Ether(**MACS) / IP(src=V4[0], dst=V4[1], options=[IPOption_RR(routers=["1.2.3.4"] * 3)])
    assert (bytes(pkt)[14] & 0x0F) > 5
    check(parse(lt.ETHERNET, pkt / tcp())[0])


def test_ipv6_extension_headers():
    ext = (IPv6ExtHdrHopByHop() / IPv6ExtHdrRouting(addresses=["2001:db8::99"])
           / IPv6ExtHdrDestOpt())
    check(parse(lt.ETHERNET, Ether(**MACS) / IPv6(src=V6[0], dst=V6[1]) / ext / tcp())[0], V6)
    with_ah = (IPv6(src=V6[0], dst=V6[1]) / IPv6ExtHdrHopByHop()
               / AH(nh=6, payloadlen=4, spi=1, icv=b"\0" * 12))
    check(parse(lt.RAW, with_ah / tcp())[0], V6)


def test_ipv6_atomic_fragment():
    pkt = IPv6(src=V6[0], dst=V6[1]) / IPv6ExtHdrFragment(offset=0, m=0, id=7) / tcp()
    check(parse(lt.RAW, pkt)[0], V6)


def test_ipv4_fragments_reassembled_in_any_order_with_duplicates():
    whole = IP(src=V4[0], dst=V4[1], id=0x1234) / tcp()
    frags = fragment(whole, fragsize=24)
    assert len(frags) > 3
    p = PacketParser()
    order = [frags[2], frags[0], frags[2], *frags[3:], frags[1]]
    results = [p.parse(i, float(i), lt.RAW, bytes(f), len(bytes(f)))
               for i, f in enumerate(order, 1)]
    assert results[:-1] == [None] * (len(order) - 1)
    check(results[-1])
    assert p.fragments.reassembled == 1 and not p.problems.messages


def test_ipv6_fragments_reassembled():
    whole = IPv6(src=V6[0], dst=V6[1]) / IPv6ExtHdrFragment(id=99) / tcp()
    frags = fragment6(whole, 80)
    assert len(frags) > 1
    p = PacketParser()
    results = [p.parse(i, 0.0, lt.ETHERNET, bytes(Ether(**MACS) / f), len(bytes(Ether(**MACS) / f)))
               for i, f in enumerate(reversed(frags), 1)]
    check(results[-1], V6)


def test_incomplete_fragments_are_reported_at_finish():
    frags = fragment(IP(src=V4[0], dst=V4[1], id=0x42) / tcp(), fragsize=24)
    p = PacketParser()
    for i, f in enumerate(frags[:-1], 1):
        assert p.parse(i, 0.0, lt.RAW, bytes(f), len(bytes(f))) is None
    p.finish()
    assert p.problems.messages == [
        "frame 1: fragmented IPv4 datagram id 0x0042 dropped: incomplete at end of capture"]


def test_fragment_table_is_bounded_and_times_out():
    p = PacketParser(max_fragmented=4, fragment_timeout=5.0)
    for ident in range(10):
        f = fragment(IP(src=V4[0], dst=V4[1], id=ident) / tcp(), fragsize=24)[0]
        p.parse(ident + 1, 0.0, lt.RAW, bytes(f), len(bytes(f)))
    assert len(p.fragments._pending) == 4
    assert p.fragments.dropped == 6
    f = fragment(IP(src=V4[0], dst=V4[1], id=500) / tcp(), fragsize=24)[0]
    p.parse(20, 100.0, lt.RAW, bytes(f), len(bytes(f)))
    assert len(p.fragments._pending) == 1          # the old ones timed out
    assert p.fragments.dropped == 10


def test_snaplen_truncated_payload_is_missing_not_invented():
    data = bytes(Ether(**MACS) / IP(src=V4[0], dst=V4[1]) / tcp())
    cut = data[:-30]
    seg = PacketParser().parse(1, 0.0, lt.ETHERNET, cut, len(data))
    check(seg, payload=PAYLOAD[:-30], missing=30)
    # IPv6 too, through SLL2
    data6 = bytes(CookedLinuxV2(proto=0x86DD) / IPv6(src=V6[0], dst=V6[1]) / tcp())
    seg6 = PacketParser().parse(1, 0.0, lt.LINUX_SLL2, data6[:-100], len(data6))
    check(seg6, V6, payload=PAYLOAD[:-100], missing=100)


def test_snaplen_inside_tcp_options_means_all_payload_missing():
    pkt = Ether(**MACS) / IP(src=V4[0], dst=V4[1]) / tcp(options=[("Timestamp", (1, 2))] * 3)
    data = bytes(pkt)
    seg = PacketParser().parse(1, 0.0, lt.ETHERNET, data[:14 + 20 + 18], len(data))
    check(seg, payload=b"", missing=len(PAYLOAD))


def test_snaplen_inside_ip_header_is_reported():
    data = bytes(Ether(**MACS) / IP(src=V4[0], dst=V4[1]) / tcp())
    p = PacketParser()
    assert p.parse(3, 0.0, lt.ETHERNET, data[:30], len(data)) is None
    assert p.problems.messages == [
        f"frame 3: IPv4 header truncated by the snap length (30 of {len(data)} bytes captured);"
        " packet skipped"]


def test_tso_zero_total_length_uses_the_wire_length():
    data = bytearray(bytes(Ether(**MACS) / IP(src=V4[0], dst=V4[1]) / tcp()))
    data[16:18] = b"\0\0"
    check(PacketParser().parse(1, 0.0, lt.ETHERNET, bytes(data), len(data)))


@pytest.mark.parametrize("pkt", [
    Ether(**MACS) / IP(src=V4[0], dst=V4[1]) / UDP(sport=1, dport=2) / Raw(b"x"),
    Ether(**MACS) / IP(src=V4[0], dst=V4[1]) / ICMP(),
    Ether(**MACS) / ARP(),
    Ether(**MACS) / IPv6(src=V6[0], dst=V6[1]) / UDP(),
    Ether(type=0x88CC, **MACS) / Raw(b"lldp" * 10),
], ids=["udp", "icmp", "arp", "udp6", "lldp"])
def test_non_tcp_is_none_without_problems(pkt):
    seg, p = parse(lt.ETHERNET, pkt)
    assert seg is None and p.non_tcp == 1 and not p.problems.messages


@pytest.mark.parametrize("data,why", [
    (b"\x00" * 10, "Ethernet header truncated"),
    (bytes(Ether(**MACS) / IP()) [:14] + b"\x55" + bytes(19), "not a valid IPv4 header"),
    (bytes(Ether(**MACS) / IP(src=V4[0], dst=V4[1]) / TCP(dataofs=3)), "TCP header length 12"),
], ids=["short-ethernet", "bad-ip-version", "bad-tcp-offset"])
def test_malformed_packets_are_reported_not_raised(data, why):
    p = PacketParser()
    assert p.parse(9, 0.0, lt.ETHERNET, data, len(data)) is None
    assert p.malformed == 1
    assert p.problems.messages[0].startswith("frame 9: ") and why in p.problems.messages[0]


def test_ip_length_larger_than_the_packet_is_reported_and_clamped():
    data = bytearray(bytes(Ether(**MACS) / IP(src=V4[0], dst=V4[1]) / tcp()))
    struct.pack_into("!H", data, 16, 1400)
    p = PacketParser()
    seg = p.parse(4, 0.0, lt.ETHERNET, bytes(data), len(data))
    check(seg)
    assert "IPv4 length field (1400 bytes) exceeds the packet" in p.problems.messages[0]


def test_unsupported_linktype_reported_once_and_counted():
    p = PacketParser()
    for i in range(3):
        assert p.parse(i + 1, 0.0, 147, b"abc", 3) is None
    assert p.unsupported_linktypes == {147: 3}
    assert len(p.problems.messages) == 1 and "linktype 147" in p.problems.messages[0]


def test_fuzzed_bytes_never_raise():
    import random
    rng = random.Random(1234)
    base = [bytes(Ether(**MACS) / Dot1Q() / IP(src=V4[0], dst=V4[1], options=[IPOption_RR()])
                  / tcp()),
            bytes(CookedLinuxV2(proto=0x86DD) / IPv6(src=V6[0], dst=V6[1])
                  / IPv6ExtHdrHopByHop() / IPv6ExtHdrFragment(m=1) / tcp())]
    p = PacketParser()
    for i in range(5000):
        data = bytearray(rng.choice(base))
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data[:rng.randint(0, len(data))])
        p.parse(i, float(i), rng.choice([1, 276, 113, 0, 101]), data, len(data) + rng.randint(0, 9))
    p.finish()


def test_flow_keys():
    seg4, _ = parse(lt.ETHERNET, Ether(**MACS) / IP(src=V4[0], dst=V4[1]) / tcp())
    seg6, _ = parse(lt.RAW, IPv6(src=V6[0], dst=V6[1]) / tcp())
    for seg, family in ((seg4, V4), (seg6, V6)):
        key = seg[0]
        assert split_key(reverse_key(key)) == (family[1], 9092, family[0], 51000)
        assert reverse_key(reverse_key(key)) == key
    # the fast path (one slice) and the general path build the same key
    slow, _ = parse(lt.ETHERNET, Ether(**MACS) / Dot1Q(vlan=1) / IP(src=V4[0], dst=V4[1]) / tcp())
    assert slow[0] == seg4[0]
