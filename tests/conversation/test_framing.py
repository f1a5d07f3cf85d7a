"""Framer: size-delimited frames, capture-frame mapping, gaps, resynchronisation."""

from __future__ import annotations

import random
import struct

from kwsniff.kafka import plausible
from kwsniff.kafka.framing import HUNTING, NO, QUIET, SHORT, STRONG, SYNCED, WEAK, Framer


def req(corr: int, body: bytes = b"", client: bytes = b"cli", key: int = 3, ver: int = 1) -> bytes:
    payload = struct.pack(">hhih", key, ver, corr, len(client)) + client + body
    return struct.pack(">i", len(payload)) + payload


def checker(buf, pos, end):  # type: ignore[no-untyped-def]
    h = plausible.request_header_at(buf, pos, end, 1 << 20)
    if h is None:
        return (SHORT, 0) if end - pos < 14 else (NO, 0)
    return WEAK, h[0]


def strong_checker(wanted: set[int]):  # type: ignore[no-untyped-def]
    def check(buf, pos, end):  # type: ignore[no-untyped-def]
        v, size = checker(buf, pos, end)
        if v == WEAK and struct.unpack_from(">i", buf, pos + 8)[0] in wanted:
            return STRONG, size
        return v, size
    return check


def feed_chunks(fr: Framer, data: bytes, sizes: list[int], frame0: int = 1, offset0: int = 0):
    out = []
    pos = 0
    frame = frame0
    for n in sizes:
        chunk = data[pos:pos + n]
        out += fr.data(offset0 + pos, chunk, frame, float(frame))
        pos += n
        frame += 1
    return out


def test_frames_split_and_coalesced_with_frame_numbers() -> None:
    stream = req(1, b"x" * 100) + req(2) + req(3, b"y" * 5000)
    fr = Framer(checker)
    fr.start(True)
    out = feed_chunks(fr, stream, [50, 80, len(stream) - 130])
    assert [struct.unpack_from(">i", f.raw, 4)[0] for f in out] == [1, 2, 3]
    assert (out[0].frame_first, out[0].frame_last) == (1, 2)
    assert (out[1].frame_first, out[1].frame_last) == (2, 3)
    assert (out[2].frame_first, out[2].frame_last) == (3, 3)
    assert out[0].offset == 0 and out[1].offset == len(req(1, b"x" * 100))
    assert out[1].ts_first == 2.0 and out[1].ts_last == 3.0
    assert fr.skipped_bytes == 0


def test_byte_by_byte_equals_one_chunk() -> None:
    stream = b"".join(req(i, b"z" * (i * 7)) for i in range(20))
    a = Framer(checker)
    a.start(True)
    one = a.data(0, stream, 1, 1.0)
    b = Framer(checker)
    b.start(True)
    many = feed_chunks(b, stream, [1] * len(stream))
    assert [f.raw for f in one] == [f.raw for f in many]
    assert many[3].frame_first == many[3].offset + 1   # frame n carries byte n-1


def test_gap_inside_known_frame_keeps_sync() -> None:
    stream = req(1, b"a" * 1000) + req(2)
    fr = Framer(checker)
    fr.start(True)
    out = fr.data(0, stream[:300], 1, 1.0)
    out += fr.gap(300, 200, 2, 2.0)
    out += fr.data(500, stream[500:], 3, 3.0)
    assert len(out) == 2
    damaged, nxt = out
    assert damaged.missing == len(req(1, b"a" * 1000)) - 4 - len(damaged.raw)
    assert damaged.raw[:10] == req(1, b"a" * 1000)[4:14]
    assert damaged.discarded == len(req(1, b"a" * 1000)) - 500   # captured after the hole
    assert struct.unpack_from(">i", nxt.raw, 4)[0] == 2
    assert fr.state == SYNCED and fr.skipped_bytes == 0 and fr.gap_bytes == 200


def test_gap_over_boundary_resyncs_and_counts_skipped() -> None:
    frames = [req(i, b"q" * 40) for i in range(1, 8)]
    stream = b"".join(frames)
    fr = Framer(checker)
    fr.start(True)
    cut = len(frames[0]) + 16          # the hole starts inside frame 2, after its header
    out = fr.data(0, stream[:cut], 1, 1.0)
    hole_end = len(frames[0]) + len(frames[1]) + 7     # ends inside frame 3
    out += fr.gap(cut, hole_end - cut, 2, 2.0)
    out += fr.data(hole_end, stream[hole_end:], 3, 3.0)
    out += fr.finish()
    corrs = [struct.unpack_from(">i", f.raw, 4)[0] for f in out if not f.missing]
    assert corrs == [1, 4, 5, 6, 7]
    damaged = [f for f in out if f.missing]
    assert len(damaged) == 1 and struct.unpack_from(">i", damaged[0].raw, 4)[0] == 2
    assert fr.skipped_bytes == len(frames[2]) - 7
    assert any("resynchronised" in p for p in fr.problems)


def test_implausible_size_triggers_hunting() -> None:
    stream = req(1) + b"\x7f\xff\xff\xff garbage" + req(2) + req(3) + req(4)
    fr = Framer(checker)
    fr.start(True)
    out = fr.data(0, stream, 1, 1.0) + fr.finish()
    assert [struct.unpack_from(">i", f.raw, 4)[0] for f in out] == [1, 2, 3, 4]
    assert fr.skipped_bytes == len(b"\x7f\xff\xff\xff garbage")
    assert any("implausible message size" in p for p in fr.problems)


def test_midstream_start_and_backfill_before_strong_frame() -> None:
    # tail of a frame, two complete weak frames, then a frame the checker knows (STRONG)
    stream = req(7, b"t" * 300)[150:] + req(8) + req(9) + req(10) + req(11)
    fr = Framer(strong_checker({10}))
    fr.start(False)
    out = fr.data(0, stream, 1, 1.0) + fr.finish()
    assert [struct.unpack_from(">i", f.raw, 4)[0] for f in out] == [8, 9, 10, 11]
    assert out[0].skipped_before == len(req(7, b"t" * 300)) - 150
    assert fr.state == SYNCED


def test_hunting_window_bounds_memory() -> None:
    fr = Framer(checker, window=4096)
    fr.start(False)
    rnd = random.Random(3)
    for i in range(200):
        fr.data(i * 1000, bytes(rnd.getrandbits(8) | 1 for _ in range(1000)), i + 1, float(i))
        assert len(fr.buf) - fr.pos <= 4096 + 1000
    assert fr.state == HUNTING
    assert fr.skipped_bytes >= 200 * 1000 - 4096 - 1000


def test_finish_reports_cut_frame() -> None:
    stream = req(1) + req(2, b"w" * 500)
    fr = Framer(checker)
    fr.start(True)
    out = fr.data(0, stream[:-100], 1, 1.0) + fr.finish()
    assert len(out) == 2 and out[1].missing == 100
    assert any("capture ends inside" in p for p in fr.problems)


def test_buffering_then_start() -> None:
    stream = req(1) + req(2)
    fr = Framer(checker)
    assert fr.data(0, stream, 1, 1.0) == []
    assert bytes(fr.buffered()) == stream
    out = fr.start(True)
    assert len(out) == 2


def test_random_streams_never_raise() -> None:
    rnd = random.Random(11)
    for _ in range(50):
        fr = Framer(checker, window=1 << 14)
        fr.start(rnd.random() < 0.5)
        off = 0
        for i in range(30):
            if rnd.random() < 0.1:
                n = rnd.randrange(1, 500)
                fr.gap(off, n, i, float(i))
                off += n
            data = bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(1, 300)))
            if rnd.random() < 0.3:
                data = req(rnd.randrange(1000), data[:50]) + data
            fr.data(off, data, i, float(i))
            off += len(data)
        fr.finish()


def test_candidate_skips_zero_runs() -> None:
    from kwsniff.kafka.framing import _candidate

    buf = bytearray(b"\x05" + bytes(1000) + b"\x00\x00\x10\x07" + bytes(3))
    assert _candidate(buf, 0, len(buf)) == 1000         # 00 00 00 10: size 16
    assert _candidate(buf, 1001, len(buf)) == 1001      # 00 00 10 07
    assert _candidate(bytearray(bytes(50)), 0, 50) == -1
    assert _candidate(bytearray(b"\x01\x02"), 0, 2) == -1


def test_bytes_inside_a_partial_frame_are_quiet_and_change_nothing() -> None:
    # a 5,000-byte frame in 100-byte segments: the middle segments only extend it
    stream = req(1, b"a" * 5000) + req(2)
    fr = Framer(checker)
    fr.start(True)
    results = []
    for pos in range(0, len(stream), 100):
        key_before = fr.open_key()
        got = fr.data(pos, stream[pos:pos + 100], pos // 100 + 1, float(pos))
        results.append(got)
        if got is QUIET:
            assert key_before is not None and fr.open_key() == key_before
    quiet = [r for r in results if r is QUIET]
    assert len(quiet) == len(req(1, b"a" * 5000)) // 100 - 1
    frames = [f for r in results for f in r]
    assert [struct.unpack_from(">i", f.raw, 4)[0] for f in frames] == [1, 2]
    assert (frames[0].frame_first, frames[0].frame_last) == (1, 51)
    assert frames[0].raw == stream[4:len(req(1, b"a" * 5000))]


def test_gap_inside_a_partial_frame_ends_the_quiet_path() -> None:
    frame1 = req(1, b"b" * 3000)
    stream = frame1 + req(2)
    fr = Framer(checker)
    fr.start(True)
    assert fr.data(0, stream[:1000], 1, 1.0) == []
    assert fr.data(1000, stream[1000:1500], 2, 2.0) is QUIET
    fr.gap(1500, 500, 3, 3.0)                       # the frame is damaged: not quiet now
    got = fr.data(2000, stream[2000:2100], 4, 4.0)
    assert got is not QUIET
    rest = fr.data(2100, stream[2100:], 5, 5.0)
    frames = list(got) + list(rest)
    # the damaged frame keeps the 1,496 body bytes before the hole; the rest is missing
    assert len(frames[0].raw) == 1496 and frames[0].missing == len(frame1) - 4 - 1496
    assert struct.unpack_from(">i", frames[-1].raw, 4)[0] == 2
