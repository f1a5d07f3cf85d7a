"""Generation-time checks on a finished capture (not the manifest's source of truth).

Used by the mid-stream scenario to prove that the capture really begins inside a Kafka
message: for each client->broker TCP flow, is its first captured payload byte the
start of a request the client logged (size, api key, version, correlation id)?
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable



@dataclass(slots=True)
class Flow:
    client_port: int
    broker_port: int
    first_payload: bytes = b""
    payload_bytes: int = 0
    saw_syn: bool = False
    packets: int = field(default=0)


def _packets(pcap: Path) -> Iterable[bytes]:
    """Frames of a classic little/big-endian pcap file (the format tcpdump -w writes)."""
    with open(pcap, "rb") as fh:
        head = fh.read(24)
        magic = head[:4]
        if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
            endian = "<"
        elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
            endian = ">"
        else:
            raise ValueError(f"{pcap}: not a pcap file")
        rec = struct.Struct(endian + "IIII")
        while True:
            hdr = fh.read(16)
            if len(hdr) < 16:
                return
            _s, _us, incl, _orig = rec.unpack(hdr)
            yield fh.read(incl)


def client_flows(pcap: Path, broker_ports: Iterable[int]) -> list[Flow]:
    """Client->broker TCP flows over IPv4/Ethernet, in capture order."""
    brokers = set(broker_ports)
    flows: dict[tuple[int, int], Flow] = {}
    for frame in _packets(pcap):
        if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
            continue
        ip_len = (frame[14] & 0x0F) * 4
        ip_total = struct.unpack_from(">H", frame, 16)[0]
        tcp_at = 14 + ip_len
        sport, dport = struct.unpack_from(">HH", frame, tcp_at)
        if dport not in brokers:
            continue
        tcp_len = (frame[tcp_at + 12] >> 4) * 4
        flags = frame[tcp_at + 13]
        payload = frame[tcp_at + tcp_len:14 + ip_total]
        flow = flows.setdefault((sport, dport), Flow(sport, dport))
        flow.packets += 1
        if flags & 0x02:
            flow.saw_syn = True
        if payload:
            if not flow.first_payload:
                flow.first_payload = bytes(payload[:12])
            flow.payload_bytes += len(payload)
    return list(flows.values())


def starts_at_logged_request(flow: Flow, requests: list[dict[str, Any]]) -> bool:
    """True when the flow's first payload is the header of a logged request."""
    if len(flow.first_payload) < 12:
        return False
    _size, key, version, corr = struct.unpack(">ihhi", flow.first_payload)
    return any(r["broker_port"] == flow.broker_port and r["api_key"] == key
               and r["api_version"] == version and r["correlation_id"] == corr
               for r in requests)
