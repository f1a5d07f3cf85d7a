"""Shared body of the decompressor targets (one target per codec).

Invariants: :func:`~kwsniff.kafka.compression.decompress` never raises; its output never
exceeds the limit; a stream over the limit is reported; complete valid streams
round-trip.
"""

from __future__ import annotations

from kwsniff.kafka.compression import decompress

LIMIT = 1 << 16


def check(codec: int, data: bytes) -> None:
    res = decompress(codec, data, LIMIT)
    assert isinstance(res.data, bytes), "output is not bytes"
    assert len(res.data) <= LIMIT, f"{len(res.data)} bytes out, limit {LIMIT}"
    assert res.problem is None or (isinstance(res.problem, str) and res.problem), \
        "problem is not a text"
    small = decompress(codec, data, 64)
    assert len(small.data) <= 64, f"{len(small.data)} bytes out, limit 64"
    if res.problem is None and len(res.data) > 64:
        assert small.problem, "output cut at the limit without a problem"
