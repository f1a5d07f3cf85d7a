"""Helpers for TCP tests: segment tuples by hand, and event checks."""

from __future__ import annotations

import subprocess
from collections import defaultdict

from kwsniff.tcp.events import ConnectionClosed, ConnectionOpened, StreamData, StreamGap
from kwsniff.tcp.packet import flow_key
from kwsniff.tcp.reassembly import ACK, FIN, RST, SYN, TcpReassembler

CLIENT = (bytes([10, 0, 0, 1]), 40000)
SERVER = (bytes([10, 0, 0, 2]), 9092)
M32 = 0xFFFFFFFF


def seg(src, dst, seq, ack=0, flags=ACK, payload=b"", missing=0):
    """A segment tuple as PacketParser produces it."""
    return (flow_key(src[0], src[1], dst[0], dst[1]), seq & M32, ack & M32, flags, payload,
            missing)


class Side:
    """One endpoint of a hand-built connection; tracks its own next sequence number."""

    def __init__(self, addr, peer_addr, isn):
        self.addr, self.peer_addr, self.isn = addr, peer_addr, isn
        self.seq = isn
        self.peer = None

    def ack_value(self):
        return self.peer.seq if self.peer is not None else 0

    def syn(self, ack=False):
        s = seg(self.addr, self.peer_addr, self.seq, self.ack_value() if ack else 0,
                SYN | (ACK if ack else 0))
        self.seq = (self.seq + 1) & M32
        return s

    def send(self, data, flags=ACK, ack=None):
        s = seg(self.addr, self.peer_addr, self.seq, self.ack_value() if ack is None else ack,
                flags, data)
        self.seq = (self.seq + len(data)) & M32
        return s

    def at(self, offset, data, flags=ACK, ack=None, missing=0):
        """A segment at stream ``offset`` (relative to isn + 1), without moving ``seq``."""
        return seg(self.addr, self.peer_addr, self.isn + 1 + offset,
                   self.ack_value() if ack is None else ack, flags, data, missing)

    def fin(self):
        s = seg(self.addr, self.peer_addr, self.seq, self.ack_value(), FIN | ACK)
        self.seq = (self.seq + 1) & M32
        return s

    def rst(self):
        return seg(self.addr, self.peer_addr, self.seq, 0, RST)


def pair(client_isn=1000, server_isn=5000):
    c = Side(CLIENT, SERVER, client_isn)
    s = Side(SERVER, CLIENT, server_isn)
    c.peer, s.peer = s, c
    return c, s


def run(segments, reassembler=None, finish=True, start_frame=1):
    """Feed segments as frames start_frame.. (ts = frame / 10); return (events, reassembler)."""
    r = reassembler or TcpReassembler()
    events = []
    for i, s in enumerate(segments, start_frame):
        events.extend(r.feed(i, i / 10, s))
    if finish:
        events.extend(r.finish())
    return events, r


def streams(events):
    """{(conn index, direction): [("data", offset, bytes, frame) or
    ("gap", offset, length, reason), ...]}"""
    out = defaultdict(list)
    for e in events:
        if isinstance(e, StreamData):
            out[e.conn.index, e.direction].append(("data", e.offset, bytes(e.data), e.frame))
        elif isinstance(e, StreamGap):
            out[e.conn.index, e.direction].append(("gap", e.offset, e.length, e.reason))
    return dict(out)


def joined(events, index=0, direction=0):
    """All data bytes of one direction, with gaps shown as b'?' * length."""
    parts = []
    for item in streams(events).get((index, direction), []):
        parts.append(item[2] if item[0] == "data" else b"?" * item[2])
    return b"".join(parts)


def check_contract(events):
    """Assert the event-order contract: opened first, closed last, exact tiling (a
    connection closed by a RST/FIN may be opened again when bytes follow: ``reopened``)."""
    opened, closed = set(), set()
    last_close = {}
    nxt = defaultdict(int)
    for e in events:
        idx = e.conn.index
        if isinstance(e, ConnectionOpened):
            if idx in opened:
                assert idx in closed and e.conn.reopened, f"connection {idx} opened twice"
                closed.discard(idx)
            opened.add(idx)
            continue
        assert idx in opened, f"event before ConnectionOpened: {e!r}"
        assert idx not in closed, f"event after ConnectionClosed: {e!r}"
        if isinstance(e, ConnectionClosed):
            closed.add(idx)
            last_close[idx] = e
            if not e.conn.reopened:
                assert e.reason == e.conn.close_reason
        elif isinstance(e, StreamData):
            assert len(e.data) > 0
            assert e.offset == nxt[idx, e.direction], f"not contiguous: {e!r}"
            nxt[idx, e.direction] += len(e.data)
        elif isinstance(e, StreamGap):
            assert e.length > 0
            assert e.offset == nxt[idx, e.direction], f"not contiguous: {e!r}"
            nxt[idx, e.direction] += e.length
    for e in last_close.values():
        assert e.reason == e.conn.close_reason
    return opened, closed


def tshark_streams(path):
    """{(tcp.stream, src ip, src port): bytes} rebuilt from tshark's segments: offset 0 at
    the SYN + 1 or the first segment seen; first copy wins; bytes before 0 dropped."""
    out = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "tcp.stream", "-e", "ip.src",
         "-e", "ipv6.src", "-e", "tcp.srcport", "-e", "tcp.seq_raw", "-e", "tcp.flags",
         "-e", "tcp.payload"], capture_output=True, text=True, check=True).stdout
    base: dict[tuple, int] = {}
    data: dict[tuple, dict[int, int]] = defaultdict(dict)
    for line in out.splitlines():
        stream, ip4, ip6, port, seq, flags, payload = line.split("\t")
        if not stream:
            continue
        key = (int(stream), ip4 or ip6, int(port))
        seq, flags = int(seq), int(flags, 16)
        syn = flags & 0x02
        if key not in base:
            base[key] = (seq + 1) & 0xFFFFFFFF if syn else seq
        start = ((seq + (1 if syn else 0) - base[key] + 0x80000000) & 0xFFFFFFFF) - 0x80000000
        buf = data[key]
        for i, b in enumerate(bytes.fromhex(payload)):
            if start + i >= 0:
                buf.setdefault(start + i, b)
    streams = {}
    for key, buf in data.items():
        if buf:
            assert sorted(buf) == list(range(len(buf))), f"tshark sees a hole in {key}"
            streams[key] = bytes(buf[i] for i in range(len(buf)))
    return streams
