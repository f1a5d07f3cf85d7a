"""Sample packets and an independent reading of capture files through tshark."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import CookedLinuxV2, Ether
from scapy.packet import Raw

MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}
T0 = 1_700_000_000.0

needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
needs_editcap = pytest.mark.skipif(shutil.which("editcap") is None or
                                   shutil.which("mergecap") is None,
                                   reason="editcap/mergecap not installed")


def ether_packets(n=12, base_ts=T0):
    """``[(ts, data, orig_len)]``: Ethernet/IPv4/TCP packets with distinct payloads."""
    out = []
    for i in range(n):
        pkt = (Ether(**MACS) / IP(src="10.1.0.1", dst="10.1.0.2")
               / TCP(sport=40000, dport=9092, seq=1000 + 100 * i, flags="PA")
               / Raw(bytes([65 + i % 26]) * (10 + 7 * i)))
        data = bytes(pkt)
        out.append((base_ts + i * 0.001001 + (i % 3) * 1e-7, data, len(data)))
    return out


def sll2_packets(n=5, base_ts=T0 + 0.5):
    out = []
    for i in range(n):
        pkt = (CookedLinuxV2(proto=0x0800) / IP(src="10.2.0.1", dst="10.2.0.2")
               / TCP(sport=50000, dport=9092, seq=7 + i, flags="A") / Raw(b"s" * i))
        data = bytes(pkt)
        out.append((base_ts + i * 0.25, data, len(data)))
    return out


def tshark_frames(path):
    """``[(frame, epoch ts, captured length, length, interface id)]`` as tshark reads ``path``."""
    result = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number", "-e", "frame.time_epoch",
         "-e", "frame.cap_len", "-e", "frame.len", "-e", "frame.interface_id"],
        capture_output=True, text=True, check=True)
    rows = []
    for line in result.stdout.splitlines():
        num, ts, cap, length, ifid = (line.split("\t") + [""] * 5)[:5]
        rows.append((int(num), float(ts) if ts else None, int(cap), int(length),
                     int(ifid) if ifid else 0))
    return rows


def read_all(path_or_file):
    from kwsniff.capture import open_capture
    with open_capture(path_or_file) as src:
        packets = [(f, ts, lt, bytes(d), o) for f, ts, lt, d, o in src]
        return packets, list(src.problems), src
