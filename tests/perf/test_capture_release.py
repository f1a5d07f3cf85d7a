"""Memory-mapped captures release the pages they walked (flat RSS), with identical packets."""

from __future__ import annotations

import io
import random
import struct
from pathlib import Path

import pytest

from kwsniff.capture import open_capture
from kwsniff.capture.packet import RELEASE_STEP
from kwsniff.capture.writer import PcapngWriter, PcapWriter


def _write(path: Path, writer_cls: type, total: int) -> int:
    rng = random.Random(7)
    n = 0
    with open(path, "wb") as fh:
        w = writer_cls(fh)
        if isinstance(w, PcapngWriter):
            w.add_interface(1)
        size = 0
        while size < total:
            data = rng.randbytes(rng.randint(60, 9000))
            w.write(1_700_000_000.0 + n / 1000, data)
            size += len(data) + 16
            n += 1
    return n


def _packets(source) -> list[tuple]:
    return [(f, ts, lt, bytes(d), o) for f, ts, lt, d, o in source]


@pytest.mark.parametrize("writer_cls", [PcapWriter, PcapngWriter])
def test_mapped_walk_releases_pages_and_matches_streaming(tmp_path: Path, writer_cls: type
                                                          ) -> None:
    path = tmp_path / "big.cap"
    count = _write(path, writer_cls, 3 * RELEASE_STEP)
    with open_capture(str(path)) as mapped:
        assert mapped._mapped is not None          # the memory-mapped path
        got = _packets(mapped)
        released = mapped._released
    # pages were dropped behind the walk (at least two steps of a 3-step file)
    assert released >= 2 * RELEASE_STEP - 65536
    with open(path, "rb") as fh:
        stream = io.BufferedReader(io.BytesIO(fh.read()))
    with open_capture(stream) as streamed:
        assert streamed._mapped is None
        want = _packets(streamed)
    assert len(got) == count
    assert got == want


def test_release_callback_positions_are_packet_boundaries(tmp_path: Path) -> None:
    """Every position handed to ``release`` is the end of a yielded record."""
    from kwsniff.capture.pcap import PcapWalker

    path = tmp_path / "big.pcap"
    _write(path, PcapWriter, 2 * RELEASE_STEP + 12345)
    data = path.read_bytes()
    walker = PcapWalker(data[:24])
    ends = set()
    seen: list[int] = []
    pos = 24
    for _frame, _ts, _lt, pkt, _orig in walker.walk(data, 24, len(data), None, seen.append):
        pos += 16 + len(pkt)
        ends.add(pos)
    assert seen and all(p in ends for p in seen)
    assert all(b - a > RELEASE_STEP for a, b in zip(seen, seen[1:]))
    assert struct.unpack_from("<I", data, 0)[0] == 0xA1B2C3D4
