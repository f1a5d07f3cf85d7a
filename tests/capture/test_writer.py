"""The pcap/pcapng writers: what other readers (tshark, kwsniff) see in their files."""

from __future__ import annotations

import io
import subprocess

import pytest
from capture_helpers import T0, ether_packets, needs_tshark, read_all

from kwsniff.capture import linktypes as lt
from kwsniff.capture.writer import PcapngWriter, PcapWriter


def test_flush_makes_packets_readable_while_writing(tmp_path):
    path = tmp_path / "live.pcapng"
    w = PcapngWriter(path)
    w.add_interface(lt.ETHERNET, snaplen=262144, name="eth0")
    for p in ether_packets(3):
        w.write(*p)
    w.flush()
    got, problems, _ = read_all(path)
    assert len(got) == 3 and problems == []
    w.write(*ether_packets(4)[3])
    w.close()
    w.close()
    assert len(read_all(path)[0]) == 4 and w.packets == 4


def test_writer_on_a_file_object_leaves_it_open():
    buf = io.BytesIO()
    with PcapWriter(buf, lt.RAW, snaplen=128) as w:
        w.write(T0, b"\x45" + bytes(19), orig_len=1500)
    assert not buf.closed
    got, problems, src = read_all(io.BytesIO(buf.getvalue()))
    assert got == [(1, T0, lt.RAW, b"\x45" + bytes(19), 1500)] and src.snaplen == 128


@needs_tshark
def test_comments_names_and_timestamps_as_tshark_sees_them(tmp_path):
    path = tmp_path / "c.pcapng"
    with PcapngWriter(path, byteorder=">") as w:
        w.add_interface(lt.ETHERNET, name="eth7", tsresol=9)
        w.write(T0 + 0.123456789, ether_packets(1)[0][1], comment="hello world")
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.comment",
                          "-e", "frame.interface_name", "-e", "frame.time_epoch"],
                         capture_output=True, text=True, check=True).stdout.split("\t")
    assert out[0] == "hello world" and out[1] == "eth7"
    assert float(out[2]) == pytest.approx(T0 + 0.123456789, abs=1e-6)


def test_invalid_arguments():
    with pytest.raises(ValueError):
        PcapWriter(io.BytesIO(), byteorder="=")
    w = PcapngWriter(io.BytesIO())
    w.add_interface(lt.ETHERNET, tsoffset=2_000_000_000)
    with pytest.raises(ValueError, match="not representable"):
        w.write(T0, b"x")       # before the interface's time offset
