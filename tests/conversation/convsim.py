"""Test helpers: synthetic TCP conversations as packet tuples, and Kafka frames built with
kafka-python's encoders (an implementation independent of kwsniff's decoder).

``Sim`` models one TCP connection (Ethernet/IPv4/TCP with valid checksums, so tshark
reads the same packets); ``merge`` interleaves several by timestamp and numbers frames;
``write_pcap`` stores them for tshark comparisons.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import Any, Iterable

SYN, FIN, RST, PSH, ACK = 0x02, 0x01, 0x04, 0x08, 0x10


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def tcp_packet(src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int, flags: int,
               payload: bytes = b"") -> bytes:
    """An Ethernet frame carrying IPv4/TCP with correct checksums."""
    sip, dip = socket.inet_aton(src[0]), socket.inet_aton(dst[0])
    tcp = struct.pack("!HHIIBBHHH", src[1], dst[1], seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      5 << 4, flags, 65535, 0, 0)
    pseudo = sip + dip + struct.pack("!BBH", 0, 6, len(tcp) + len(payload))
    c = _csum(pseudo + tcp + payload)
    tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, sip, dip)
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
    return eth + ip + tcp + payload


class Sim:
    """One TCP connection; every call appends packets with increasing timestamps."""

    def __init__(self, client: tuple[str, int] = ("10.0.0.1", 40001),
                 server: tuple[str, int] = ("10.0.0.2", 9092), t0: float = 1_700_000_000.0,
                 handshake: bool = True, mss: int = 1448, dt: float = 0.0001) -> None:
        self.client, self.server = client, server
        self.t = t0
        self.dt = dt
        self.mss = mss
        self.cseq, self.sseq = 1000, 50000
        self.pkts: list[tuple[float, bytes, str]] = []   # (ts, frame bytes, tag)
        if handshake:
            self._add(client, server, self.cseq - 1, 0, SYN, b"", "syn")
            self._add(server, client, self.sseq - 1, self.cseq, SYN | ACK, b"", "syn")
            self._add(client, server, self.cseq, self.sseq, ACK, b"", "ack")

    def _add(self, src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int, flags: int,
             payload: bytes, tag: str) -> int:
        self.t += self.dt
        self.pkts.append((self.t, tcp_packet(src, dst, seq, ack, flags, payload), tag))
        return len(self.pkts) - 1

    def wait(self, seconds: float) -> None:
        self.t += seconds

    def send(self, from_client: bool, data: bytes, mss: int | None = None,
             ack_each: bool = False) -> list[int]:
        """Send ``data`` in MSS-sized segments; returns the indexes of the data packets."""
        mss = mss or self.mss
        out = []
        data = bytes(data)
        for i in range(0, len(data), mss):
            chunk = data[i:i + mss]
            if from_client:
                out.append(self._add(self.client, self.server, self.cseq, self.sseq, PSH | ACK,
                                     chunk, "c"))
                self.cseq += len(chunk)
                if ack_each:
                    self._add(self.server, self.client, self.sseq, self.cseq, ACK, b"", "ack")
            else:
                out.append(self._add(self.server, self.client, self.sseq, self.cseq, PSH | ACK,
                                     chunk, "s"))
                self.sseq += len(chunk)
                if ack_each:
                    self._add(self.client, self.server, self.cseq, self.sseq, ACK, b"", "ack")
        return out

    def c(self, data: bytes, **kw: Any) -> list[int]:
        return self.send(True, data, **kw)

    def s(self, data: bytes, **kw: Any) -> list[int]:
        return self.send(False, data, **kw)

    def ack_all(self) -> None:
        self._add(self.client, self.server, self.cseq, self.sseq, ACK, b"", "ack")
        self._add(self.server, self.client, self.sseq, self.cseq, ACK, b"", "ack")

    def fin(self) -> None:
        self._add(self.client, self.server, self.cseq, self.sseq, FIN | ACK, b"", "fin")
        self.cseq += 1
        self._add(self.server, self.client, self.sseq, self.cseq, FIN | ACK, b"", "fin")
        self.sseq += 1
        self._add(self.client, self.server, self.cseq, self.sseq, ACK, b"", "ack")


def merge(*sims: Sim, drop: Iterable[tuple[int, int]] = ()) -> list[tuple]:
    """Packet tuples of all sims ordered by time; ``drop`` = (sim number, packet index)."""
    dropped = set(drop)
    items = []
    for n, sim in enumerate(sims):
        for i, (ts, data, _tag) in enumerate(sim.pkts):
            if (n, i) not in dropped:
                items.append((ts, n, i, data))
    items.sort(key=lambda t: (t[0], t[1], t[2]))
    return [(f, ts, 1, data, len(data)) for f, (ts, _n, _i, data) in enumerate(items, 1)]


def write_pcap(path: Path, packets: list[tuple]) -> None:
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for _f, ts, _lt, data, orig in packets:
            sec = int(ts)
            nsec = int(round((ts - sec) * 1e9))
            fh.write(struct.pack("<IIII", sec, nsec, len(data), orig))
            fh.write(data)


# -- Kafka frames (kafka-python encoders) -----------------------------------------------

def kreq(cls: Any, version: int, corr: int, client_id: str | None = "cli", **fields: Any) -> bytes:
    msg = cls[version](**fields)
    msg.with_header(correlation_id=corr, client_id=client_id)
    return bytes(msg.encode(header=True, framed=True))


def kresp(cls: Any, version: int, corr: int, **fields: Any) -> bytes:
    msg = cls[version](**fields)
    msg.with_header(correlation_id=corr)
    return bytes(msg.encode(header=True, framed=True))


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload
