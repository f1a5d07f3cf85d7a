"""The accelerator's engine helpers give exactly what their Python twins give:
``header_fields`` / ``request_fields`` (kwsniff.kafka.plausible), ``FrameBase`` and
``cut_frames`` (kwsniff.kafka.framing). Compared on request headers of every kind,
every cut of them, byte mutations and random bytes; frames on every cut of frame
streams and random bytes. (The packet tuples of ``pcap_batch``, ``pcapng_epbs`` and
``eth_ipv4_tcp`` are compared in test_accel.py.) Skipped when the accelerator is not
built."""

from __future__ import annotations

import functools
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwsniff import accel
from kwsniff.kafka import framing, plausible
from kwsniff.kafka.framing import Frame, Framer, PyFrameBase

C = accel.speedups
pytestmark = pytest.mark.skipif(C is None, reason=f"accelerator not in use: {accel.status}")
ROOT = Path(__file__).resolve().parents[2]
FIELDS = ("raw", "offset", "frame_first", "frame_last", "ts_first", "ts_last", "missing",
          "skipped_before", "discarded")


def _request(api_key: int, version: int, corr: int, client_id: bytes | None,
             body: bytes = b"\x00\x01") -> bytes:
    cid = struct.pack(">h", -1) if client_id is None else \
        struct.pack(">h", len(client_id)) + client_id
    return struct.pack(">hhi", api_key, version, corr) + cid + body


HEADERS = [
    _request(0, 8, 5, b"chatty-producer-3"),
    _request(1, 11, 2**31 - 1, b""),
    _request(18, 3, 0, None),
    _request(7, 0, 9, None, b""),                      # ControlledShutdown v0: no client id
    _request(3, 9, 1, "producteur-é".encode()),        # UTF-8, printable
    _request(3, 9, 1, b"bad\x01id"),                    # control character
    _request(3, 9, 1, b"\xff\xfe"),                     # not UTF-8
    _request(3, 9, 1, "zw\u200bsp".encode()),          # UTF-8, not printable
    _request(0, 99, 1, b"x"),                           # version too high
    _request(500, 0, 1, b"x"),                          # unknown key
    _request(-1, 0, 1, b"x"),
    _request(0, 3, -7, b"x"),                           # negative correlation id
    _request(0, 3, 1, b"x")[:10] + b"\x7f\xff",         # client id longer than the frame
    _request(0, 3, 1, b"x")[:8] + b"\xff\xfe" + b"abc",  # length -2
]


def _py(buf: bytes, pos: int, end: int, size: int) -> Any:
    try:
        return plausible._header_fields_py(buf, pos, end, size)
    except struct.error:
        return "struct.error"


def _c(buf: bytes, pos: int, end: int, size: int) -> Any:
    r = C.header_fields(buf, pos, end, size, plausible.MAX_VERSIONS)
    return _py(buf, pos, end, size) if r is NotImplemented else r


def _check_all_cuts(raw: bytes) -> None:
    for n in range(len(raw) + 1):
        cut = raw[:n]
        assert C.request_fields(plausible.MAX_VERSIONS, cut) == _py(cut, 0, n, n), cut
        for size in (n, len(raw), n + 5, 9):
            assert _c(cut, 0, n, size) == _py(cut, 0, n, size), (cut, size)
        framed = b"\x00" * 3 + cut
        assert _c(framed, 3, len(framed), n) == _py(framed, 3, len(framed), n)


@pytest.mark.parametrize("raw", HEADERS, ids=range(len(HEADERS)))
def test_header_fields_on_every_cut(raw: bytes) -> None:
    _check_all_cuts(raw)


def test_header_fields_mutations() -> None:
    rng = random.Random(12)
    for _ in range(3000):
        raw = bytearray(rng.choice(HEADERS))
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        raw = bytes(raw)
        n = len(raw)
        assert C.request_fields(plausible.MAX_VERSIONS, raw) == _py(raw, 0, n, n)
        for buf_type in (bytes, bytearray, memoryview):
            buf = buf_type(raw)
            assert _c(buf, 0, n, n) == _py(raw, 0, n, n)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=40), st.integers(-3, 45), st.integers(-3, 45), st.integers(-3, 60))
def test_header_fields_random(buf: bytes, pos: int, end: int, size: int) -> None:
    r = C.header_fields(buf, pos, end, size, plausible.MAX_VERSIONS)
    if r is NotImplemented:         # only where the Python code indexes outside the buffer
        assert pos < 0 or end > len(buf)
        return
    assert r == _py(buf, pos, end, size)


def test_plausible_uses_the_accelerator() -> None:
    assert isinstance(plausible.request_fields, functools.partial)
    assert plausible._header_fields is not plausible._header_fields_py
    for raw in HEADERS:
        assert plausible.request_fields(raw) == plausible._request_fields_py(raw)
        n = len(raw)
        assert plausible._header_fields(raw, 0, n, n) == plausible._header_fields_py(raw, 0, n, n)
    # past the end of the buffer: the Python code decides (and raises as before)
    with pytest.raises(struct.error):
        plausible._header_fields(b"\x00" * 4, 0, 40, 40)


def test_request_fields_bad_arguments() -> None:
    with pytest.raises(TypeError):
        C.request_fields([0, 1], b"\x00" * 12)
    with pytest.raises(TypeError):
        C.request_fields(plausible.MAX_VERSIONS, 12)
    with pytest.raises(TypeError):
        C.request_fields(("x",), b"\x00" * 14)


# -------------------------------------------------------------------------- frames

def _attrs(f: Any) -> tuple[Any, ...]:
    return tuple((getattr(f, a), type(getattr(f, a))) for a in FIELDS)


def test_frame_twins() -> None:
    args = (b"abc", 10, 2, 3, 0.5, 0.75)
    for kwargs in ({}, {"missing": 4}, {"skipped_before": 7}, {"missing": 1, "skipped_before": 2}):
        c, py = Frame(*args, **kwargs), PyFrameBase(*args, **kwargs)
        assert _attrs(c) == _attrs(py)
    assert _attrs(Frame(*args, 5, 6)) == _attrs(PyFrameBase(*args, 5, 6))
    f = Frame(*args)
    f.discarded = 9
    f.raw = b"x"
    assert (f.discarded, f.raw) == (9, b"x")
    assert repr(f).startswith("Frame(len=1, offset=10")
    for bad_args, bad_kwargs in [((b"a",), {}), (args + (1, 2, 3), {}), (args, {"nope": 1}),
                                 (args + (1,), {"missing": 2})]:
        with pytest.raises(TypeError):
            Frame(*bad_args, **bad_kwargs)
        with pytest.raises(TypeError):
            PyFrameBase(*bad_args, **bad_kwargs)


def _cut_both(data: bytes, offset: int, skip: int, max_frame: int = 1 << 20) -> None:
    fa = Framer(None, max_frame, 1 << 20)
    fb = Framer(None, max_frame, 1 << 20)
    fa._pending_skip = fb._pending_skip = skip
    got = C.cut_frames(Frame, data, offset, 7, 1.25, max_frame, skip)
    want = fb._cut_py(offset, data, 7, 1.25)
    assert got is not None
    assert [_attrs(f) for f in got[0]] == [_attrs(f) for f in want[0]]
    assert got[1] == want[1]
    assert all(type(f) is Frame for f in got[0])


def _stream(sizes: list[int]) -> bytes:
    return b"".join(struct.pack(">i", n) + b"\xab" * n for n in sizes)


@pytest.mark.parametrize("sizes", [[], [0], [5], [5, 0, 9], [300, 2, 70000]])
def test_cut_frames_every_cut(sizes: list[int]) -> None:
    data = _stream(sizes)
    for n in range(0, len(data) + 1, max(1, len(data) // 200)):
        for skip in (0, 3):
            _cut_both(data[:n], 1000 + n, skip)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 2**40), st.integers(0, 5), st.integers(0, 40))
def test_cut_frames_random(data: bytes, offset: int, skip: int, max_frame: int) -> None:
    _cut_both(data, offset, skip, max_frame)


def test_cut_frames_declines() -> None:
    class Other(PyFrameBase):
        pass

    assert C.cut_frames(Other, b"\x00\x00\x00\x00", 0, 1, 0.0, 10, 0) is None
    assert C.cut_frames(Frame, b"\x00\x00\x00\x00", 2**63, 1, 0.0, 10, 0) is None
    assert C.cut_frames(Frame, b"\x00\x00\x00\x00", -1, 1, 0.0, 10, 0) is None
    assert C.cut_frames(Frame, b"\x00\x00\x00\x00", 0, 1, 0.0, 10) is None
    f, pos = C.cut_frames(Frame, memoryview(b"\x00\x00\x00\x01zq"), 5, 1, 0.0, 10, 0)
    assert pos == 5 and f[0].raw == b"z" and type(f[0].raw) is bytes


def test_framer_fast_path_uses_cut_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """The framer's output is the same through the C loop and the Python loop."""
    data = _stream([3, 0, 12, 400]) + b"\x00\x00\x01"
    results = []
    for cut in (C.cut_frames, None):
        monkeypatch.setattr(framing, "_CUT_FRAMES", cut)
        fr = Framer(None, 1 << 20, 1 << 20)
        out = list(fr.data(0, data[:30], 1, 0.5)) + list(fr.data(30, data[30:], 2, 0.75))
        results.append(([_attrs(f) for f in out], fr.frames_cut, fr.want_end, bytes(fr.buf)))
    assert results[0] == results[1]
