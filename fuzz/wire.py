"""Builders for hostile and ordinary wire data, shared by fuzz targets and tests.

Contract: everything here is written from the formats' descriptions (Ethernet, IPv4/IPv6,
TCP, pcap, Kafka's size-delimited frames, record batches, legacy messages, the 0.7
format); nothing calls kwsniff's decoders, so a bug there cannot hide itself.

Stream scripts (:func:`encode_script` / :func:`decode_script`) describe one TCP
connection between a client and a broker as bytes, so that a coverage-guided fuzzer
can mutate them and seeds can be made from real captures:

* byte 0: options (:data:`OPT_HANDSHAKE`, :data:`OPT_KAFKA_PORT`, :data:`OPT_FIN`,
  :data:`OPT_RST`, :data:`OPT_IPV6`, two bits of segmentation mode);
* then operations: one control byte (:data:`OP_BROKER` direction bit, :data:`OP_LOST`
  the segments are never captured, :data:`OP_LATE` they arrive after the next
  operation's, :data:`OP_DUP` they are captured twice, low 4 bits a segment size
  class), a big-endian uint16 length and that many payload bytes (fewer at the end
  of the input).
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import crc32c as _crc32c

from kwsniff.capture.writer import PcapngWriter, PcapWriter

SYN, FIN, RST, PSH, ACK = 0x02, 0x01, 0x04, 0x08, 0x10
T0 = 1_700_000_000.0
KAFKA_PORT = 9092
OTHER_PORT = 31337

_ETH_V4 = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
_ETH_V6 = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x86\xdd"


# ----------------------------------------------------------------------------- packets

def _ip_bytes(ip: str) -> bytes:
    import ipaddress
    return ipaddress.ip_address(ip).packed


def tcp_packet(src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int, flags: int,
               payload: bytes = b"", *, ipv6: bool = False) -> bytes:
    """An Ethernet frame carrying IPv4 (or IPv6) and TCP (checksums left zero)."""
    tcp = struct.pack("!HHIIBBHHH", src[1], dst[1], seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      5 << 4, flags, 65535, 0, 0)
    sip, dip = _ip_bytes(src[0]), _ip_bytes(dst[0])
    if ipv6:
        ip = struct.pack("!IHBB", 6 << 28, len(tcp) + len(payload), 6, 64) + sip + dip
        return _ETH_V6 + ip + tcp + payload
    ip = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64, 6, 0)
    return _ETH_V4 + ip + sip + dip + tcp + payload


@dataclass
class Connection:
    """One TCP connection between ``client`` and ``broker``; methods append packets.

    ``packets`` holds ``(ts, ethernet frame)`` in capture order.
    """

    client: tuple[str, int] = ("10.0.0.1", 40001)
    broker: tuple[str, int] = ("10.0.0.2", KAFKA_PORT)
    t0: float = T0
    mss: int = 1400
    ipv6: bool = False
    dt: float = 0.0001
    packets: list[tuple[float, bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.ipv6 and ":" not in self.client[0]:
            self.client = ("fd00::1", self.client[1])
            self.broker = ("fd00::2", self.broker[1])
        self.t = self.t0
        self.seq = [1000, 500000]          # next sequence number: client, broker

    def _ends(self, broker: bool) -> tuple[tuple[str, int], tuple[str, int]]:
        return (self.broker, self.client) if broker else (self.client, self.broker)

    def _emit(self, broker: bool, seq: int, flags: int, payload: bytes) -> bytes:
        src, dst = self._ends(broker)
        self.t += self.dt
        return tcp_packet(src, dst, seq, self.seq[0 if broker else 1], flags, payload,
                          ipv6=self.ipv6)

    def handshake(self) -> None:
        c, s = self.seq
        self.packets.append((self.t, tcp_packet(self.client, self.broker, c - 1, 0, SYN,
                                                ipv6=self.ipv6)))
        self.t += self.dt
        self.packets.append((self.t, tcp_packet(self.broker, self.client, s - 1, c, SYN | ACK,
                                                ipv6=self.ipv6)))
        self.t += self.dt
        self.packets.append((self.t, tcp_packet(self.client, self.broker, c, s, ACK,
                                                ipv6=self.ipv6)))

    def segments(self, broker: bool, payload: bytes, sizes: Iterable[int] | None = None
                 ) -> list[tuple[float, bytes]]:
        """Packets carrying ``payload`` from one side (not yet appended); the side's
        sequence number advances as if they were all sent."""
        out: list[tuple[float, bytes]] = []
        d = 1 if broker else 0
        pos = 0
        it = iter(sizes) if sizes is not None else None
        while pos < len(payload):
            n = next(it, self.mss) if it is not None else self.mss
            n = max(1, min(n, self.mss))
            chunk = payload[pos:pos + n]
            out.append((self.t, self._emit(broker, self.seq[d], ACK | PSH, chunk)))
            self.seq[d] += len(chunk)
            pos += len(chunk)
        return out

    def send(self, broker: bool, payload: bytes, sizes: Iterable[int] | None = None) -> None:
        """Append packets carrying ``payload`` (split at ``mss`` or at ``sizes``)."""
        self.packets.extend(self.segments(broker, payload, sizes))

    def empty(self, broker: bool) -> None:
        """Append a zero-length segment (a pure ACK)."""
        d = 1 if broker else 0
        self.packets.append((self.t, self._emit(broker, self.seq[d], ACK, b"")))

    def lose(self, broker: bool, n: int) -> None:
        """Advance a side's sequence number by ``n`` bytes never captured."""
        self.seq[1 if broker else 0] += n

    def close(self, rst: bool = False) -> None:
        if rst:
            self.packets.append((self.t, self._emit(False, self.seq[0], RST | ACK, b"")))
            return
        for broker in (False, True):
            d = 1 if broker else 0
            self.packets.append((self.t, self._emit(broker, self.seq[d], FIN | ACK, b"")))
            self.seq[d] += 1


def packet_tuples(packets: Sequence[tuple[float, bytes]], linktype: int = 1
                  ) -> list[tuple[int, float, int, bytes, int]]:
    """Packet tuples (frame numbers from 1) as a capture source yields them."""
    return [(i, ts, linktype, data, len(data)) for i, (ts, data) in enumerate(packets, 1)]


def pcap_bytes(packets: Sequence[tuple[float, bytes]], linktype: int = 1, *,
               pcapng: bool = False) -> bytes:
    """A whole pcap (or pcapng) file in memory."""
    buf = io.BytesIO()
    if pcapng:
        with PcapngWriter(buf) as w:
            w.add_interface(linktype, snaplen=262144)
            for ts, data in packets:
                w.write(ts, data)
    else:
        with PcapWriter(buf, linktype) as pw:
            for ts, data in packets:
                pw.write(ts, data)
    return buf.getvalue()


def conversation(pairs: Iterable[tuple[bool, bytes]], *, handshake: bool = True,
                 close: bool = True, port: int = KAFKA_PORT, mss: int = 1400
                 ) -> list[tuple[float, bytes]]:
    """Packets of one connection carrying ``(from_broker, payload)`` in order."""
    conn = Connection(broker=("10.0.0.2", port), mss=mss)
    if handshake:
        conn.handshake()
    for broker, payload in pairs:
        conn.send(broker, payload)
    if close:
        conn.close()
    return conn.packets


# ----------------------------------------------------------------------------- scripts

OPT_HANDSHAKE = 0x01
OPT_KAFKA_PORT = 0x02
OPT_FIN = 0x04
OPT_RST = 0x08
OPT_IPV6 = 0x10
SEG_MSS, SEG_TINY, SEG_CLASS, SEG_EMPTY = 0, 1, 2, 3   # segmentation modes (bits 5-6)

OP_BROKER = 0x80
OP_LOST = 0x40
OP_LATE = 0x20
OP_DUP = 0x10

#: options of an ordinary connection on the Kafka port
PLAIN = OPT_HANDSHAKE | OPT_KAFKA_PORT | OPT_FIN


def encode_script(options: int, ops: Iterable[tuple[int, bytes]]) -> bytes:
    """Bytes of a stream script (payloads longer than 65535 bytes are split)."""
    out = bytearray([options & 0xFF])
    for ctrl, payload in ops:
        for i in range(0, max(len(payload), 1), 0xFFFF):
            part = payload[i:i + 0xFFFF]
            out += bytes([ctrl & 0xFF]) + struct.pack(">H", len(part)) + part
    return bytes(out)


def decode_script(data: bytes) -> tuple[int, list[tuple[int, bytes]]]:
    """``(options, [(ctrl, payload), ...])`` of a stream script; never raises."""
    if not data:
        return 0, []
    options = data[0]
    ops: list[tuple[int, bytes]] = []
    pos = 1
    while pos < len(data):
        ctrl = data[pos]
        n = int.from_bytes(data[pos + 1:pos + 3], "big")
        ops.append((ctrl, data[pos + 3:pos + 3 + n]))
        pos += 3 + n
    return options, ops


def script_packets(data: bytes) -> list[tuple[float, bytes]]:
    """The packets (``(ts, ethernet frame)``) a stream script describes."""
    options, ops = decode_script(data)
    port = KAFKA_PORT if options & OPT_KAFKA_PORT else OTHER_PORT
    conn = Connection(broker=("10.0.0.2", port), ipv6=bool(options & OPT_IPV6))
    mode = (options >> 5) & 3
    if options & OPT_HANDSHAKE:
        conn.handshake()
    late: list[tuple[float, bytes]] = []
    for ctrl, payload in ops:
        broker = bool(ctrl & OP_BROKER)
        if ctrl & OP_LOST:
            conn.lose(broker, len(payload))
            continue
        if mode == SEG_TINY:
            sizes: Iterable[int] | None = [1] * min(64, len(payload))
        elif mode == SEG_CLASS:
            sizes = iter(lambda c=ctrl: 1 << (c & 0x0F), None)
        else:
            sizes = None
        segs = conn.segments(broker, payload, sizes)
        if mode == SEG_EMPTY:
            segs = [p for s in segs for p in (s, (s[0], conn._emit(broker, conn.seq[int(broker)],
                                                                   ACK, b"")))]
        if ctrl & OP_DUP:
            segs = segs + segs
        if ctrl & OP_LATE:
            late.extend(segs)
            continue
        conn.packets.extend(segs)
        conn.packets.extend(late)
        late.clear()
    conn.packets.extend(late)
    if options & OPT_RST:
        conn.close(rst=True)
    elif options & OPT_FIN:
        conn.close()
    return conn.packets


# ----------------------------------------------------------------------------- primitives

def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def u32(v: int) -> bytes:
    return struct.pack(">I", v & 0xFFFFFFFF)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str | None) -> bytes:
    """Kafka STRING / NULLABLE_STRING (int16 length)."""
    if s is None:
        return i16(-1)
    raw = s.encode()
    return i16(len(raw)) + raw


def uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def varint(v: int) -> bytes:
    """Zig-zag signed varint (64-bit)."""
    return uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def compact_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def frame(payload: bytes) -> bytes:
    """A size-delimited Kafka frame (int32 size prefix + payload)."""
    return i32(len(payload)) + payload


# ----------------------------------------------------------------------------- Kafka

def request(api_key: int, version: int, corr: int, body: bytes, *, client_id: str | None = "fz",
            flexible: bool = False) -> bytes:
    """A request frame: header v1 (v2 with an empty tag buffer when ``flexible``)."""
    head = i16(api_key) + i16(version) + i32(corr) + string(client_id)
    if flexible:
        head += b"\x00"
    return frame(head + body)


def response(corr: int, body: bytes, *, flexible: bool = False) -> bytes:
    """A response frame: header v0 (v1 with an empty tag buffer when ``flexible``)."""
    return frame(i32(corr) + (b"\x00" if flexible else b"") + body)


def api_versions_request(corr: int, version: int = 0) -> bytes:
    if version >= 3:
        return request(18, version, corr, compact_string("fz-client") + compact_string("1.0")
                       + b"\x00", flexible=True)
    return request(18, version, corr, b"")


def api_versions_response(corr: int, keys: Sequence[tuple[int, int, int]] = ((0, 0, 9),
                                                                           (1, 0, 13),
                                                                           (3, 0, 12),
                                                                           (18, 0, 3))) -> bytes:
    """ApiVersions v0 response (error 0, then ``(key, min, max)`` entries)."""
    body = i16(0) + i32(len(keys)) + b"".join(i16(k) + i16(lo) + i16(hi) for k, lo, hi in keys)
    return response(corr, body)


def metadata_request(corr: int, topics: Sequence[str] = ("orders",)) -> bytes:
    """Metadata v1 request."""
    return request(3, 1, corr, i32(len(topics)) + b"".join(string(t) for t in topics))


def metadata_response(corr: int, topics: Sequence[str] = ("orders",)) -> bytes:
    """Metadata v1 response: one broker, every topic with one partition."""
    body = i32(1) + i32(1) + string("10.0.0.2") + i32(KAFKA_PORT) + string(None)
    body += i32(1) + i32(len(topics))
    for t in topics:
        body += i16(0) + string(t) + b"\x00" + i32(1)
        body += i16(0) + i32(0) + i32(1) + i32(1) + i32(1) + i32(1) + i32(1)
    return response(corr, body)


def produce_request(corr: int, records: bytes, *, version: int = 3, acks: int = 1,
                    topic: str = "orders", partition: int = 0) -> bytes:
    """Produce v3..v8 request carrying ``records`` (a record set) for one partition."""
    body = string(None) + i16(acks) + i32(1000) + i32(1) + string(topic) + i32(1)
    body += i32(partition) + i32(len(records)) + records
    return request(0, version, corr, body)


def produce_response(corr: int, *, version: int = 3, topic: str = "orders") -> bytes:
    body = i32(1) + string(topic) + i32(1) + i32(0) + i16(0) + i64(0) + i64(-1)
    body += i32(0)   # throttle time (v1+)
    return response(corr, body)


def fetch_request(corr: int, *, version: int = 4, topic: str = "orders") -> bytes:
    """Fetch v4 request for one partition."""
    body = i32(-1) + i32(500) + i32(1) + i32(1 << 20) + i8(0) + i32(1) + string(topic)
    body += i32(1) + i32(0) + i64(0) + i32(1 << 20)
    return request(1, version, corr, body)


def fetch_response(corr: int, records: bytes, *, topic: str = "orders") -> bytes:
    """Fetch v4 response with ``records`` for one partition."""
    body = i32(0) + i32(1) + string(topic) + i32(1)
    body += i32(0) + i16(0) + i64(10) + i64(10) + i32(0)   # no aborted transactions
    body += i32(len(records)) + records
    return response(corr, body)


def v2_record(offset_delta: int, key: bytes | None, value: bytes | None,
              headers: Sequence[tuple[bytes, bytes | None]] = ()) -> bytes:
    body = b"\x00" + varint(0) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for hk, hv in headers:
        body += varint(len(hk)) + hk + (varint(-1) if hv is None else varint(len(hv)) + hv)
    return varint(len(body)) + body


def v2_batch(records: Sequence[bytes], *, base_offset: int = 0, attributes: int = 0,
             payload: bytes | None = None, count: int | None = None) -> bytes:
    """A magic-2 record batch (``payload`` replaces the joined records, e.g. compressed)."""
    data = b"".join(records) if payload is None else payload
    n = len(records) if count is None else count
    after_crc = (struct.pack(">hiqqqhi", attributes, max(n - 1, 0), T0_MS, T0_MS, -1, -1, -1)
                 + i32(n) + data)
    crc = _crc32c.crc32c(after_crc)
    body = i32(0) + i8(2) + u32(crc) + after_crc
    return i64(base_offset) + i32(len(body)) + body


T0_MS = int(T0 * 1000)


def legacy_message(offset: int, value: bytes | None, *, magic: int = 1, codec: int = 0,
                   key: bytes | None = None) -> bytes:
    """One magic 0/1 message in a message set (offset, size, crc, ...)."""
    body = struct.pack(">bb", magic, codec)
    if magic == 1:
        body += i64(T0_MS)
    body += i32(-1) if key is None else i32(len(key)) + key
    body += i32(-1) if value is None else i32(len(value)) + value
    msg = u32(zlib.crc32(body)) + body
    return i64(offset) + i32(len(msg)) + msg


def gzip_bytes(data: bytes, level: int = 6) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def nested_message_set(depth: int, inner: bytes = b"payload", magic: int = 1) -> bytes:
    """A message set whose single gzip message wraps another, ``depth`` levels deep."""
    data = legacy_message(0, inner, magic=magic)
    for _ in range(depth):
        data = legacy_message(0, gzip_bytes(data), magic=magic, codec=1)
    return data


def gzip_bomb(size: int, level: int = 9) -> bytes:
    """Gzip data that inflates to ``size`` zero bytes, built without holding them."""
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    out = []
    block = bytes(1 << 20)
    left = size
    while left > 0:
        out.append(c.compress(block[:min(left, len(block))]))
        left -= len(block)
    out.append(c.flush())
    return b"".join(out)


# ----------------------------------------------------------------------------- Kafka 0.7

def msg07(payload: bytes, compression: int | None = None) -> bytes:
    """One 0.7 message (magic 0 when ``compression`` is None, else magic 1)."""
    crc = u32(zlib.crc32(payload))
    body = (b"\x00" + crc + payload) if compression is None else \
        (b"\x01" + bytes((compression,)) + crc + payload)
    return i32(len(body)) + body


def produce07(topic: str, partition: int, messages: bytes) -> bytes:
    return frame(i16(0) + string(topic) + i32(partition) + i32(len(messages)) + messages)


def fetch07(topic: str, partition: int, offset: int = 0, max_size: int = 1 << 20) -> bytes:
    return frame(i16(1) + string(topic) + i32(partition) + i64(offset) + i32(max_size))


def offsets07(topic: str, partition: int, time: int = -1, max_number: int = 10) -> bytes:
    return frame(i16(4) + string(topic) + i32(partition) + i64(time) + i32(max_number))


def multifetch07(parts: Sequence[tuple[str, int, int]]) -> bytes:
    body = i16(2) + i16(len(parts))
    for topic, partition, offset in parts:
        body += string(topic) + i32(partition) + i64(offset) + i32(1 << 20)
    return frame(body)


def fetch07_response(messages: bytes, error: int = 0) -> bytes:
    return frame(i16(error) + messages)


def offsets07_response(offsets: Sequence[int], error: int = 0) -> bytes:
    return frame(i16(error) + i32(len(offsets)) + b"".join(i64(o) for o in offsets))


def multifetch07_response(sets: Sequence[bytes]) -> bytes:
    return frame(i16(0) + b"".join(i32(len(s) + 2) + i16(0) + s for s in sets))


# ----------------------------------------------------------------------------- misc

def tls_client_hello() -> bytes:
    """The start of a TLS 1.2 ClientHello record."""
    hello = b"\x03\x03" + bytes(32) + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
    handshake = b"\x01" + len(hello).to_bytes(3, "big") + hello
    return b"\x16\x03\x01" + struct.pack(">H", len(handshake)) + handshake


def chunks(data: bytes, size: int) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i:i + size]
