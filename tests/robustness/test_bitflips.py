"""Random bit flips in the Kafka frames of real conversations: decoding goes on, the
damage is reported, bytes stay accounted for, and every view still renders."""

from __future__ import annotations

import random

import pytest

from fuzz import seeds, wire
from fuzz.checks import check_message
from kwsniff.kafka.protocol import decode_request, decode_response
from nasty import check, decode

SCRIPTS = seeds.streams(6000)


def _flip(data: bytes, rng: random.Random, flips: int, head: int | None = None) -> bytes:
    buf = bytearray(data)
    if not buf:
        return data
    for _ in range(flips):
        i = rng.randrange(len(buf) if head is None else min(head, len(buf)))
        buf[i] ^= 1 << rng.randrange(8)
    return bytes(buf)


@pytest.mark.parametrize("seed", range(12))
def test_bit_flips_in_conversations(seed: int) -> None:
    rng = random.Random(seed)
    for script in rng.sample(SCRIPTS, min(4, len(SCRIPTS))):
        options, ops = wire.decode_script(script)
        mutated = [(c, _flip(p, rng, rng.randint(1, 4), head=rng.choice((None, 24))))
                   if rng.random() < 0.3 else (c, p) for c, p in ops]
        run = check(decode(wire.packet_tuples(wire.script_packets(
            wire.encode_script(options, mutated)))))
        assert run.exchanges or run.summary.problems or not any(p for _, p in ops)


def test_bit_flips_in_single_frames() -> None:
    rng = random.Random(7)
    for kind, key, version, raw in seeds.frames():
        for _ in range(8):
            bad = _flip(raw, rng, rng.randint(1, 3))
            msg = decode_request(bad) if kind == "request" else decode_response(bad, key, version)
            check_message(msg, f"{kind} {key} v{version}")


def test_flipped_size_prefix_is_reported_and_decoding_resumes() -> None:
    """A size prefix damaged into an implausible value loses that message only."""
    reqs = [wire.metadata_request(i) for i in range(1, 6)]
    resps = [wire.metadata_response(i) for i in range(1, 6)]
    bad = bytearray(reqs[2])
    bad[0] ^= 0x40                                     # 1 GiB larger than the frame
    pairs = []
    for i in range(5):
        pairs.append((False, bytes(bad) if i == 2 else reqs[i]))
        pairs.append((True, resps[i]))
    run = check(decode(wire.packet_tuples(wire.conversation(pairs))))
    paired = [ex.correlation_id for ex in run.exchanges if ex.status == "paired"]
    assert {1, 2, 4, 5} <= set(paired)
    assert run.summary.skipped_bytes > 0 or any("size" in p for p in run.all_problems())
