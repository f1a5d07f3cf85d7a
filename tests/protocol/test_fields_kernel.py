"""The field decoder kernel (``kwsniff.kafka.protocol._fields.decode_fields``) gives exactly what the
generated Python decoders give, or declines and leaves the bytes to them.

Every decoder the table compiles (without spans) is the C decoder with the generated
Python function behind it (``fn.python``). Both are run on: a message of every API key,
version and direction with every field filled, with nulls and empty arrays, and without
tagged fields (the test-only encoder of ``protocol_wire``), plus every header version;
the same messages cut at every byte and with bytes changed; every request and response
of the sample captures; odd programs' edge cases (varint limits, negative lengths,
nulls where the schema forbids them, bad tagged fields). The results compared: the
dict (keys, order, value types and values), the end offset, the problems, and the
exception where the Python decoder raises. Where the Python decoder finds nothing to
report the C decoder must not decline (else it would never be used). Skipped when the
kernel is not in use.
"""

from __future__ import annotations

import random
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from fuzz.checks import check_same_decoding, decoding_outcome, exact
from kwsniff import _compiled
from kwsniff.kafka.protocol import decoder
from kwsniff.kafka.protocol.cprogram import OP_ARRAY, OP_FIXED, OP_STRING, OP_STRUCT, build_program
from kwsniff.kafka.protocol.decoder import body_decoder, struct_decoder
from kwsniff.kafka.protocol.schema import STRUCTS
from kwsniff.kafka.records import Records

C = _compiled.kernel("kwsniff.kafka.protocol._fields")
pytestmark = pytest.mark.skipif(
    C is None,
    reason=f"kernel not in use: {_compiled.kernels_unused.get('kwsniff.kafka.protocol._fields')}")
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests" / "protocol") not in sys.path:
    sys.path.append(str(ROOT / "tests" / "protocol"))   # the test-only encoder
protocol_wire = pytest.importorskip("protocol_wire")


def compare(fn: Any, buf: Any, pos: int, must_accept: bool = False) -> bool:
    """C-first and Python-only decoding agree (``fuzz.checks.check_same_decoding``, the
    check the ``fields`` fuzz target makes); returns whether C accepted."""
    assert hasattr(fn, "python"), "decoders are compiled with the kernel"
    accepted = check_same_decoding(fn, buf, pos, "decoder")
    if must_accept:
        want = decoding_outcome(fn.python, buf, pos)
        if want[0] == "ok" and not want[3]:
            assert accepted, "the C decoder declined bytes the Python decoder decodes cleanly"
    return accepted


def _cases() -> list[tuple[int, str, int]]:
    if not protocol_wire.SHARED.is_dir():
        return []
    return [(key, kind, v) for key in protocol_wire.all_api_keys()
            for kind in ("request", "response") for v in protocol_wire.all_versions(key, kind)]


CASES = _cases()
needs_shared = pytest.mark.skipif(not CASES, reason="../shared/kafka-protocol is not present")


def _body(key: int, kind: str, version: int, variant: str) -> tuple[Any, bytes, int]:
    sample = protocol_wire.make_sample(key, kind, version, variant)
    fn = body_decoder(key, kind, version)
    assert fn is not None
    return fn, sample.frame, len(sample.frame) - len(sample.body)


@needs_shared
@pytest.mark.parametrize("variant", ["full", "nulls", "notags"])
def test_every_message_version(variant: str) -> None:
    accepted = 0
    for key, kind, version in CASES:
        fn, frame, pos = _body(key, kind, version, variant)
        accepted += compare(fn, frame, pos, must_accept=True)
    assert accepted > len(CASES) * 0.95


@needs_shared
def test_cut_and_changed_bytes() -> None:
    rng = random.Random(7)
    declined = accepted = 0
    for key, kind, version in CASES:
        fn, frame, pos = _body(key, kind, version, "full")
        body = len(frame) - pos
        cuts = range(pos, len(frame)) if body <= 64 else sorted(
            rng.sample(range(pos, len(frame)), 64))
        for cut in cuts:
            declined += not compare(fn, frame[:cut], pos)
        for _ in range(8 if body else 0):
            b = bytearray(frame)
            for _ in range(rng.randint(1, 3)):
                b[rng.randrange(pos, len(b))] = rng.choice((0, 0x7F, 0x80, 0xFF, rng.randrange(256)))
            accepted += compare(fn, bytes(b), pos)
    assert declined and accepted


def test_every_header_version() -> None:
    for name in ("RequestHeader", "ResponseHeader"):
        for lo, hi, *_ in STRUCTS[name][1]:
            for hv in range(lo, min(hi, 10) + 1):
                fn = struct_decoder(name, hv)
                assert fn is not None
                head = (struct.pack(">hhi", 3, 12, 77) if name == "RequestHeader"
                        else struct.pack(">i", 77))
                for tail in (b"", b"\x00\x03abc", b"\xff\xff", b"\x00\x03ab\xc3\x00",
                             b"\x00\x03abc\x00", b"\x00\x03abc\x01\x05\x02hi",
                             b"\x00\x01\x09\x00\x00", b"\x01\x00\x02\x01\x02"):
                    compare(fn, head + tail, 0)


def _capture_messages() -> list:
    from kwsniff.engine import Engine, EngineOptions
    from kwsniff.capture.source import open_capture

    out = []
    for path in sorted((ROOT / "pcaps").glob("*.pcap*")):
        engine = Engine(EngineOptions())
        with open_capture(str(path)) as src:
            for ex in engine.run(src):
                for msg in (ex.request, ex.response):
                    if msg is not None and msg.body is not None and msg.api_key is not None:
                        out.append(msg)
    return out


def test_sample_captures() -> None:
    messages = _capture_messages()
    assert len(messages) > 500
    accepted = 0
    for msg in messages:
        version = msg.header.get("_body_version", msg.api_version)
        fn = body_decoder(msg.api_key, msg.kind, version)
        if fn is None or not hasattr(fn, "python"):
            continue
        accepted += compare(fn, msg.raw, msg.body_offset)
        hname = "RequestHeader" if msg.kind == "request" else "ResponseHeader"
        compare(struct_decoder(hname, msg.header_version), msg.raw, 0)
    assert accepted > len(messages) * 0.9


# ------------------------------------------------------------------ edge cases

def _prog(*ops: tuple, flexible: bool = False, tagged: dict | None = None) -> tuple:
    return (tuple(ops), flexible, tagged or {})


def _c(buf: bytes, prog: tuple, pos: int = 0) -> Any:
    out: dict = {}
    end = C.decode_fields(buf, pos, out, prog)
    return None if end is None else (end, out)


def test_fixed_values_of_every_code() -> None:
    codes = b"b?hHiIqd"
    prog = _prog((OP_FIXED, tuple("abcdefgh"), codes, 30))
    for raw in (bytes(30), b"\xff" * 30, bytes(range(30)), b"\x80" + b"\x7f" * 29):
        end, out = _c(raw, prog)
        assert end == 30
        assert exact(list(out.values())) == exact(list(struct.unpack(">b?hHiIqd", raw)))
    assert _c(bytes(29), prog) is None


def test_declines_leave_the_dict_empty() -> None:
    prog = _prog((OP_FIXED, ("a",), b"i", 4), (OP_STRING, "s", False, False, None))
    out: dict = {}
    assert C.decode_fields(b"\x00\x00\x00\x01\xff\xff", 0, out, prog) is None   # null
    assert out == {}
    assert C.decode_fields(b"\x00\x00\x00\x01\xff\xfe", 0, out, prog) is None   # -2
    assert C.decode_fields(b"\x00\x00\x00\x01\x00\x05ab", 0, out, prog) is None  # too long
    assert out == {}
    full = {"x": 1}
    assert C.decode_fields(b"\x00\x00\x00\x01\x00\x00", 0, full, prog) is None  # not empty
    assert full == {"x": 1}
    assert C.decode_fields(bytearray(b"\x00\x00\x00\x01\x00\x00"), 0, out, prog) is None
    assert _c(b"\x00\x00\x00\x01\x00\x00", prog) == (6, {"a": 1, "s": ""})


def test_compact_lengths_and_varint_limits() -> None:
    prog = _prog((OP_STRING, "s", True, True, None), flexible=True)
    assert _c(b"\x00\x00", prog) == (2, {"s": None})
    assert _c(b"\x03hi\x00", prog) == (4, {"s": "hi"})
    assert _c(b"\x80\x80\x80\x80\x00\x00", prog) == (6, {"s": None})   # 5-byte varint 0
    assert _c(b"\x80\x80\x80\x80\x80\x00", prog) is None                # 6 bytes: too long
    assert _c(b"\x03h\xff\x00", prog) == (4, {"s": "h\ufffd"})           # invalid UTF-8


def test_arrays_counts_and_elements() -> None:
    elem = (OP_FIXED, None, b"h", 2)
    prog = _prog((OP_ARRAY, "a", False, True, 2, elem))
    assert _c(b"\x00\x00\x00\x02\x00\x01\xff\xff", prog) == (8, {"a": [1, -1]})
    assert _c(b"\xff\xff\xff\xff", prog) == (4, {"a": None})
    assert _c(b"\x00\x00\x00\x03\x00\x01\xff\xff", prog) is None        # cannot fit
    empty = _prog((OP_ARRAY, "a", False, False, 0, (OP_STRUCT, None, False, _prog())))
    assert _c(b"\x00\x00\x00\x03", empty) == (4, {"a": [{}, {}, {}]})
    assert _c(b"\x00\x01\x00\x01", empty) is None                        # > 65,536 elements


def test_tagged_fields() -> None:
    tagged = {0: (OP_FIXED, ("t",), b"i", 4)}
    prog = _prog((OP_FIXED, ("a",), b"b", 1), flexible=True, tagged=tagged)
    assert _c(b"\x01\x00", prog) == (2, {"a": 1})
    assert _c(b"\x01\x02\x00\x04\x00\x00\x00\x09\x07\x01\xaa", prog) == (
        11, {"a": 1, "t": 9, "_unknown_tags": [(7, b"\xaa")]})
    assert _c(b"\x01\x01\x00\x05\x00\x00\x00\x09\x00", prog) is None    # size mismatch
    assert _c(b"\x01\x05\x00\x00", prog) is None                        # count cannot fit


def test_every_schema_builds_a_program() -> None:
    from kwsniff.kafka.protocol.schema import MESSAGES

    count = 0
    for (key, kind), (_, segments) in MESSAGES.items():
        for lo, hi, flex, _, fields in segments:
            for v in range(lo, min(hi, lo + 40) + 1):
                build_program(fields, v, flex is not None and flex[0] <= v <= flex[1], Records)
                count += 1
    assert count > 500
    produce = decoder.body_decoder(0, "request", 9).program
    assert [op[0] for op in produce[0]] == [OP_STRING, OP_FIXED, OP_ARRAY]


def test_python_decoder_built_only_when_needed() -> None:
    """The generated Python behind the C decoder is compiled on first need: not for
    bytes C decodes, at once where C declines, and the result is the Python one."""
    from kwsniff.kafka.protocol.codegen import compile_decoder
    from kwsniff.kafka.protocol.cprogram import LazyPython, python_function
    from kwsniff.kafka.protocol.schema import message_schema

    seg = message_schema(18, "request", 3)                # ApiVersions request v3
    assert seg is not None
    fn = compile_decoder(seg[4], 3, True)
    lazy = fn.python
    assert isinstance(lazy, LazyPython) and not lazy.built
    good = b"\x06kafka\x041.0\x00"                        # two compact strings, no tags
    out: dict = {}
    assert fn(good, 0, out, [], None) == len(good)
    assert out == {"ClientSoftwareName": "kafka", "ClientSoftwareVersion": "1.0"}
    assert not lazy.built                                 # C decoded it
    cut = good[:4]                                        # C declines a cut message
    got = decoding_outcome(fn, cut, 0)
    assert lazy.built and "def " in lazy.source
    assert python_function(fn) is lazy.function()
    assert got == decoding_outcome(lazy.function(), cut, 0) and got[0] == "raised"
