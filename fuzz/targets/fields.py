"""The field-decoder kernel (``kwsniff.kafka.protocol._fields``'s ``decode_fields``) against the generated Python
decoders it stands in front of: a differential target.

Input: ``[decoder: uint16][version: uint8][bytes]``; the first number picks a message
body (API key and direction) or a named struct of the schema table (headers, consumer
protocol, coordinator and KRaft records), the second (modulo the decoder's version
range) its version.
Invariants (``fuzz.checks.check_same_decoding``): C-first and Python-only decoding
give the same dict (keys, order, types, values), end offset, problems and exception;
where C accepts the bytes, Python reports nothing. A crash in C is a finding of its
own (libFuzzer sees the signal). The generated Python decoders are instrumented, so
coverage guides the fuzzer through the schemas; C's branches are not instrumented.
Without the kernel (``KWSNIFF_PURE=1`` or not built) there is nothing to compare
and every input returns at once (``tests/robustness/test_fuzz.py`` skips the campaign).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from fuzz import checks
from fuzz import seeds as _seeds
from kwsniff.kafka.protocol import cprogram
from kwsniff.kafka.protocol import decode_request, decode_response
from kwsniff.kafka.protocol.decoder import body_decoder, struct_decoder
from kwsniff.kafka.protocol.schema import (
    REQUEST, RESPONSE, api_keys, struct_names, struct_versions, version_range,
)

#: instrument the generated decode functions too (see fuzz.main)
INSTRUMENT_GENERATED = True
MAX_LEN = 4096
_HEAD = struct.Struct(">HB")

#: (kind, api key or struct name, lowest version, highest version)
DECODERS: tuple[tuple[str, int | str, int, int], ...] = tuple(
    [(kind, key, *rng) for key in api_keys() for kind in (REQUEST, RESPONSE)
     if (rng := version_range(key, kind)) is not None]
    + [("struct", name, *struct_versions(name)) for name in struct_names()  # type: ignore[misc]
       if struct_versions(name) is not None])
_INDEX = {(kind, key): i for i, (kind, key, _lo, _hi) in enumerate(DECODERS)}


def _head(kind: str, key: int | str, version: int) -> bytes:
    lo = DECODERS[_INDEX[(kind, key)]][2]
    return _HEAD.pack(_INDEX[(kind, key)], (version - lo) & 0xFF)


def seeds() -> Iterable[bytes]:
    for kind, key, version, raw in _seeds.frames():
        if (kind, key) not in _INDEX:
            continue
        msg = decode_request(raw) if kind == REQUEST else decode_response(raw, key, version)
        if msg.body is not None and len(raw) - msg.body_offset <= MAX_LEN - 3:
            yield _head(kind, key, version) + raw[msg.body_offset:]
    for data in _seeds.record_sets(4096):
        from kwsniff.kafka.records import Records
        for r in Records(data).iter_records():
            for part in (r.key, r.value):
                if part and len(part) > 2:
                    version = struct.unpack_from(">h", part)[0]
                    for name in ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment",
                                 "OffsetCommitKey", "OffsetCommitValue"):
                        if ("struct", name) in _INDEX:
                            yield _head("struct", name, version) + bytes(part[2:])
    for i, (_kind, _key, lo, hi) in enumerate(DECODERS):
        for v in sorted({lo, hi}):
            yield _HEAD.pack(i, (v - lo) & 0xFF) + bytes(24)


def one_input(data: bytes) -> None:
    if len(data) < 3 or cprogram.decode_fields is None:
        return
    index, step = _HEAD.unpack_from(data, 0)
    kind, key, lo, hi = DECODERS[index % len(DECODERS)]
    version = lo + step % (hi - lo + 1)
    fn = (struct_decoder(key, version) if kind == "struct"  # type: ignore[arg-type]
          else body_decoder(key, kind, version))            # type: ignore[arg-type]
    if fn is None or not hasattr(fn, "python"):
        return
    checks.check_same_decoding(fn, data[3:], 0, f"{kind} {key} v{version}")
