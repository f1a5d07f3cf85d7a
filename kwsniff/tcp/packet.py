"""Link, IP and TCP header parsing: packet tuple -> TCP segment tuple (or None).

Contract: :meth:`PacketParser.parse` takes the fields of a packet tuple and returns
a **segment tuple** ``(key, seq, ack, flags, payload, missing)`` for TCP packets and
None for everything else. ``key`` is the flow key: the raw source and destination
addresses (4 or 16 bytes each) followed by source and destination ports (2 bytes each,
big-endian) — on Ethernet/IPv4 exactly the 12 bytes from the IP source address on, so
the hot path gets it with one slice (:func:`split_key` decodes it, :func:`reverse_key`
gives the other direction's). ``flags`` is the TCP flag byte; ``payload`` the captured
TCP payload; ``missing`` how many payload bytes the IP header announces beyond what was
captured (snap-length truncation; never invented). Supported link
types: Ethernet with any number of 802.1Q/802.1ad tags, Linux cooked v1/v2, NULL
and LOOP, raw IP. IPv4 options and IPv6 extension headers are skipped; fragments
are reassembled (:mod:`kwsniff.tcp.ipfrag`). Malformed or unsupported packets never
raise: they are counted and reported to ``problems`` with their frame number.

:data:`ETH_IPV4_TCP` is the C kernel's copy of ``parse``'s Ethernet/IPv4/TCP fast path
(:mod:`kwsniff.tcp._headers`), or None without the kernel; this module is the one place
the choice is made.
"""

from __future__ import annotations

import socket
import struct

from kwsniff import _compiled
from kwsniff.capture import linktypes as lt
from kwsniff.tcp.ipfrag import FragmentReassembler
from kwsniff.tcp.problems import ProblemLog

Segment = tuple[bytes, int, int, int, bytes, int]

ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86DD
VLAN_TPIDS = frozenset((0x8100, 0x88A8, 0x9100, 0x9200))
IPPROTO_TCP = 6
# IPv6 extension headers that may precede TCP: hop-by-hop, routing, destination
# options, mobility, HIP, shim6 ((len + 1) * 8 bytes), AH ((len + 2) * 4 bytes)
IPV6_EXT = frozenset((0, 43, 60, 135, 139, 140))
IPV6_AH = 51
IPV6_FRAGMENT = 44
# BSD address family values for IPv4 and IPv6 (Linux, *BSD, Darwin, ...)
AF_INET_VALUES = frozenset((2,))
AF_INET6_VALUES = frozenset((10, 24, 28, 30))

# Ethernet fast path, from byte 12: EtherType, IPv4 version+IHL, (TOS), total length,
# (id), flags+fragment offset, (TTL), protocol, (checksum, addresses, TCP ports), then
# TCP sequence, acknowledgment, data offset+flags.
_ETH_V4_TCP = struct.Struct("!HBxH2xHxB14xIIH")
_V4 = struct.Struct("!H2xHxB2x4s4s")
_TCP = struct.Struct("!HHIIH")
_U16 = struct.Struct("!H")
_PORTS = struct.Struct("!HH")

_HEADERS = _compiled.kernel("kwsniff.tcp._headers")
#: ``eth_ipv4_tcp(data)``: the segment :meth:`PacketParser.parse` gives for an Ethernet
#: frame (link type 1) with unfragmented option-less IPv4 and TCP in it, else None
#: (then ``parse`` decides as always); None when the C kernel is not in use
ETH_IPV4_TCP = _HEADERS.eth_ipv4_tcp if _HEADERS is not None else None


def format_ip(addr: bytes) -> str:
    """Text form of a raw 4- or 16-byte address."""
    if len(addr) == 4:
        return socket.inet_ntop(socket.AF_INET, addr)
    return socket.inet_ntop(socket.AF_INET6, addr)


def flow_key(src: bytes, sport: int, dst: bytes, dport: int) -> bytes:
    """The flow key of a segment from ``src:sport`` to ``dst:dport`` (raw addresses)."""
    return bytes(src) + bytes(dst) + _PORTS.pack(sport, dport)


def split_key(key: bytes) -> tuple[str, int, str, int]:
    """``(source ip, source port, destination ip, destination port)`` of a flow key."""
    half = (len(key) - 4) >> 1
    sport, dport = _PORTS.unpack_from(key, 2 * half)
    return format_ip(key[:half]), sport, format_ip(key[half:2 * half]), dport


def reverse_key(key: bytes) -> bytes:
    """The flow key of the opposite direction."""
    half = (len(key) - 4) >> 1
    return key[half:2 * half] + key[:half] + key[2 * half + 2:] + key[2 * half:2 * half + 2]


class PacketParser:
    """Stateful parser (it holds IP fragments in progress and counters)."""

    def __init__(self, problems: ProblemLog | None = None, *, defragment: bool = True,
                 max_fragmented: int = 256, fragment_timeout: float = 60.0) -> None:
        self.problems = problems if problems is not None else ProblemLog()
        self.defragment = defragment
        self.fragments = FragmentReassembler(self.problems, max_datagrams=max_fragmented,
                                             timeout=fragment_timeout)
        self.non_tcp = 0          # packets that are not TCP (or could not be parsed)
        self.malformed = 0        # subset of non_tcp: reported as malformed/truncated
        self.unsupported_linktypes: dict[int, int] = {}

    def parse(self, frame: int, ts: float, linktype: int, data: bytes | memoryview,
              orig_len: int) -> Segment | None:
        """The TCP segment in this packet, or None (see the module docstring)."""
        if type(data) is not bytes:
            data = bytes(data)
        if linktype == 1:
            n = len(data)
            # fast path: Ethernet, IPv4 without options, unfragmented TCP
            if n >= 48:
                ethertype, vihl, tot, frag, proto, seq, ack, offflags = \
                    _ETH_V4_TCP.unpack_from(data, 12)
                if (ethertype == ETH_IPV4 and vihl == 0x45 and proto == IPPROTO_TCP
                        and not frag & 0x3FFF):
                    start = 34 + ((offflags >> 12) << 2)
                    end = 14 + tot
                    if end <= n and 54 <= start <= end:
                        return (data[26:38], seq, ack, offflags & 0xFF, data[start:end], 0)
            return self._ethernet(frame, ts, data, 12, orig_len)
        if linktype == lt.LINUX_SLL2:
            if len(data) < 20:
                return self._bad(frame, "Linux cooked v2 header truncated")
            return self._ethertype(frame, ts, data, 0, orig_len, 20)
        if linktype == lt.LINUX_SLL:
            if len(data) < 16:
                return self._bad(frame, "Linux cooked header truncated")
            return self._ethertype(frame, ts, data, 14, orig_len, 16)
        if linktype in (lt.RAW, lt.RAW_DLT12, lt.RAW_DLT14, lt.IPV4, lt.IPV6):
            return self._raw_ip(frame, ts, data, 0, orig_len)
        if linktype in (lt.NULL, lt.LOOP):
            return self._loopback(frame, ts, data, orig_len)
        self.non_tcp += 1
        seen = self.unsupported_linktypes.get(linktype, 0)
        if not seen:
            self.problems.add(f"frame {frame}: link type {lt.linktype_name(linktype)} is not "
                              "supported; its packets are skipped")
        self.unsupported_linktypes[linktype] = seen + 1
        return None

    # -- link layer ---------------------------------------------------------------------

    def _ethernet(self, frame: int, ts: float, data: bytes | memoryview, pos: int,
                  orig_len: int) -> Segment | None:
        if len(data) < 14:
            return self._bad(frame, f"Ethernet header truncated ({len(data)} bytes)")
        return self._ethertype(frame, ts, data, pos, orig_len, pos + 2)

    def _ethertype(self, frame: int, ts: float, data: bytes | memoryview, pos: int,
                   orig_len: int, ip: int) -> Segment | None:
        """Follow the EtherType at ``data[pos:pos+2]`` (and VLAN tags) to IP at ``ip``."""
        n = len(data)
        ethertype = _U16.unpack_from(data, pos)[0]
        while ethertype in VLAN_TPIDS:
            # a 4-byte tag: TCI, then the next EtherType
            if ip + 4 > n:
                return self._bad(frame, "VLAN tag truncated")
            ethertype = _U16.unpack_from(data, ip + 2)[0]
            ip += 4
        if ethertype == ETH_IPV4:
            return self._ipv4(frame, ts, data, ip, orig_len)
        if ethertype == ETH_IPV6:
            return self._ipv6(frame, ts, data, ip, orig_len)
        self.non_tcp += 1
        return None

    def _loopback(self, frame: int, ts: float, data: bytes | memoryview,
                  orig_len: int) -> Segment | None:
        if len(data) < 5:
            return self._bad(frame, "loopback header truncated")
        family = int.from_bytes(data[:4], "little")
        if family > 0xFFFF:  # written in the other byte order
            family = int.from_bytes(data[:4], "big")
        version = data[4] >> 4
        if family in AF_INET_VALUES and version == 4:
            return self._ipv4(frame, ts, data, 4, orig_len)
        if family in AF_INET6_VALUES and version == 6:
            return self._ipv6(frame, ts, data, 4, orig_len)
        self.non_tcp += 1
        seen = self.unsupported_linktypes.get(("family", family), 0)
        if not seen:
            self.problems.add(f"frame {frame}: link type NULL/LOOP (BSD loopback): address "
                              f"family {family} with IP version {version} is not IPv4/IPv6 "
                              "(is the file's link type right?); such packets are skipped")
        self.unsupported_linktypes[("family", family)] = seen + 1
        return None

    def _raw_ip(self, frame: int, ts: float, data: bytes | memoryview, pos: int,
                orig_len: int) -> Segment | None:
        if len(data) <= pos:
            return self._bad(frame, "empty raw IP packet")
        version = data[pos] >> 4
        if version == 4:
            return self._ipv4(frame, ts, data, pos, orig_len)
        if version == 6:
            return self._ipv6(frame, ts, data, pos, orig_len)
        return self._bad(frame, f"raw IP packet with IP version {version}")

    # -- IP -----------------------------------------------------------------------------

    def _ip_end(self, frame: int, ip: int, claimed: int, n: int, orig_len: int,
                version: str) -> tuple[int, int]:
        """(end of captured IP data, bytes the IP header announces beyond it)."""
        if claimed == ip:
            # total/payload length 0: TCP segmentation offload or a jumbogram; trust the wire
            claimed = orig_len
        wire_end = max(orig_len, n)
        if claimed > wire_end:
            self.problems.add(f"frame {frame}: {version} length field ({claimed - ip} bytes) "
                              f"exceeds the packet ({wire_end - ip} bytes)")
            claimed = wire_end
        if claimed <= n:
            return claimed, 0   # anything after it is link-layer padding or trailer
        return n, claimed - n

    def _ipv4(self, frame: int, ts: float, data: bytes | memoryview, ip: int,
              orig_len: int) -> Segment | None:
        n = len(data)
        if n < ip + 20:
            return self._bad(frame, "IPv4 header truncated" + self._snapped(n, orig_len))
        vihl = data[ip]
        hl = (vihl & 0x0F) << 2
        if vihl >> 4 != 4 or hl < 20:
            return self._bad(frame, f"not a valid IPv4 header (version/length byte {vihl:#04x})")
        tot, frag, proto, src, dst = _V4.unpack_from(data, ip + 2)
        if proto != IPPROTO_TCP:
            self.non_tcp += 1
            return None
        if n < ip + hl:
            return self._bad(frame, "IPv4 options truncated" + self._snapped(n, orig_len))
        if tot and tot < hl:
            return self._bad(frame, f"IPv4 total length {tot} shorter than its header")
        end, missing = self._ip_end(frame, ip, ip + tot, n, orig_len, "IPv4")
        if frag & 0x3FFF:
            if not self.defragment:
                self.non_tcp += 1
                return None
            if missing:
                return self._bad(frame, "IPv4 fragment truncated by the snap length; its "
                                        "datagram cannot be reassembled")
            ident = _U16.unpack_from(data, ip + 4)[0]
            payload = self.fragments.add((4, src, dst, ident), (frag & 0x1FFF) << 3,
                                         bool(frag & 0x2000), bytes(data[ip + hl:end]), frame,
                                         ts, f"IPv4 datagram id {ident:#06x}")
            if payload is None:
                return None
            return self._tcp(frame, payload, 0, len(payload), 0, src, dst, True)
        return self._tcp(frame, data, ip + hl, end, missing, src, dst, False)

    def _ipv6(self, frame: int, ts: float, data: bytes | memoryview, ip: int,
              orig_len: int) -> Segment | None:
        n = len(data)
        if n < ip + 40:
            return self._bad(frame, "IPv6 header truncated" + self._snapped(n, orig_len))
        if data[ip] >> 4 != 6:
            return self._bad(frame, f"not a valid IPv6 header (first byte {data[ip]:#04x})")
        plen = _U16.unpack_from(data, ip + 4)[0]
        nxt = data[ip + 6]
        src = bytes(data[ip + 8:ip + 24])
        dst = bytes(data[ip + 24:ip + 40])
        end, missing = self._ip_end(frame, ip, ip + 40 + plen if plen else ip, n, orig_len,
                                    "IPv6")
        pos = ip + 40
        while True:
            if nxt == IPPROTO_TCP:
                return self._tcp(frame, data, pos, end, missing, src, dst, False)
            if nxt in IPV6_EXT or nxt in (IPV6_AH, IPV6_FRAGMENT):
                if pos + 8 > end:
                    return self._bad(frame, "IPv6 extension header truncated"
                                     + self._snapped(n, orig_len))
                if nxt == IPV6_FRAGMENT:
                    return self._ipv6_fragment(frame, ts, data, pos, end, missing, src, dst)
                size = (data[pos + 1] + 2) << 2 if nxt == IPV6_AH else (data[pos + 1] + 1) << 3
                nxt = data[pos]
                pos += size
                continue
            self.non_tcp += 1
            return None

    def _ipv6_fragment(self, frame: int, ts: float, data: bytes | memoryview, pos: int,
                       end: int, missing: int, src: bytes, dst: bytes) -> Segment | None:
        nxt = data[pos]
        offmf, ident = struct.unpack_from("!HI", data, pos + 2)
        offset = (offmf >> 3) << 3
        more = bool(offmf & 1)
        if not offset and not more:
            # atomic fragment (RFC 6946): the payload is the whole datagram
            body: bytes | memoryview = data
            start, stop = pos + 8, end
        else:
            if not self.defragment:
                self.non_tcp += 1
                return None
            if missing:
                return self._bad(frame, "IPv6 fragment truncated by the snap length; its "
                                        "datagram cannot be reassembled")
            whole = self.fragments.add((6, src, dst, ident), offset, more,
                                       bytes(data[pos + 8:end]), frame, ts,
                                       f"IPv6 datagram id {ident:#010x}")
            if whole is None:
                return None
            body, start, stop, missing = whole, 0, len(whole), 0
        # headers after the fragment header (e.g. destination options), then TCP
        while nxt != IPPROTO_TCP:
            if nxt not in IPV6_EXT and nxt != IPV6_AH:
                self.non_tcp += 1
                return None
            if start + 8 > stop:
                return self._bad(frame, "IPv6 extension header truncated")
            size = (body[start + 1] + 2) << 2 if nxt == IPV6_AH else (body[start + 1] + 1) << 3
            nxt = body[start]
            start += size
        return self._tcp(frame, body, start, stop, missing, src, dst, body is not data)

    # -- TCP ----------------------------------------------------------------------------

    def _tcp(self, frame: int, data: bytes | memoryview, pos: int, end: int, missing: int,
             src: bytes, dst: bytes, reassembled: bool) -> Segment | None:
        have = end - pos
        if have < 14:
            return self._bad(frame, f"TCP header truncated ({max(have, 0)} bytes)"
                             + (" by the snap length" if missing else ""))
        sport, dport, seq, ack, offflags = _TCP.unpack_from(data, pos)
        hl = (offflags >> 12) << 2
        if hl < 20:
            return self._bad(frame, f"TCP header length {hl} is less than 20")
        start = pos + hl
        if start > end:
            if not missing or start > end + missing:
                return self._bad(frame, f"TCP header ({hl} bytes) longer than the segment")
            # headers cut by the snap length: every payload byte is missing
            return (bytes(src) + bytes(dst) + bytes(data[pos:pos + 4]), seq, ack,
                    offflags & 0xFF, b"", missing - (start - end))
        return (bytes(src) + bytes(dst) + bytes(data[pos:pos + 4]), seq, ack, offflags & 0xFF,
                bytes(data[start:end]), missing)

    # -- problems -----------------------------------------------------------------------

    @staticmethod
    def _snapped(n: int, orig_len: int) -> str:
        return f" by the snap length ({n} of {orig_len} bytes captured)" if orig_len > n else ""

    def _bad(self, frame: int, why: str) -> None:
        self.non_tcp += 1
        self.malformed += 1
        self.problems.add(f"frame {frame}: {why}; packet skipped")
        return None

    def finish(self) -> None:
        """End of input: report fragmented datagrams that never completed."""
        self.fragments.finish()
