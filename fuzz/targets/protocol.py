"""Every API schema decoder (requests and responses, every version), header rules,
byte ranges and embedded-data annotation.

Input: ``[mode][api key: int16][version: int8][frame bytes]``. Mode bit 0: response
(decoded as the given key/version) else request (key/version read from the frame);
mode bit 1: the key/version bytes are written over the request header so the fuzzer
reaches every schema quickly.
Invariants: nothing raises; ``body_end`` within the frame; no internal error reported;
byte ranges lie inside the frame; unknown keys/versions are reported, not guessed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from fuzz import checks
from fuzz import seeds as _seeds
from kwsniff.kafka import decoding
from kwsniff.kafka.protocol import decode_request, decode_response, field_spans

#: instrument the generated decode functions too (see fuzz.main)
INSTRUMENT_GENERATED = True
MAX_LEN = 4096
_HEAD = struct.Struct(">BhB")


def seeds() -> Iterable[bytes]:
    for kind, key, version, raw in _seeds.frames():
        if len(raw) <= MAX_LEN - 4:
            yield _HEAD.pack(1 if kind == "response" else 0, key, version & 0xFF) + raw
    # unknown API key and version
    yield _HEAD.pack(2, 999, 0) + struct.pack(">hhi", 999, 0, 7) + b"\x00\x02fz"
    yield _HEAD.pack(1, 3, 200) + struct.pack(">i", 7) + bytes(16)


def one_input(data: bytes) -> None:
    if len(data) < 4:
        return
    mode, key, version = _HEAD.unpack_from(data, 0)
    raw = data[4:]
    if mode & 1:
        msg = decode_response(raw, key, version)
        request = None
    else:
        if mode & 2 and len(raw) >= 4:
            raw = struct.pack(">hh", key, version) + raw[4:]
        msg = decode_request(raw)
        request = msg
    checks.check_message(msg, f"{msg.kind} {key} v{version}")
    for span in field_spans(msg):
        checks.require(0 <= span.offset and span.offset + span.length <= len(raw),
                       f"span {span} outside the {len(raw)}-byte frame")
    if msg.body is not None:
        decoding.annotate(msg, request=None if request is msg else request,
                          context=decoding.new_annotate_context())
        checks.check_problems(msg.problems, "annotated message")
