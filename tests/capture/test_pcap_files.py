"""Classic pcap: microsecond/nanosecond, both byte orders, modified format, truncation."""

from __future__ import annotations

import struct
import subprocess

import pytest
from capture_helpers import ether_packets, needs_editcap, needs_tshark, read_all, tshark_frames
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from kwsniff.capture.writer import PcapWriter

VARIANTS = [("<", False), (">", False), ("<", True), (">", True)]


def hand_pcap(packets, order, nano, linktype=1, snaplen=65535):
    """A pcap file built with struct only (independent of kwsniff's writer)."""
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    units = 10**9 if nano else 10**6
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)
    for ts, data, orig in packets:
        sec = int(ts)
        frac = round((ts - sec) * units)
        out += struct.pack(order + "IIII", sec, frac, len(data), orig) + data
    return out


@pytest.mark.parametrize("order,nano", VARIANTS, ids=["le-us", "be-us", "le-ns", "be-ns"])
def test_hand_built_variants(tmp_path, order, nano):
    pkts = ether_packets()
    path = tmp_path / "x.pcap"
    path.write_bytes(hand_pcap(pkts, order, nano))
    got, problems, src = read_all(path)
    assert problems == [] and src.format == "pcap" and src.packets == len(pkts)
    assert src.linktypes == [1] and src.snaplen == 65535
    pairs = zip(got, pkts, strict=True)
    for i, ((frame, ts, lt, data, orig), (ets, edata, eorig)) in enumerate(pairs, 1):
        assert (frame, lt, data, orig) == (i, 1, edata, eorig)
        assert ts == pytest.approx(ets, abs=1e-6 if not nano else 2e-7)


@needs_tshark
@pytest.mark.parametrize("order,nano", VARIANTS, ids=["le-us", "be-us", "le-ns", "be-ns"])
def test_writer_variants_agree_with_tshark(tmp_path, order, nano):
    pkts = ether_packets()
    path = tmp_path / "w.pcap"
    with PcapWriter(path, nanosecond=nano, byteorder=order) as w:
        for ts, data, orig in pkts:
            w.write(ts, data, orig)
    got, problems, _ = read_all(path)
    assert problems == []
    ref = tshark_frames(path)
    assert [(f, len(d), o) for f, _, _, d, o in got] == [(f, c, n) for f, _, c, n, _ in ref]
    for (_, ts, *_), (_, rts, *_) in zip(got, ref, strict=True):
        assert ts == pytest.approx(rts, abs=1e-6)


@needs_editcap
@pytest.mark.parametrize("fmt", ["pcap", "nsecpcap", "modpcap"])
def test_files_converted_by_editcap(tmp_path, fmt):
    pkts = ether_packets()
    src = tmp_path / "src.pcap"
    wrpcap(str(src), [Ether(d) for _, d, _ in pkts])
    dst = tmp_path / f"dst.{fmt}"
    subprocess.run(["editcap", "-F", fmt, str(src), str(dst)], check=True, capture_output=True)
    got, problems, _ = read_all(dst)
    assert problems == []
    assert [d for _, _, _, d, _ in got] == [d for _, d, _ in pkts]
    ref = tshark_frames(dst)
    for (_, ts, *_), (_, rts, *_) in zip(got, ref, strict=True):
        assert ts == pytest.approx(rts, abs=1e-6)


def test_snaplen_truncated_records_keep_orig_len(tmp_path):
    pkts = [(ts, data[:40], len(data)) for ts, data, _ in ether_packets(4)]
    path = tmp_path / "snap.pcap"
    path.write_bytes(hand_pcap(pkts, "<", False, snaplen=40))
    got, problems, src = read_all(path)
    assert problems == [] and src.snaplen == 40
    assert [(len(d), o) for _, _, _, d, o in got] == [(40, o) for _, _, o in pkts]


@pytest.mark.parametrize("cut,expect", [
    (10, "frame 12: capture ends inside a record header (10 of 16 bytes)"),
    (16 + 5, "frame 12: capture ends inside a record (5 of "),
])
def test_truncated_last_record_is_reported_and_the_rest_decoded(tmp_path, cut, expect):
    pkts = ether_packets(12)
    whole = hand_pcap(pkts, "<", False)
    last_start = len(whole) - 16 - len(pkts[-1][1])
    path = tmp_path / "trunc.pcap"
    path.write_bytes(whole[:last_start + cut])
    got, problems, src = read_all(path)
    assert len(got) == 11 and src.packets == 11
    assert [d for _, _, _, d, _ in got] == [d for _, d, _ in pkts[:11]]
    assert len(problems) == 1 and problems[0].startswith(expect)


def test_corrupt_record_length_stops_with_a_problem(tmp_path):
    pkts = ether_packets(5)
    data = bytearray(hand_pcap(pkts, ">", False))
    # the third record's captured length becomes absurd
    pos = 24 + sum(16 + len(d) for _, d, _ in pkts[:2])
    struct.pack_into(">I", data, pos + 8, 0x7FFFFFFF)
    path = tmp_path / "corrupt.pcap"
    path.write_bytes(bytes(data))
    got, problems, _ = read_all(path)
    assert len(got) == 2
    assert problems == [f"frame 3: corrupt pcap record header (captured length {0x7FFFFFFF} is "
                        f"larger than {16 << 20}); the rest of the file is skipped"]


def test_header_only_file_has_no_packets(tmp_path):
    path = tmp_path / "empty.pcap"
    path.write_bytes(hand_pcap([], "<", True))
    got, problems, src = read_all(path)
    assert got == [] and problems == [] and src.packets == 0


def test_linktype_field_fcs_bits_are_masked(tmp_path):
    path = tmp_path / "fcs.pcap"
    raw = bytearray(hand_pcap(ether_packets(1), "<", False))
    struct.pack_into("<I", raw, 20, 1 | 0x10000000 | (2 << 29))   # FCS present, 4 bytes
    path.write_bytes(bytes(raw))
    got, _, src = read_all(path)
    assert src.linktypes == [1] and got[0][2] == 1
