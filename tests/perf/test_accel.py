"""The C accelerator (kwsniff._speedups) gives exactly what the pure-Python path gives.

Compared function by function (the record walker and the Ethernet/IPv4/TCP fast path)
on the sample captures and on random, truncated and corrupted inputs, and end to end:
``decode``, ``decode -V`` and ``export`` with ``KWSNIFF_PURE=1`` against the default.
These tests skip when the accelerator is not built (no C compiler at install time).
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwsniff import accel
from kwsniff.capture import pcap as pcap_mod
from kwsniff.capture import linktypes as lt
from kwsniff.capture import pcapng as pcapng_mod
from kwsniff.capture.pcap import FILE_HEADER_LEN, PCAP_MAGICS, PcapWalker
from kwsniff.capture.pcapng import PcapngWalker
from kwsniff.capture.writer import PcapngWriter
from kwsniff.tcp.packet import PacketParser

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "pcaps").glob("*.pcap"))

C = accel.speedups
pytestmark = pytest.mark.skipif(C is None, reason=f"accelerator not in use: {accel.status}")


# ------------------------------------------------------------------ record walker

def _walk(method: str, buf: bytes, header: bytes, release: bool
          ) -> tuple[list, int, int, str | None, list[int]]:
    """(packets, return position, walker.frame, walker.error, release positions); each
    packet is paired with walker.frame as it was right after the packet was yielded."""
    walker = PcapWalker(header)
    released: list[int] = []
    gen = getattr(walker, method)(buf, FILE_HEADER_LEN, len(buf), None,
                                  released.append if release else None)
    packets = []
    while True:
        try:
            packet = next(gen)
            packets.append((packet, walker.frame))
        except StopIteration as stop:
            return packets, stop.value, walker.frame, walker.error, released


def _assert_same_walk(buf: bytes, release: bool = True) -> None:
    header = buf[:FILE_HEADER_LEN]
    py = _walk("_walk_py", buf, header, release)
    c = _walk("_walk_batches", buf, header, release)
    assert c == py
    # walker.frame counts exactly the packets yielded so far
    assert all(frame == packet[0] for packet, frame in c[0])
    # and the float timestamps are bit-identical, not just equal
    assert ([struct.pack("<d", p[1]) for p, _ in c[0]]
            == [struct.pack("<d", p[1]) for p, _ in py[0]])


def _pcap(magic: bytes, records: list[tuple[int, int, bytes, int]], linktype: int = 1) -> bytes:
    order, _units, modified = PCAP_MAGICS[magic]
    out = [magic, struct.pack(order + "HHiIII", 2, 4, 0, 0, 65535, linktype)]
    for sec, frac, data, orig in records:
        out.append(struct.pack(order + "IIII", sec, frac, len(data), orig))
        if modified:
            out.append(b"\x00" * 8)
        out.append(data)
    return b"".join(out)


def test_the_accelerator_is_the_path_in_use():
    assert PcapWalker.walk is PcapWalker._walk_batches
    assert accel.status.startswith("C accelerator")


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_walker_same_on_sample_captures(path, monkeypatch):
    buf = path.read_bytes()
    _assert_same_walk(buf, release=False)
    # with release points every few kB, so batches end at marks as well as when full
    monkeypatch.setattr(pcap_mod, "RELEASE_STEP", 5000)
    _assert_same_walk(buf, release=True)


@pytest.mark.parametrize("magic", list(PCAP_MAGICS), ids=lambda m: m.hex())
def test_walker_same_for_every_pcap_flavour_cut_anywhere(magic, monkeypatch):
    monkeypatch.setattr(pcap_mod, "BATCH", 3)
    monkeypatch.setattr(pcap_mod, "RELEASE_STEP", 50)
    rng = random.Random(magic)
    records = [(rng.randrange(1 << 32), rng.randrange(1 << 32), rng.randbytes(rng.randrange(40)),
                rng.randrange(1 << 32)) for _ in range(30)]
    buf = _pcap(magic, records)
    for cut in range(FILE_HEADER_LEN, len(buf) + 1):
        _assert_same_walk(buf[:cut])


def test_walker_same_on_a_corrupt_record_length():
    magic = b"\xd4\xc3\xb2\xa1"
    good = _pcap(magic, [(1, 2, b"x" * 10, 10)] * 5)
    bad = bytearray(good)
    # the third record's captured length: larger than any valid record
    third = FILE_HEADER_LEN + 2 * 26
    struct.pack_into("<I", bad, third + 8, pcap_mod.MAX_RECORD + 1)
    _assert_same_walk(bytes(bad))
    assert "corrupt pcap record header" in _walk("_walk_batches", bytes(bad), good[:24], False)[3]


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=400), st.sampled_from(list(PCAP_MAGICS)))
def test_walker_same_on_random_bytes(body, magic):
    _assert_same_walk(_pcap(magic, [])[:FILE_HEADER_LEN] + body)


# ------------------------------------------------------------ pcapng block walker

def _walk_ng(buf: bytes, accelerated: bool, release: bool) -> tuple:
    """Everything a pcapng walk produces, with walker.frame after every packet."""
    saved = PcapngWalker.epb_batch
    if not accelerated:
        PcapngWalker.epb_batch = None
    try:
        walker = PcapngWalker()
        released: list[int] = []
        gen = walker.walk(buf, 0, len(buf), None, released.append if release else None)
        packets = []
        while True:
            try:
                packet = next(gen)
                packets.append((packet, walker.frame, struct.pack("<d", packet[1])))
            except StopIteration as stop:
                return (packets, stop.value, walker.frame, walker.error, walker.problems,
                        walker.interfaces, released, walker._last_ts)
    finally:
        PcapngWalker.epb_batch = saved


def _assert_same_ng(buf: bytes, release: bool = True) -> None:
    c = _walk_ng(buf, True, release)
    assert c == _walk_ng(buf, False, release)
    assert all(frame == packet[0] for packet, frame, _ in c[0])


def _rich_pcapng(path: Path) -> bytes:
    """Sections in both byte orders; interfaces with micro/nano/binary/huge resolutions
    and offsets; simple, obsolete and unknown blocks; a packet for an undefined interface."""
    rng = random.Random(3)
    with PcapngWriter(path, byteorder="<") as w:
        w.add_interface(lt.ETHERNET)
        w.add_interface(lt.LINUX_SLL2, tsresol=9, tsoffset=-5)
        w.add_interface(lt.RAW, tsresol=0x80 | 30, tsoffset=1_600_000_000)
        for i in range(40):
            w.write(1_700_000_000 + i * 0.37 + rng.random(), rng.randbytes(rng.randrange(60)),
                    interface=i % 3)
        w.write_simple(b"s" * 30)
        w.write_block(0x40000BAD, b"custom block, skipped")
        w._interfaces.append((10**6, 0))     # a packet for interface 3, never described
        w.write(1_700_000_100.0, b"undefined", interface=3)
        w._interfaces.pop()
        w.new_section(">")
        w.add_interface(lt.ETHERNET, tsresol=127)  # 10**127 units per second
        w.add_interface(lt.ETHERNET, tsresol=3, tsoffset=2**60)
        for i in range(20):
            # raw tick counts: small, around 2**53 (where exact float division ends), huge
            ticks = rng.choice([rng.randrange(1 << 20), (1 << 53) + rng.randrange(-3, 4),
                                rng.randrange(1 << 64)])
            data = rng.randbytes(rng.randrange(60))
            w.write_block(6, struct.pack(">IIIII", i % 2, ticks >> 32, ticks & 0xFFFFFFFF,
                                         len(data), len(data) + i) + data)
    return path.read_bytes()


def test_pcapng_walker_is_accelerated():
    assert PcapngWalker.epb_batch is C.pcapng_epbs


def test_pcapng_walker_same_on_a_rich_file_cut_anywhere(tmp_path, monkeypatch):
    buf = _rich_pcapng(tmp_path / "rich.pcapng")
    _assert_same_ng(buf, release=False)
    monkeypatch.setattr(pcapng_mod, "BATCH", 4)
    monkeypatch.setattr(pcapng_mod, "RELEASE_STEP", 300)
    for cut in range(0, len(buf) + 1, 7):
        _assert_same_ng(buf[:cut])


def test_pcapng_walker_same_on_corrupted_files(tmp_path, monkeypatch):
    monkeypatch.setattr(pcapng_mod, "BATCH", 5)
    buf = _rich_pcapng(tmp_path / "rich.pcapng")
    rng = random.Random(11)
    for _ in range(400):
        m = bytearray(buf)
        for _ in range(rng.randrange(1, 4)):
            m[rng.randrange(len(m))] = rng.randrange(256)
        _assert_same_ng(bytes(m))


@pytest.mark.parametrize("path", SAMPLES[:6], ids=lambda p: p.name)
def test_pcapng_walker_same_on_sample_captures_converted(path, tmp_path, monkeypatch):
    """The sample captures rewritten as pcapng (microsecond and nanosecond stamps)."""
    from kwsniff.capture import open_capture
    with open_capture(str(path)) as src:
        packets = [(ts, data, orig) for _f, ts, _lt, data, orig in src]
    for tsresol in (6, 9):
        out = tmp_path / f"{tsresol}.pcapng"
        with PcapngWriter(out) as w:
            w.add_interface(lt.ETHERNET, tsresol=tsresol)
            for ts, data, orig in packets:
                w.write(ts, data, orig_len=orig)
        buf = out.read_bytes()
        _assert_same_ng(buf, release=False)
        monkeypatch.setattr(pcapng_mod, "RELEASE_STEP", 5000)
        _assert_same_ng(buf, release=True)
        monkeypatch.undo()


# ------------------------------------------------- Ethernet/IPv4/TCP fast path

def _packets(path: Path) -> list[bytes]:
    from kwsniff.capture import open_capture
    with open_capture(str(path)) as src:
        return [data for _f, _t, lt, data, _o in src if lt == 1]


def _assert_same_parse(data: bytes) -> None:
    """The fast path either declines or gives exactly what the full parser gives."""
    fast = C.eth_ipv4_tcp(data)
    if fast is not None:
        assert fast == PacketParser().parse(1, 0.0, 1, data, len(data))


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_fast_parse_same_on_sample_captures(path):
    packets = _packets(path)
    taken = 0
    for data in packets:
        _assert_same_parse(data)
        taken += C.eth_ipv4_tcp(data) is not None
    # the fast path is the common case, not a path that never runs
    assert not packets or taken > len(packets) // 2


def test_fast_parse_same_on_mutated_packets():
    rng = random.Random(7)
    packets = [p for path in SAMPLES[:4] for p in _packets(path)[:50]]
    for data in packets:
        for _ in range(20):
            m = bytearray(data)
            for _ in range(rng.randrange(1, 4)):
                # mutate the headers (where the fast path looks), sometimes cut the packet
                m[rng.randrange(min(len(m), 60))] = rng.randrange(256)
            if rng.random() < 0.3:
                del m[rng.randrange(len(m) + 1):]
            _assert_same_parse(bytes(m))


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=120))
def test_fast_parse_same_on_random_bytes(data):
    # an Ethernet/IPv4/TCP prefix now and then, so the fast path's checks are reached
    _assert_same_parse(data)
    prefixed = bytearray(data.ljust(60, b"\0"))
    prefixed[12:15] = b"\x08\x00\x45"
    prefixed[23] = 6
    _assert_same_parse(bytes(prefixed))


def test_fast_parse_accepts_any_buffer():
    data = _packets(SAMPLES[0])[0]
    assert C.eth_ipv4_tcp(memoryview(data)) == C.eth_ipv4_tcp(bytearray(data)) \
        == C.eth_ipv4_tcp(data)
    with pytest.raises(TypeError):
        C.eth_ipv4_tcp("not bytes")


# -------------------------------------------------------------------- end to end

def _run(args: list[str], pure: bool) -> tuple[bytes, bytes]:
    env = dict(os.environ)
    env.pop("KWSNIFF_PURE", None)
    if pure:
        env["KWSNIFF_PURE"] = "1"
    proc = subprocess.run([sys.executable, "-m", "kwsniff", *args], capture_output=True,
                          env=env, cwd=ROOT, timeout=300)
    return proc.stdout, proc.stderr


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_decode_and_export_same_with_and_without_the_accelerator(path):
    for args in (["decode", "-V", "-x", "-j", "1", str(path)],
                 ["export", "--records", "-j", "1", "-o", "-", str(path)]):
        assert _run(args, pure=False) == _run(args, pure=True), args


def test_pure_switch_is_reported():
    env = dict(os.environ, KWSNIFF_PURE="1")
    out = subprocess.run([sys.executable, "-m", "kwsniff.accel"], capture_output=True,
                         text=True, env=env, check=True).stdout
    assert out.startswith("pure Python (KWSNIFF_PURE is set)")
