"""The C kernel of the capture walkers (:mod:`kwsniff.capture._pcap`) cuts exactly the
packets their Python references cut: ``pcap_batch`` against
:meth:`PcapWalker._walk_py`, ``pcapng_epbs`` against :meth:`PcapngWalker.walk` with
``epb_batch`` off. Compared on the sample captures (also rewritten as pcapng), every
pcap flavour cut at every byte, corrupt lengths, random bytes and mutated files: the
same packets (timestamps bit for bit), the same ``walker.frame`` after every packet,
the same stop position, errors, problems and release points. Skips when the kernel is
not in use (not built, ``KWSNIFF_PURE=1``, or its C file changed since the build).
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwsniff import _compiled
from kwsniff.capture import linktypes as lt
from kwsniff.capture import pcap as pcap_mod
from kwsniff.capture import pcapng as pcapng_mod
from kwsniff.capture.packet import PCAP_KERNEL as K
from kwsniff.capture.pcap import FILE_HEADER_LEN, PCAP_MAGICS, PcapWalker
from kwsniff.capture.pcapng import PcapngWalker
from kwsniff.capture.writer import PcapngWriter

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "pcaps").glob("*.pcap"))

pytestmark = pytest.mark.skipif(
    K is None, reason="kernel not in use: "
    + _compiled.kernels_unused.get("kwsniff.capture._pcap", "?"))


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


def test_the_kernel_is_the_path_in_use():
    assert PcapWalker.walk is PcapWalker._walk_batches
    assert PcapngWalker.epb_batch is K.pcapng_epbs
    assert K.__name__ == "kwsniff.capture._pcap"


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


# ------------------------------------------------------------------ the kernel's own API

def test_bad_arguments_raise_and_leave_nothing_behind():
    buf = bytes(100)
    with pytest.raises(ValueError):
        K.pcap_batch(buf, 0, 200, 200, False, 16, 10**6, 1, 0, 1 << 24, 8)   # end > len
    with pytest.raises(ValueError):
        K.pcap_batch(buf, 0, 100, 100, False, 8, 10**6, 1, 0, 1 << 24, 8)   # hdrlen < 16
    with pytest.raises(ValueError):
        K.pcapng_epbs(buf, -1, 100, 100, False, [], 0, 1 << 24, 8)
    with pytest.raises(TypeError):
        K.pcapng_epbs(buf, 0, 100, 100, False, (), 0, 1 << 24, 8)          # not a list
    with pytest.raises(TypeError):
        K.pcap_batch("text", 0, 4, 4, False, 16, 10**6, 1, 0, 1 << 24, 8)


def test_any_buffer_gives_the_same_batch():
    buf = _pcap(b"\xd4\xc3\xb2\xa1", [(1, 2, b"abc", 3), (4, 5, b"", 9)])
    args = (FILE_HEADER_LEN, len(buf), len(buf), False, 16, 10**6, 1, 0, 1 << 24, 8)
    want = K.pcap_batch(buf, *args)
    assert want[0] == [(1, 1.000002, 1, b"abc", 3), (2, 4.000005, 1, b"", 9)]
    assert K.pcap_batch(bytearray(buf), *args) == K.pcap_batch(memoryview(buf), *args) == want
    assert all(type(p[3]) is bytes for p in want[0])
