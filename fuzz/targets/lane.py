"""The summary lane (``kwsniff.output.skim``) against the full decoding: a differential
target.

Input: ``[request length: uint16][request frame][response frame]`` (frames without
their size prefix; an empty response part: no response, as for an acks=0 Produce). The
response is decoded as the request's API and version.
Invariants (``fuzz.checks.check_lane``): the summary line made through the lane is the
line of the full decoding (eager bodies, facts walk, digest), whether the lane takes
the exchange or declines it; nothing raises; no control character reaches the line.
Without the field-decoder kernel the lane is off and every input returns at once.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from fuzz import checks
from fuzz import seeds as _seeds
from kwsniff.kafka.decoding import DEFERRABLE_APIS
from kwsniff.kafka.model import NO_RESPONSE_EXPECTED, PAIRED
from kwsniff.output.skim import SummaryLane

MAX_LEN = 8192
_LEN = struct.Struct(">H")


def seeds() -> Iterable[bytes]:
    frames = _seeds.frames()
    responses = {(a, v): raw for k, a, v, raw in frames if k == "response"}
    for kind, api, version, raw in frames:
        if kind != "request" or api not in DEFERRABLE_APIS or len(raw) > 0xFFFF:
            continue
        resp = responses.get((api, version), b"")
        yield _LEN.pack(len(raw)) + raw + resp
        yield _LEN.pack(len(raw)) + raw                  # no response


def one_input(data: bytes) -> None:
    if len(data) < 2 or not SummaryLane.available():
        return
    n = _LEN.unpack_from(data, 0)[0]
    req = data[2:2 + n]
    resp = data[2 + n:] if len(data) > 2 + n else None
    checks.check_lane(req, resp, PAIRED if resp is not None else NO_RESPONSE_EXPECTED)
