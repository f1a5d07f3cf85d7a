"""Capture readers: pcap/pcapng (memory-mapped and streamed), compressed input.

Invariants: opening either succeeds or raises :class:`~kwsniff.errors.CaptureError`;
iterating never raises; frame numbers count from 1 without holes; no packet is larger
than ``MAX_RECORD``; the memory-mapped and the streamed reader yield the same packets;
the engine and the output views take whatever timestamps, lengths and link types the
file holds.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable

from fuzz import checks, wire
from fuzz import seeds as _seeds
from kwsniff.capture import MAX_RECORD, open_capture
from kwsniff.capture.writer import PcapngWriter
from kwsniff.engine import Engine, EngineOptions
from kwsniff.errors import CaptureError

MAX_LEN = 8192


def seeds() -> Iterable[bytes]:
    yield from _seeds.capture_heads(3000)
    pkts = [(wire.T0 + i, data) for i, (lt, data) in enumerate(_seeds.packets(6)) if lt == 1]
    yield wire.pcap_bytes(pkts[:6], pcapng=True)
    yield wire.gzip_bytes(wire.pcap_bytes(pkts[:4]))
    yield _multi_interface(pkts[:4])


def _multi_interface(pkts: list[tuple[float, bytes]]) -> bytes:
    """pcapng with two sections, interfaces of different link types, resolutions and
    offsets, a comment and a simple packet block."""
    buf = io.BytesIO()
    with PcapngWriter(buf) as w:
        eth = w.add_interface(1, tsresol=9, name="eth0")
        w.add_interface(101, tsresol=0x83, tsoffset=-5)
        for ts, data in pkts[:2]:
            w.write(ts, data, interface=eth, comment="c")
        w.write_simple(pkts[2][1][14:])
        w.new_section(">")
        w.add_interface(1, snaplen=64)
        for ts, data in pkts[2:]:
            w.write(ts, data[:64], len(data))
    return buf.getvalue()


def _read(fileobj: object) -> tuple[list[tuple], list[str]] | None:
    try:
        src = open_capture(fileobj)  # type: ignore[arg-type]
    except CaptureError:
        return None
    out = []
    with src:
        for frame, ts, linktype, data, orig_len in src:
            assert frame == len(out) + 1, (frame, len(out))
            assert len(data) <= MAX_RECORD
            assert isinstance(ts, float) and isinstance(linktype, int) and orig_len >= 0
            out.append((frame, ts, linktype, bytes(data), orig_len))
        problems = list(src.problems)
        assert src.packets == len(out)
    assert all(isinstance(p, str) and p for p in problems)
    return out, problems


def _mapped(data: bytes) -> tuple[list[tuple], list[str]] | None:
    fd = os.memfd_create("kwsniff-fuzz")
    with open(fd, "w+b") as fh:
        fh.write(data)
        fh.flush()
        fh.seek(0)
        return _read(fh)


def one_input(data: bytes) -> None:
    streamed = _read(io.BytesIO(data))
    mapped = _mapped(data)
    assert (streamed is None) == (mapped is None)
    if streamed is not None and mapped is not None:
        assert streamed[0] == mapped[0], "mmap and streamed readers disagree"
        # odd timestamps, lengths and link types must survive the whole pipeline
        eng = Engine(EngineOptions(max_frame=1 << 20, resync_window=8192, detect_budget=4096))
        exchanges = list(eng.run(streamed[0]))
        checks.check_exchanges(exchanges)
        checks.render_all(exchanges[:4], spans=False, records=False)
        checks.check_spill_same(exchanges[:4])
    if len(data) < 2048:
        gz = _read(io.BytesIO(wire.gzip_bytes(data, 1)))
        if streamed is not None and gz is not None:
            assert gz[0] == streamed[0], "gzip-compressed and plain readers disagree"

