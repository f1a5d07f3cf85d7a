"""The frames kernel (``kwsniff.kafka._frames``) against its Python references:
``header_fields`` / ``request_fields`` (kwsniff.kafka.plausible) on request headers of
every kind, every cut of them, byte mutations and random bytes; ``frame_bodies``
(kwsniff.kafka.framing._frame_bodies_py) on every cut of frame streams and random
bytes; and the framer's output the same through both. Also the one ``Frame`` class
(compiled, an extension type via framing.pxd): its constructor, defaults and argument
errors. Skipped (the kernel tests) when the kernel is not in use."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwsniff import _compiled
from kwsniff.kafka import framing, plausible
from kwsniff.kafka.framing import Frame, Framer

C = _compiled.kernel("kwsniff.kafka._frames")
needs_kernel = pytest.mark.skipif(
    C is None, reason=f"kernel not in use: {_compiled.kernels_unused.get('kwsniff.kafka._frames')}")
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


def _whole(raw: bytes) -> Any:
    r = C.request_fields(plausible.MAX_VERSIONS, raw)
    return _py(raw, 0, len(raw), len(raw)) if r is NotImplemented else r


def _check_all_cuts(raw: bytes) -> None:
    for n in range(len(raw) + 1):
        cut = raw[:n]
        assert _whole(cut) == _py(cut, 0, n, n), cut
        for size in (n, len(raw), n + 5, 9):
            assert _c(cut, 0, n, size) == _py(cut, 0, n, size), (cut, size)
        framed = b"\x00" * 3 + cut
        assert _c(framed, 3, len(framed), n) == _py(framed, 3, len(framed), n)


@needs_kernel
@pytest.mark.parametrize("raw", HEADERS, ids=range(len(HEADERS)))
def test_header_fields_on_every_cut(raw: bytes) -> None:
    _check_all_cuts(raw)


@needs_kernel
def test_header_fields_mutations() -> None:
    rng = random.Random(12)
    for _ in range(3000):
        raw = bytearray(rng.choice(HEADERS))
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        raw = bytes(raw)
        n = len(raw)
        assert _whole(raw) == _py(raw, 0, n, n)
        for buf_type in (bytes, bytearray, memoryview):
            buf = buf_type(raw)
            assert _c(buf, 0, n, n) == _py(raw, 0, n, n)


@needs_kernel
@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=40), st.integers(-3, 45), st.integers(-3, 45), st.integers(-3, 60))
def test_header_fields_random(buf: bytes, pos: int, end: int, size: int) -> None:
    r = C.header_fields(buf, pos, end, size, plausible.MAX_VERSIONS)
    if r is NotImplemented:         # outside the buffer, or a client id not plain ASCII
        return
    assert r == _py(buf, pos, end, size)


@needs_kernel
def test_plausible_uses_the_kernel() -> None:
    assert plausible.request_fields is not plausible._request_fields_py
    assert plausible._header_fields is not plausible._header_fields_py
    for raw in HEADERS:
        assert plausible.request_fields(raw) == plausible._request_fields_py(raw)
        n = len(raw)
        assert plausible._header_fields(raw, 0, n, n) == plausible._header_fields_py(raw, 0, n, n)
    # past the end of the buffer: the Python code decides (and raises as before)
    with pytest.raises(struct.error):
        plausible._header_fields(b"\x00" * 4, 0, 40, 40)


@needs_kernel
def test_request_fields_bad_arguments() -> None:
    with pytest.raises(TypeError):
        C.request_fields([0, 1], b"\x00" * 12)
    with pytest.raises(TypeError):
        C.request_fields(plausible.MAX_VERSIONS, 12)
    assert C.request_fields(("x",), b"\x00" * 14) is NotImplemented   # the reference decides


# -------------------------------------------------------------------------- frames

def _attrs(f: Any) -> tuple[Any, ...]:
    return tuple((getattr(f, a), type(getattr(f, a))) for a in FIELDS)


def test_frame_constructor() -> None:
    args = (b"abc", 10, 2, 3, 0.5, 0.75)
    assert _attrs(Frame(*args)) == _attrs(Frame(*args, 0, 0))
    f = Frame(*args, missing=4, skipped_before=7)
    assert [getattr(f, a) for a in FIELDS] == [b"abc", 10, 2, 3, 0.5, 0.75, 4, 7, 0]
    assert _attrs(Frame(*args, 5, 6)) == _attrs(Frame(*args, missing=5, skipped_before=6))
    f.discarded = 9
    f.raw = b"x"
    assert (f.discarded, f.raw) == (9, b"x")
    assert repr(f).startswith("Frame(len=1, offset=10")
    assert not hasattr(f, "__dict__")
    for bad_args, bad_kwargs in [((b"a",), {}), (args + (1, 2, 3), {}), (args, {"nope": 1}),
                                 (args + (1,), {"missing": 2})]:
        with pytest.raises(TypeError):
            Frame(*bad_args, **bad_kwargs)


def _stream(sizes: list[int]) -> bytes:
    return b"".join(struct.pack(">i", n) + b"\xab" * n for n in sizes)


def _bodies_both(data: bytes, max_frame: int = 1 << 20) -> None:
    got = C.frame_bodies(data, max_frame)
    assert got == framing._frame_bodies_py(data, max_frame)
    assert all(type(b) is bytes for b in got[0])


@needs_kernel
@pytest.mark.parametrize("sizes", [[], [0], [5], [5, 0, 9], [300, 2, 70000]])
def test_frame_bodies_every_cut(sizes: list[int]) -> None:
    data = _stream(sizes)
    for n in range(0, len(data) + 1, max(1, len(data) // 200)):
        _bodies_both(data[:n])
        _bodies_both(memoryview(data)[:n])


@needs_kernel
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 40))
def test_frame_bodies_random(data: bytes, max_frame: int) -> None:
    _bodies_both(data, max_frame)


@needs_kernel
def test_frame_bodies_arguments() -> None:
    assert C.frame_bodies(b"\x00\x00\x00\x01zq", 10) == ([b"z"], 5)
    assert C.frame_bodies(bytearray(b"\x00\x00\x00\x00\xff"), 10) == ([b""], 4)
    assert C.frame_bodies(b"\x00\x00\x00\x05ab", 1) == ([], 0)      # above max_frame
    assert C.frame_bodies(b"\xff\xff\xff\xffab", 10) == ([], 0)      # negative
    for bad in ((b"", "10"), (b"", 2**70), (b"",), (12, 10)):
        with pytest.raises(TypeError):
            C.frame_bodies(*bad)


@needs_kernel
def test_framer_fast_path_same_with_and_without_the_kernel(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The framer's output is the same through the kernel's scan and the Python one."""
    data = _stream([3, 0, 12, 400]) + b"\x00\x00\x01"
    results = []
    for scan in (C.frame_bodies, framing._frame_bodies_py):
        monkeypatch.setattr(framing, "_frame_bodies", scan)
        fr = Framer(None, 1 << 20, 1 << 20)
        fr.state = framing.SYNCED
        fr._pending_skip = 3
        out = list(fr.data(1000, data[:30], 1, 0.5)) + list(fr.data(1030, data[30:], 2, 0.75))
        results.append(([_attrs(f) for f in out], fr.frames_cut, fr.want_end, bytes(fr.buf),
                        fr._pending_skip))
    assert results[0] == results[1]
    assert [f[1][0] for f in results[0][0]] == [1000, 1007, 1011, 1027]
    assert [f[7][0] for f in results[0][0]] == [3, 0, 0, 0]
