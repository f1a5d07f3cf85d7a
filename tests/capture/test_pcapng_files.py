"""pcapng: interfaces with different link types and resolutions, sections, block kinds."""

from __future__ import annotations

import struct
import subprocess

import pytest
from capture_helpers import (
    T0,
    ether_packets,
    needs_editcap,
    needs_tshark,
    read_all,
    sll2_packets,
    tshark_frames,
)

from kwsniff.capture import linktypes as lt
from kwsniff.capture.writer import PcapngWriter, PcapWriter


def two_interface_file(path, order="<"):
    eth, sll = ether_packets(6), sll2_packets(4)
    with PcapngWriter(path, byteorder=order) as w:
        w.add_interface(lt.ETHERNET, name="eth0")                          # microseconds
        w.add_interface(lt.LINUX_SLL2, tsresol=9, name="any", snaplen=9000)  # nanoseconds
        expected = []
        for i in range(6):
            w.write(*eth[i], interface=0)
            expected.append((eth[i], lt.ETHERNET))
            if i < 4:
                w.write(*sll[i], interface=1, comment=f"sll {i}")
                expected.append((sll[i], lt.LINUX_SLL2))
    return expected


@needs_tshark
@pytest.mark.parametrize("order", ["<", ">"])
def test_two_interfaces_with_different_linktypes_and_tsresol(tmp_path, order):
    path = tmp_path / "two.pcapng"
    expected = two_interface_file(path, order)
    got, problems, src = read_all(path)
    assert problems == [] and src.format == "pcapng"
    assert src.linktypes == [lt.ETHERNET, lt.LINUX_SLL2]
    assert [(lt_, d, o) for _, _, lt_, d, o in got] == [
        (linktype, d, o) for (_, d, o), linktype in expected]
    for (frame, ts, *_), ((ets, _, _), _), (rframe, rts, *_) in zip(
            got, expected, tshark_frames(path), strict=True):
        assert frame == rframe
        assert ts == pytest.approx(ets, abs=1e-6)
        assert ts == pytest.approx(rts, abs=1e-6)
    names = [i.name for i in src._walker.interfaces]
    assert names == ["eth0", "any"]


def test_binary_tsresol_and_tsoffset(tmp_path):
    path = tmp_path / "res.pcapng"
    with PcapngWriter(path) as w:
        w.add_interface(lt.RAW, tsresol=0x80 | 10, tsoffset=1_600_000_000)   # 1/1024 s
        w.write(1_600_000_000 + 12.5, b"\x45" + bytes(19))
        w.write(1_600_000_000 + 13 + 3 / 1024, b"\x45" + bytes(19))
    got, problems, _ = read_all(path)
    assert problems == []
    assert [ts for _, ts, *_ in got] == [1_600_000_012.5, 1_600_000_013 + 3 / 1024]


def test_several_sections_with_different_byte_orders(tmp_path):
    path = tmp_path / "sections.pcapng"
    eth, sll = ether_packets(3), sll2_packets(2)
    with PcapngWriter(path, byteorder="<") as w:
        w.add_interface(lt.ETHERNET)
        for p in eth:
            w.write(*p)
        w.new_section(">")
        w.add_interface(lt.LINUX_SLL2, tsresol=9)
        w.add_interface(lt.ETHERNET)
        w.write(*sll[0], interface=0)
        w.write(*eth[0], interface=1)
        w.new_section("<")
        w.add_interface(lt.LINUX_SLL2)
        w.write(*sll[1])
    got, problems, src = read_all(path)
    assert problems == []
    assert [(f, t, d) for f, _, t, d, _ in got] == [
        (1, 1, eth[0][1]), (2, 1, eth[1][1]), (3, 1, eth[2][1]), (4, 276, sll[0][1]),
        (5, 1, eth[0][1]), (6, 276, sll[1][1])]
    assert src._walker.sections == 3


def test_simple_packet_blocks_take_interface_zero_and_previous_timestamp(tmp_path):
    path = tmp_path / "spb.pcapng"
    with PcapngWriter(path) as w:
        w.add_interface(lt.ETHERNET, snaplen=64)
        w.write(T0, b"e" * 20)
        w.write_simple(b"s" * 30)
        w.write_simple(b"t" * 64, orig_len=1500)   # truncated by the snap length
    got, problems, _ = read_all(path)
    assert problems == []
    assert got == [(1, T0, 1, b"e" * 20, 20), (2, T0, 1, b"s" * 30, 30),
                   (3, T0, 1, b"t" * 64, 1500)]


def test_obsolete_packet_block_and_unknown_blocks(tmp_path):
    path = tmp_path / "old.pcapng"
    with PcapngWriter(path) as w:
        w.add_interface(lt.ETHERNET)
        w.write_block(4, struct.pack("<HH", 0, 0))                  # name resolution block
        ticks = int(T0 * 1_000_000)
        data = b"old packet block"
        w.write_block(2, struct.pack("<HHIIII", 0, 0, ticks >> 32, ticks & 0xFFFFFFFF,
                                     len(data), 99) + data)        # obsolete Packet Block
        w.write_block(5, struct.pack("<III", 0, 0, 0))             # interface statistics
        w.write_block(0x40000BAD, b"custom block, skipped")
        w.write(T0 + 1, b"after")
    got, problems, _ = read_all(path)
    assert problems == []
    assert got == [(1, T0, 1, data, 99), (2, T0 + 1, 1, b"after", 5)]


def test_packet_for_undefined_interface_is_reported_and_skipped(tmp_path):
    path = tmp_path / "undef.pcapng"
    with PcapngWriter(path) as w:
        w.add_interface(lt.ETHERNET)
        w.write(T0, b"ok1")
        w._interfaces.append((10**6, 0))     # make the writer emit interface 1 anyway
        w.write(T0, b"bad", interface=1)
        w.write(T0, b"ok2")
    got, problems, _ = read_all(path)
    assert [d for *_, d, _ in got] == [b"ok1", b"ok2"]
    assert len(problems) == 1 and "undefined interface 1" in problems[0]


def test_truncated_last_block_is_reported(tmp_path):
    path = tmp_path / "t.pcapng"
    two_interface_file(path)
    raw = path.read_bytes()
    path.write_bytes(raw[:-7])
    got, problems, _ = read_all(path)
    assert len(got) == 9
    assert problems == ["frame 10: capture ends inside a packet block (125 of 132 bytes); the last "
                        "packet is incomplete and was skipped"]


def test_corrupt_block_length_stops_with_a_problem(tmp_path):
    path = tmp_path / "c.pcapng"
    two_interface_file(path)
    raw = bytearray(path.read_bytes())
    got_before, _, _ = read_all(path)
    # corrupt the trailing length of the 4th packet block
    pos, count = 0, 0
    while True:
        btype, blen = struct.unpack_from("<II", raw, pos)
        if btype == 6:
            count += 1
            if count == 4:
                struct.pack_into("<I", raw, pos + blen - 4, blen + 4)
                break
        pos += blen
    path.write_bytes(bytes(raw))
    got, problems, _ = read_all(path)
    assert got == got_before[:3]
    assert len(problems) == 1 and problems[0].startswith("corrupt pcapng: enhanced packet block")


@needs_editcap
def test_mergecap_of_two_linktypes(tmp_path):
    eth_path, sll_path = tmp_path / "eth.pcap", tmp_path / "sll.pcap"
    with PcapWriter(eth_path, lt.ETHERNET) as w:
        for p in ether_packets(5):
            w.write(*p)
    with PcapWriter(sll_path, lt.LINUX_SLL2) as w:
        for p in sll2_packets(5):
            w.write(*p)
    merged = tmp_path / "merged.pcapng"
    subprocess.run(["mergecap", "-F", "pcapng", "-w", str(merged), str(eth_path), str(sll_path)],
                   check=True, capture_output=True)
    got, problems, src = read_all(merged)
    assert problems == []
    assert sorted(src.linktypes) == [1, 276]
    ref = tshark_frames(merged)
    assert [(f, len(d)) for f, _, _, d, _ in got] == [(f, c) for f, _, c, _, _ in ref]
    assert [ts for _, ts, *_ in got] == pytest.approx([r[1] for r in ref], abs=1e-6)
