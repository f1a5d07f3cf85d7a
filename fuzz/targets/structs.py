"""Non-API schema decoders: consumer protocol, coordinator records (group, transaction,
share), KRaft metadata and control records, by name and version.

Input: ``[schema index: uint16][version: int8][bytes]``.
Invariants: nothing raises; the end offset lies within the input; problems carry no
internal error; byte ranges lie inside the input.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from fuzz import checks
from fuzz import seeds as _seeds
from kwsniff.kafka.protocol import decode_struct, struct_names, struct_spans, struct_versions

#: instrument the generated decode functions too (see fuzz.main)
INSTRUMENT_GENERATED = True
MAX_LEN = 2048
NAMES = struct_names()
_HEAD = struct.Struct(">Hb")


def seeds() -> Iterable[bytes]:
    from kwsniff.kafka.records import Records
    for i, name in enumerate(NAMES):
        lo, hi = struct_versions(name) or (0, 0)
        for v in sorted({lo, hi}):
            yield _HEAD.pack(i, v) + bytes(24)
    # record keys and values of the captures (consumer offsets, control records)
    for data in _seeds.record_sets(4096):
        for r in Records(data).iter_records():
            for part in (r.key, r.value):
                if part and len(part) > 2:
                    version = struct.unpack_from(">h", part)[0]
                    for i, name in enumerate(NAMES):
                        if name.endswith(("Key", "Value", "Subscription", "Assignment")):
                            yield _HEAD.pack(i, max(-128, min(127, version))) + bytes(part[2:])
                            break


def one_input(data: bytes) -> None:
    if len(data) < 3:
        return
    index, version = _HEAD.unpack_from(data, 0)
    name = NAMES[index % len(NAMES)]
    buf = data[3:]
    problems: list[str] = []
    out, end = decode_struct(name, version, buf, 0, problems)
    checks.require(isinstance(out, dict), "decode_struct returned no dict")
    checks.require(0 <= end <= len(buf), f"{name} v{version}: end {end} outside the input")
    checks.check_problems(problems, f"{name} v{version}")
    for span in struct_spans(name, version, buf):
        checks.require(0 <= span.offset and span.offset + span.length <= len(buf),
                       f"{name} v{version}: span {span} outside the input")
