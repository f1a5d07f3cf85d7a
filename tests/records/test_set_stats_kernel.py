"""The records kernel's ``v2_set_stats`` (kwsniff.kafka._records) (batch and record counts of a clean magic-2 record
set, used by :class:`~kwsniff.kafka.records.Records` before any batch is parsed) gives
what the parsed batches give: the same ``batch_count``, ``record_count``,
``record_count_exact`` and ``problem_count`` on every record set of the sample captures
(every codec, magic 0/1/2, control batches, transactions), on their truncations and
byte mutations, and declines (None) wherever a batch has a header or CRC problem.
Skipped when the kernel is not in use."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from kwsniff import _compiled
from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka.records import Records, crc32c_py
from kwsniff.output.facts import iter_record_sets

C = _compiled.kernel("kwsniff.kafka._records")
pytestmark = pytest.mark.skipif(
    C is None, reason=f"kernel not in use: {_compiled.kernels_unused.get('kwsniff.kafka._records')}")
ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ["rdkafka-produce-codecs.pcap", "rdkafka-idempotent-txn.pcap",
            "kafka-python-0.10.pcap", "kafka-python-0.11.pcap", "aiokafka.pcap",
            "rdkafka-consumer-group.pcap"]


def _sets() -> list[bytes]:
    out: list[bytes] = []
    for name in CAPTURES:
        with open_capture(ROOT / "pcaps" / name) as src:
            for ex in Engine(EngineOptions()).run(src):
                for msg in (ex.request, ex.response):
                    for _t, _p, records in iter_record_sets(msg):
                        out.append(records.data)
    return out


SETS = _sets()


def _stats(data: bytes, quick: bool) -> tuple:
    """What the summary reads of a set: via the kernel (quick) or parsed batches."""
    rs = Records(data)
    if quick:
        values = (rs.batch_count, rs.record_count, rs.record_count_exact, rs.problem_count)
        crc = [b.crc_ok for b in rs.batches]        # (marked verified by the quick path)
    else:
        rs.batches  # noqa: B018 - parsed first: the Python path
        values = (rs.batch_count, rs.record_count, rs.record_count_exact, rs.problem_count)
        crc = [b.crc_ok for b in rs.batches]
    return values, crc, rs.problems


def _python_clean(data: bytes) -> tuple[int, int] | None:
    """The counts when the parsed batches are all complete magic-2 ones without problems."""
    rs = Records(data)
    rs._clean = False                       # (never ask the kernel)
    bs = rs.batches
    if rs._problems or any(b.truncated or b.magic != 2 or b.problems for b in bs):
        return None
    return len(bs), sum(b.declared_count for b in bs)


def test_the_sample_captures_have_sets_of_every_kind() -> None:
    clean = [d for d in SETS if C.v2_set_stats(d) is not None]
    assert len(SETS) > 100 and len(clean) > 50
    assert any(C.v2_set_stats(d) is None and d for d in SETS)    # magic 0/1 sets


def test_same_counts_as_the_parsed_batches_on_real_sets() -> None:
    for data in SETS:
        assert _stats(data, True) == _stats(data, False)
        assert C.v2_set_stats(data) == _python_clean(data)


def test_truncations_and_mutations_agree() -> None:
    rnd = random.Random(7)
    for data in [d for d in SETS if d][:200]:
        variants = [data[:cut] for cut in sorted({0, 1, 12, 17, 60, 61, 62, len(data) - 1,
                                                  rnd.randrange(len(data))})]
        for _ in range(6):
            b = bytearray(data)
            b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
            variants.append(bytes(b))
        for v in variants:
            assert C.v2_set_stats(v) == _python_clean(v)
            assert _stats(v, True) == _stats(v, False)


def _batch(count: int, payload: bytes = b"", magic: int = 2, crc: int | None = None) -> bytes:
    after_crc = struct.pack(">hiqqqhii", 0, max(count - 1, 0), 1, 1, -1, -1, -1, count) + payload
    if crc is None:
        crc = crc32c_py(after_crc)
    head = struct.pack(">ib", 0, magic) + struct.pack(">I", crc) + after_crc
    return struct.pack(">qi", 0, len(head)) + head


def test_crafted_sets() -> None:
    good = _batch(3, b"x" * 10) + _batch(2)
    assert C.v2_set_stats(good) == (2, 5)
    assert C.v2_set_stats(b"") == (0, 0)
    assert C.v2_set_stats(good[:-1]) is None                     # truncated tail
    assert C.v2_set_stats(_batch(1, crc=1)) is None              # CRC mismatch
    assert C.v2_set_stats(_batch(-1)) is None                    # negative count
    assert C.v2_set_stats(_batch(1, magic=1)) is None
    short = bytearray(_batch(1))
    short[8:12] = struct.pack(">i", 48)                          # length below the header
    assert C.v2_set_stats(bytes(short)) is None
    assert C.v2_set_stats(bytearray(good)) is None               # bytes only
    for data in (good, good[:-1], _batch(1, crc=1), bytes(short)):
        assert _stats(data, True) == _stats(data, False)
