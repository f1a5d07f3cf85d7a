"""Size-delimited framing of one TCP direction: chunks, holes, resynchronisation.

Input: a stream script (:mod:`fuzz.wire`); client operations are stream bytes, lost ones
holes. Option bit 0 starts the framer synchronised, else it hunts; it starts after the
first operation with bit 3 set (bytes are buffered until then). The checker trusts a
frame whose first byte is 0 (STRONG) and accepts others of a plausible size (WEAK).
Invariants: frames lie in the stream in order without overlap and carry exactly the
stream's bytes; every delivered byte is in a frame or counted as skipped; holes are
counted; memory stays within ``max_frame`` and ``window``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from fuzz import checks, wire
from fuzz import seeds as _seeds
from kwsniff.kafka.framing import NO, SHORT, STRONG, WEAK, Frame, Framer

MAX_LEN = 8192
MAX_FRAME = 4096
WINDOW = 2048
_I32 = struct.Struct(">i")


def seeds() -> Iterable[bytes]:
    for s in _seeds.streams(2000):
        options, ops = wire.decode_script(s)
        client = [(c, p) for c, p in ops if not c & wire.OP_BROKER]
        yield wire.encode_script(1, client)
        yield wire.encode_script(0, [(c | (wire.OP_LOST if i == 1 else 0), p)
                                     for i, (c, p) in enumerate(client)])


def _check(buf: bytearray, pos: int, end: int) -> tuple[int, int]:
    if end - pos < 5:
        return SHORT, 0
    size = _I32.unpack_from(buf, pos)[0]
    if size < 1 or size > MAX_FRAME:
        return NO, 0
    if pos + 4 + size > end:
        return SHORT, size
    return (STRONG if buf[pos + 4] == 0 else WEAK), size


def one_input(data: bytes) -> None:
    options, ops = wire.decode_script(data)
    fr = Framer(_check, MAX_FRAME, WINDOW)
    synced = bool(options & 1)
    stream = bytearray()
    offset = 0
    delivered = 0
    lost = 0
    frames: list[Frame] = []
    started = False
    for i, (ctrl, payload) in enumerate(ops):
        if not payload:
            continue
        if ctrl & wire.OP_LOST:
            stream += bytes(len(payload))
            frames += fr.gap(offset, len(payload), i + 1, float(i))
            lost += len(payload)
        else:
            stream += payload
            frames += fr.data(offset, payload, i + 1, float(i))
            delivered += len(payload)
        offset += len(payload)
        if not started and (ctrl & 0x08 or i == len(ops) - 1):
            started = True
            frames += fr.start(synced)
        checks.require(not started or len(fr.buf) <= MAX_FRAME + WINDOW + 8 + len(payload),
                       f"framer holds {len(fr.buf)} bytes")
    if not started:
        frames += fr.start(synced)
    frames += fr.finish()
    checks.require(fr.gap_bytes == lost, f"gap bytes {fr.gap_bytes}, holes {lost}")
    framed = 0
    extent = 0
    last_end = 0
    for f in frames:
        checks.require(f.offset >= last_end, f"frame at {f.offset} overlaps the previous one "
                                             f"ending at {last_end}")
        size = _I32.unpack_from(stream, f.offset)[0]
        checks.require(size == len(f.raw) + f.missing, f"frame at {f.offset}: {len(f.raw)} + "
                                                       f"{f.missing} bytes, prefix says {size}")
        checks.require(f.raw == bytes(stream[f.offset + 4:f.offset + 4 + len(f.raw)]),
                       f"frame at {f.offset} does not hold the stream's bytes")
        last_end = f.offset + 4 + size
        framed += 4 + len(f.raw)
        extent += f.missing
    skipped = fr.skipped_bytes
    checks.require(framed + skipped <= delivered <= framed + skipped + extent,
                   f"{delivered} bytes delivered, {framed} framed, {skipped} skipped, "
                   f"{extent} missing inside frames")
    checks.check_problems(fr.problems, "framer")
