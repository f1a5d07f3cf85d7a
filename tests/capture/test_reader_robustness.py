"""Corrupt captures never raise out of iteration: good packets come out, the rest is a problem."""

from __future__ import annotations

import gzip
import io
import random

import pytest
from test_open_capture import pcap_bytes, pcapng_bytes

from kwsniff.capture import open_capture
from kwsniff.errors import CaptureError


def mutations(raw: bytes, seed: int, count: int):
    rng = random.Random(seed)
    for _ in range(count):
        data = bytearray(raw)
        for _ in range(rng.randint(1, 8)):
            pos = rng.randrange(len(data))
            if rng.random() < 0.3:
                data[pos:pos + 4] = rng.randbytes(4)        # e.g. a length field
            else:
                data[pos] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[:rng.randrange(len(data))]
        yield bytes(data)


@pytest.mark.parametrize("make", [pcap_bytes, pcapng_bytes], ids=["pcap", "pcapng"])
@pytest.mark.parametrize("wrap", ["mapped-file", "stream", "gzip"])
def test_mutated_captures_do_not_raise(tmp_path, make, wrap):
    raw = make()
    path = tmp_path / "mutated"
    for data in mutations(raw, seed=len(raw), count=300):
        blob = gzip.compress(data) if wrap == "gzip" else data
        if wrap == "mapped-file":
            path.write_bytes(blob)
            target = path
        else:
            target = io.BytesIO(blob)
        try:
            src = open_capture(target)  # type: ignore[arg-type]
        except CaptureError as err:
            assert "\n" not in str(err)
            continue
        with src:
            frames = [p[0] for p in src]
        assert frames == list(range(1, len(frames) + 1))
        assert src.packets == len(frames)
        for problem in src.problems:
            assert isinstance(problem, str) and "\n" not in problem
