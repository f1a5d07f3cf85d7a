"""The records kernel (``kwsniff.kafka._records``) against its Python reference in
kwsniff/kafka/records.py: ``v2_records`` gives exactly what ``_parse_v2_records`` gives,
or None wherever the reference reports a problem or needs Python's unbounded integers
or clamped slices; ``crc32c`` (and ``crc32c_software``) give the crc32c package's and
``crc32c_py``'s values.

The parser is compared on the record sets of the sample captures, on batches built with
every kind of record (null/empty keys and values, headers, big varints, LogAppendTime),
cut at every byte, byte-mutated, and on random bytes. Skipped when the kernel is not in
use."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz import wire
from kwsniff import _compiled
from kwsniff.kafka import records as rec_mod
from kwsniff.kafka.records import Record
from record_sets import record_sets

C = _compiled.kernel("kwsniff.kafka._records")
pytestmark = pytest.mark.skipif(
    C is None, reason=f"kernel not in use: {_compiled.kernels_unused.get('kwsniff.kafka._records')}")
ROOT = Path(__file__).resolve().parents[2]


def _shape(parsed: tuple[list[Record], list[str], int, bool]) -> Any:
    records, problems, pos, ran_out = parsed
    return ([(r.offset, r.timestamp, r.key, type(r.key), r.value, type(r.value), r.headers,
              r.attributes, r.size, r.start, r.problems) for r in records],
            problems, pos, ran_out)


class _Header:
    """What _parse_v2_records reads of a batch."""

    def __init__(self, base_offset: int, base_ts: int, max_ts: int, attributes: int) -> None:
        self.base_offset, self.base_timestamp = base_offset, base_ts
        self.max_timestamp, self.attributes = max_ts, attributes


def compare(buf: bytes, pos: int, end: int, count: int, base_offset: int = 100,
            base_ts: int = 1_700_000_000_000, attributes: int = 0, in_place: bool = True,
            max_ts: int = 1_700_000_000_999) -> bool:
    """Assert C == Python (when C answers); True when C answered."""
    b = _Header(base_offset, base_ts, max_ts, attributes)
    py = rec_mod._parse_v2_records(buf, pos, end, count, b, in_place)  # type: ignore[arg-type]
    c = C.v2_records(buf, pos, end, count, base_offset, base_ts,
                     max_ts if attributes & 0x08 else None, in_place, Record)
    if c is None:
        return False
    assert _shape(c) == _shape(py)
    return True


def _record(i: int, rng: random.Random) -> bytes:
    key = rng.choice([None, b"", b"k%d" % i, bytes(rng.randrange(256) for _ in range(200))])
    value = rng.choice([None, b"", b"v" * rng.randrange(1, 300), "é✓".encode() * 3])
    headers = [(rng.choice([b"h", b"\xff\xfe", b""]), rng.choice([None, b"", b"x" * 5]))
               for _ in range(rng.randrange(4))]
    return wire.v2_record(i * rng.choice([1, 1000, 1 << 40]), key, value, headers)


def _records(n: int, seed: int) -> bytes:
    rng = random.Random(seed)
    return b"".join(_record(i, rng) for i in range(n))


def test_builds_the_same_records_as_python() -> None:
    data = _records(40, 1)
    assert compare(data, 0, len(data), 40)
    assert compare(data, 0, len(data), 40, attributes=0x08)        # LogAppendTime
    assert compare(data, 0, len(data), 40, in_place=False)
    assert compare(data, 0, len(data), 25)                         # fewer declared
    assert compare(data, 0, len(data), 60)                         # more declared
    assert compare(data, 0, len(data), -1)
    assert compare(b"xx" + data, 2, len(data) + 2, 40)             # not at the start


def test_same_when_cut_anywhere() -> None:
    data = _records(6, 2)
    answered = 0
    for cut in range(len(data) + 1):
        answered += compare(data[:cut], 0, cut, 6)
        answered += compare(data, 0, cut, 6)         # end before the buffer's end
    assert answered > len(data)


def test_same_on_mutated_records() -> None:
    rng = random.Random(3)
    data = bytearray(_records(8, 4))
    answered = 0
    for _ in range(1500):
        m = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            m[rng.randrange(len(m))] = rng.randrange(256)
        answered += compare(bytes(m), 0, len(m), 8)
    assert answered > 1000


def test_python_answers_beyond_64_bits() -> None:
    """A 10-byte varint whose value needs more than 64 bits; a key longer than the
    buffer (Python clamps the slice): the C parser declines, the caller runs Python."""
    huge = b"\x00" + b"\xff" * 9 + b"\x7f"           # attributes, then a 70-bit delta
    rec = wire.uvarint(len(huge) * 2) + huge
    assert C.v2_records(rec, 0, len(rec), 1, 0, 0, None, True, Record) is None
    long_key = b"\x00\x00\x00" + wire.varint(1000) + b"k"
    rec = wire.varint(len(long_key)) + long_key
    assert C.v2_records(rec, 0, len(rec), 1, 0, 0, None, True, Record) is None
    assert C.v2_records(bytearray(rec), 0, len(rec), 1, 0, 0, None, True, Record) is None
    overflow = wire.v2_record(1, b"k", b"v")
    assert C.v2_records(overflow, 0, len(overflow), 1, (1 << 63) - 1, 0, None, True,
                        Record) is None


def test_malformed_records_same_as_python() -> None:
    cases = [
        b"\x00" * 3 + b"\xff" * 10 + b"\x01",                        # varint > 10 bytes
        wire.varint(6) + b"\x00\x00\x00" + wire.varint(-1) + wire.varint(-1) + wire.varint(-3),
        wire.varint(5) + b"\x00\x00\x00" + wire.varint(-1) + wire.varint(-1) + wire.varint(4),
        wire.varint(8) + b"\x00\x00\x00" + wire.varint(-1) + wire.varint(-1) + wire.varint(1)
        + wire.varint(-2) + b"\x00",
        wire.varint(0) + b"rest",                                      # invalid length
        wire.varint(-5) + b"rest",
        wire.varint(9) + b"\x00\x00\x00" + wire.varint(-1) + wire.varint(-1) + wire.varint(0)
        + b"\x00\x00\x00",                                             # fields < length
    ]
    for data in cases:
        # the reference reports a problem: the kernel leaves every such set to it
        for buf, count in ((data, 1), (data + data, 2)):
            assert not compare(buf, 0, len(buf), count), data
            b = _Header(100, 0, 0, 0)
            assert rec_mod._parse_v2_records(buf, 0, len(buf), count, b, True)[1], data  # type: ignore[arg-type]


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300), st.integers(-2, 12), st.booleans())
def test_same_on_random_bytes(data: bytes, count: int, log_append: bool) -> None:
    compare(data, 0, len(data), count, attributes=0x08 if log_append else 0)


@pytest.mark.parametrize("path", sorted((ROOT / "pcaps").glob("*.pcap")), ids=lambda p: p.name)
def test_sample_captures_decode_the_same(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every record of every sample capture, through Batch.records, both ways."""
    from kwsniff.capture.source import open_capture
    from kwsniff.engine import Engine

    def all_records() -> list[Any]:
        out = []
        with open_capture(str(path)) as source:
            for ex in Engine().run(source):
                for msg in (ex.request, ex.response):
                    for rs in record_sets(msg.body) if msg is not None and msg.body else ():
                        for b in rs.batches:
                            out.append(([(r.offset, r.timestamp, r.key, r.value, r.headers,
                                          r.attributes, r.size, r.start, r.problems,
                                          r.control) for r in b.records], b.problems))
        return out

    fast = all_records()
    monkeypatch.setattr(rec_mod, "_v2_records_native", None)
    assert all_records() == fast


def test_crc32c_same_as_the_crc32c_package_and_the_python_table() -> None:
    import crc32c as package
    rnd = random.Random(5)
    assert rec_mod.crc32c is C.crc32c
    assert C.CRC32C_HARDWARE in (0, 1)
    for n in list(range(0, 70)) + [255, 256, 4096, 65535, 65536, 70001]:
        data = bytes(rnd.randrange(256) for _ in range(n))
        want = package.crc32c(data)
        assert C.crc32c(data) == want == C.crc32c_software(data), n
        if n < 5000:
            assert rec_mod.crc32c_py(data) == want, n
        view = memoryview(b"xyz" + data)[3:]
        assert C.crc32c(view) == C.crc32c_software(view) == want, n


def test_helper_varints_are_kafkas() -> None:
    """The cases above are written with the fuzz helper's zigzag varints."""
    assert wire.varint(-1) == b"\x01" and wire.varint(1) == b"\x02"
    assert rec_mod.uvarint(wire.varint(-3), 0) == (5, 1)
