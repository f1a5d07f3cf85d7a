"""Captures cut at every byte of their first packets (pcap, pcapng, gzip-compressed):
every packet before the cut is decoded, the cut is reported with its frame number, and
nothing raises."""

from __future__ import annotations

import io

import pytest

from fuzz import seeds, wire
from kwsniff.capture import open_capture
from kwsniff.errors import CaptureError
from nasty import check, decode_capture

CAPTURES = [p for p in seeds.capture_paths()
            if p.name in ("rdkafka-consumer-group.pcap", "kafka-python-0.8.2.pcap",
                          "tansu-admin.pcap", "midstream.pcap")]
#: packets whose cuts are tried: at every byte of the first EVERY_BYTE bytes, then at a
#: stride (large packets) and at every record boundary
FIRST = 8
EVERY_BYTE = 1500
STRIDE = 41


def _packets(data: bytes) -> list[tuple]:
    with open_capture(io.BytesIO(data)) as src:
        return [(f, ts, lt, bytes(d), o) for f, ts, lt, d, o in src]


def _first_packets_pcap(path) -> tuple[bytes, int]:  # noqa: ANN001
    """The capture's bytes up to the end of its FIRST-th packet record, and that length."""
    data = path.read_bytes()
    pos = 24
    for _ in range(FIRST):
        incl = int.from_bytes(data[pos + 8:pos + 12], "little" if data[:4] == b"\xd4\xc3\xb2\xa1"
                              else "big")
        pos += 16 + incl
    return data, pos


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_pcap_cut_at_every_byte(path) -> None:  # noqa: ANN001
    data, end = _first_packets_pcap(path)
    full = _packets(data[:end])
    assert len(full) == FIRST
    ends = _record_ends(data, end)
    cuts = sorted(set(range(min(end, EVERY_BYTE) + 1)) | set(range(EVERY_BYTE, end + 1, STRIDE))
                  | set(ends) | {e - 1 for e in ends} | {e + 1 for e in ends if e < end})
    for cut in cuts:
        head = data[:cut]
        if cut < 24:
            with pytest.raises(CaptureError):
                open_capture(io.BytesIO(head))
            continue
        got = _packets(head)
        assert got == full[:len(got)], cut                 # nothing invented
        boundary = cut in ends
        assert len(got) == sum(1 for e in ends if e <= cut) - 1, cut
        run = decode_capture(head)
        assert run is not None
        check(run, render=cut % 7 == 0)
        if not boundary:
            assert run.capture_problems, f"cut at byte {cut} is not reported"
            assert f"frame {len(got) + 1}" in " ".join(run.capture_problems) or \
                f"after frame {len(got)}" in " ".join(run.capture_problems), run.capture_problems
        else:
            assert not run.capture_problems, (cut, run.capture_problems)


def _record_ends(data: bytes, end: int) -> list[int]:
    """Offsets where the file header and each record end (cuts that lose nothing)."""
    order = "little" if data[:4] == b"\xd4\xc3\xb2\xa1" else "big"
    ends = [24]
    pos = 24
    while pos < end:
        pos += 16 + int.from_bytes(data[pos + 8:pos + 12], order)
        ends.append(pos)
    return ends


def test_pcapng_cut_at_every_byte() -> None:
    path = CAPTURES[0]
    pkts = _packets(path.read_bytes())[:FIRST]
    ng = wire.pcap_bytes([(ts, d) for _, ts, _, d, _ in pkts], pkts[0][2], pcapng=True)
    full = _packets(ng)
    assert [p[3] for p in full] == [p[3] for p in pkts]
    block_ends = {0}
    pos = 0
    while pos < len(ng):
        pos += int.from_bytes(ng[pos + 4:pos + 8], "little")
        block_ends.add(pos)
    for cut in range(len(ng) + 1):
        try:
            src = open_capture(io.BytesIO(ng[:cut]))
        except CaptureError as err:
            assert cut < 40, (cut, err)                     # only a cut section header
            continue
        with src:
            got = [(f, ts, lt, bytes(d), o) for f, ts, lt, d, o in src]
            problems = list(src.problems)
        assert got == full[:len(got)], cut
        if cut not in block_ends:
            assert problems, f"cut at byte {cut} of the pcapng file is not reported"
        run = decode_capture(ng[:cut])
        if run is not None:
            check(run, render=False)


def test_gzip_capture_cut_at_every_byte() -> None:
    data, end = _first_packets_pcap(CAPTURES[0])
    full = _packets(data[:end])
    gz = wire.gzip_bytes(data[:end])
    for cut in range(2, len(gz) + 1):
        try:
            src = open_capture(io.BytesIO(gz[:cut]))
        except CaptureError:
            continue                                        # not even a file header yet
        with src:
            got = [(f, ts, lt, bytes(d), o) for f, ts, lt, d, o in src]
            problems = list(src.problems)
        assert got == full[:len(got)], cut
        if cut < len(gz):
            assert any("gzip" in p and "frame" in p for p in problems), (cut, problems)
