"""Record sets: RecordBatch (magic 2), MessageSet (magic 0/1) with compressed wrappers,
0.7 message sets, control records and internal-topic records.

Input: ``[mode][record set bytes]``; mode selects the format (Kafka or 0.7) and the
topic (ordinary or one of the internal topics whose records are decoded further).
Invariants: nothing raises; no internal error; no batch decompresses beyond the limit;
record keys and values come from the input or from a bounded decompression.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from fuzz import checks, wire
from fuzz import seeds as _seeds
from kwsniff.kafka.records import Records, parse_message_set_07
from kwsniff.output.jsonl import json_default

MAX_LEN = 8192
LIMIT = 1 << 16
TOPICS = (None, "__consumer_offsets", "__transaction_state", "__cluster_metadata",
          "__share_group_state", "orders")


def seeds() -> Iterable[bytes]:
    for data in _seeds.record_sets(MAX_LEN - 1):
        yield b"\x00" + data
        yield b"\x01" + data
    yield b"\x00" + wire.nested_message_set(3)
    yield b"\x00" + wire.v2_batch([wire.v2_record(0, b"k", b"v", [(b"h", b"x")])])
    yield b"\x06" + wire.msg07(b"hello") + wire.msg07(wire.gzip_bytes(wire.msg07(b"x")), 1)


def one_input(data: bytes) -> None:
    if not data:
        return
    mode = data[0]
    body = data[1:]
    if mode % 7 == 6:
        rs = parse_message_set_07(body, 1000, max_decompressed=LIMIT)
    else:
        rs = Records(body, max_decompressed=LIMIT)
        rs.topic = TOPICS[mode % 7 % len(TOPICS)]
        rs.partition = 0
    rs.summary()
    _ = rs.record_count, rs.record_count_exact, rs.truncated
    rs.decode()
    checks.require(sum(b.decompressed_size or 0 for b in rs.batches) <= 4 * LIMIT,
                   "the record set decompressed beyond four per-batch limits")
    for b in rs.batches:
        checks.require(b.decompressed_size is None or b.decompressed_size <= LIMIT,
                       f"batch decompressed to {b.decompressed_size} bytes, limit {LIMIT}")
        bound = len(body) + (b.decompressed_size or 0)
        for r in b.records:
            size = len(r.key or b"") + len(r.value or b"")
            checks.require(size <= bound, f"record of {size} bytes from a {bound}-byte batch")
    checks.check_problems(rs.problems, "records")
    json.dumps(rs.to_dict(), default=json_default)
