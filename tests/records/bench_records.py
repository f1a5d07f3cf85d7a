"""Throughput of record decoding (run: .venv/bin/python tests/records/bench_records.py).

Measures, on record sets written by kafka-python (100-byte values, 10-byte keys, one
header, batches of 500 records, 20 batches per set):
* full decode (every record, CRC verified) per codec, in records/s;
* batch-header-only counting (``Records(data).record_count``), in batches/s and records/s.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from recordbuild import v2_batch  # noqa: E402

from kwsniff.kafka.records import Records  # noqa: E402

BATCHES = 20
PER_BATCH = 500


def _set(codec: int) -> bytes:
    return b"".join(v2_batch(codec, n=PER_BATCH, base_offset=i * PER_BATCH, headers=[("trace", b"abcdef")])
                    for i in range(BATCHES))


def _rate(fn, units: int, rounds: int = 7) -> float:
    """Best of ``rounds`` timed runs (the machine is shared: the best run is the signal)."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return units / best


def main() -> None:
    names = ["none", "gzip", "snappy", "lz4", "zstd"]
    total = BATCHES * PER_BATCH
    for codec, name in enumerate(names):
        data = _set(codec)

        def full() -> None:
            rs = Records(data)
            for r in rs.iter_records():
                pass
            assert not rs.problems

        print(f"full decode  {name:7s} {_rate(full, total):>12,.0f} records/s  ({len(data):,} bytes/set)")
    data = _set(0) + _set(3)
    rate = _rate(lambda: Records(data).record_count, 2 * BATCHES)
    print(f"header count {'mixed':7s} {rate:>12,.0f} batches/s = {rate * PER_BATCH:,.0f} records/s")


if __name__ == "__main__":
    main()
