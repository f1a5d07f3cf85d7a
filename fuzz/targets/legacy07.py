"""The Kafka 0.7 protocol: requests, responses decoded against a request, orphan
response inference, 0.7 message sets.

Input: ``[split: uint16][request frame payload][response frame payload]``.
Invariants: nothing raises; ``body_end`` within the frame; no internal error; plausibility
probes never claim more bytes than given.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from fuzz import checks, wire
from kwsniff.kafka import legacy07

MAX_LEN = 4096


def _pair(req: bytes, resp: bytes) -> bytes:
    return struct.pack(">H", len(req) - 4) + req[4:] + resp[4:]


def seeds() -> Iterable[bytes]:
    ms = wire.msg07(b"hello") + wire.msg07(wire.gzip_bytes(wire.msg07(b"inner")), 1)
    yield _pair(wire.fetch07("t", 0), wire.fetch07_response(ms))
    yield _pair(wire.offsets07("t", 1), wire.offsets07_response([5, 3, 0]))
    yield _pair(wire.multifetch07([("a", 0, 0), ("b", 1, 9)]),
                wire.multifetch07_response([ms, wire.msg07(b"x")]))
    yield _pair(wire.produce07("t", 0, ms), wire.frame(b""))


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    split = struct.unpack_from(">H", data)[0]
    req_raw, resp_raw = data[2:2 + split], data[2 + split:]
    req = legacy07.decode_request(req_raw)
    checks.check_message(req, "0.7 request")
    for candidate in (req, None):
        resp = legacy07.decode_response(resp_raw, candidate)
        checks.check_message(resp, "0.7 response")
    fit = legacy07.response_fits(resp_raw, req)
    if fit is not None:
        checks.check_message(fit, "0.7 fitting response")
    checks.check_message(legacy07.infer_response(resp_raw), "0.7 inferred response")
    for msg in (req, resp):
        body = msg.body or {}
        for part in [body] + list(body.get("Responses") or ()) + list(body.get("Produces") or ()):
            ms = part.get("Messages")
            if ms is not None:
                ms.decode()
                checks.check_problems(ms.problems, "0.7 message set")
    framed = wire.frame(req_raw) + wire.frame(resp_raw)
    for probe in (legacy07.plausible_request_at, legacy07.plausible_response_at):
        for pos in range(0, min(len(framed), 64)):
            size = probe(framed, pos, len(framed), 1 << 20)
            checks.require(size is None or 0 <= size <= 1 << 20, f"{probe.__name__}: {size}")
