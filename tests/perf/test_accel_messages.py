"""The accelerator's messages with deferred bodies (``_speedups.defer_request`` /
``defer_response``, kwsniff/_speedups_msg.c) against the Python decoder: for every frame
of the sample captures, cut, damaged and with odd headers, the C message is the Python
message slot for slot (types and values), or C declines."""

from __future__ import annotations

import dataclasses
import random
import struct
from pathlib import Path
from typing import Any

import pytest

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka import decoding
from kwsniff.kafka.model import KafkaMessage
from kwsniff.kafka.protocol import decode_request, decode_response

ROOT = Path(__file__).resolve().parents[2]
PCAPS = sorted((ROOT / "pcaps").glob("*.pcap"))

pytestmark = pytest.mark.skipif(decoding._defer_request_c is None,
                                reason="needs the C accelerator")


def state(msg: KafkaMessage) -> list[tuple[str, Any, Any]]:
    """Every slot of ``msg``: (name, type, value); the header dict in key order."""
    out = []
    for f in dataclasses.fields(KafkaMessage):
        value = getattr(msg, f.name)
        if isinstance(value, dict):
            value = [(k, type(v), v) for k, v in value.items()]
        out.append((f.name, type(value), value))
    return out


def _frames() -> list[tuple[bytes, bytes | None]]:
    """(request, response) raw frames of every exchange of the sample captures."""
    frames = []
    for pcap in PCAPS:
        engine = Engine(EngineOptions(defer_bodies=True))
        with open_capture(str(pcap)) as source:
            for ex in engine.run(source):
                if ex.protocol == "kafka" and ex.request is not None:
                    frames.append((ex.request.raw,
                                   ex.response.raw if ex.response is not None else None))
    return frames


def _plans() -> tuple[dict, dict]:
    """The plans the Python decoder learns on every sample capture's frames."""
    req_plans: dict = {}
    resp_plans: dict = {}
    for req, resp in _frames():
        msg = decode_request(req, True)
        if decoding.deferrable(msg.api_key, "request", msg.api_version) \
                if msg.api_key is not None and msg.api_version is not None else False:
            decoding._learn_plan(req_plans, msg)
            if resp is not None:
                decoding._learn_plan(resp_plans, decode_response(
                    resp, msg.api_key, msg.api_version,
                    decoding.deferrable(msg.api_key, "response", msg.api_version)))
    return req_plans, resp_plans


def _python_request(raw: bytes) -> KafkaMessage:
    key, ver = struct.unpack_from(">hh", raw, 0)
    return decode_request(raw, decoding.deferrable(key, "request", ver))


def _python_response(raw: bytes, key: int, ver: int) -> KafkaMessage:
    return decode_response(raw, key, ver, decoding.deferrable(key, "response", ver))


def check_request(raw: bytes, plans: dict) -> bool:
    fast = decoding._defer_request_c(raw, plans)
    if fast is None:
        return False
    assert state(fast) == state(_python_request(raw)), raw.hex()
    return True


def check_response(raw: bytes, key: int, ver: int, plans: dict) -> bool:
    fast = decoding._defer_response_c(raw, key, ver, plans)
    if fast is None:
        return False
    assert state(fast) == state(_python_response(raw, key, ver)), raw.hex()
    return True


def test_every_sample_frame() -> None:
    req_plans, resp_plans = _plans()
    assert len(req_plans) >= 10 and len(resp_plans) >= 10
    made = 0
    for req, resp in _frames():
        if len(req) >= 4 and check_request(req, req_plans):
            made += 1
            key, ver = struct.unpack_from(">hh", req, 0)
            if resp is not None:
                made += check_response(resp, key, ver, resp_plans)
    assert made > 200


def test_cut_damaged_and_odd_frames() -> None:
    req_plans, resp_plans = _plans()
    frames = [(q, r) for q, r in _frames()
              if len(q) >= 4 and (struct.unpack_from(">hh", q, 0)[0] << 16
                                  | struct.unpack_from(">hh", q, 0)[1]) in req_plans]
    rng = random.Random(1123)
    made = declined = 0
    for _ in range(3000):
        req, resp = rng.choice(frames)
        key, ver = struct.unpack_from(">hh", req, 0)
        raw = bytearray(req if resp is None or rng.random() < 0.5 else resp)
        how = rng.randrange(5)
        if how == 0:
            del raw[rng.randrange(0, 16):]                       # cut in the header
        elif how == 1:
            raw[rng.randrange(0, min(16, len(raw)))] = rng.randrange(256)
        elif how == 2 and len(raw) > 10:
            raw[8:10] = struct.pack(">h", rng.choice([-1, -2, 0, 1, 200, 32767]))
        elif how == 3:
            raw[rng.randrange(len(raw)):rng.randrange(len(raw))] = b"\xff\x00\x80"
        # how == 4: unchanged
        raw = bytes(raw)
        if raw[:4] == req[:4] or len(raw) < 4 or resp is None:
            ok = check_request(raw, req_plans) if len(raw) >= 4 else False
        else:
            ok = check_response(raw, key, ver, resp_plans)
        made += ok
        declined += not ok
    assert made > 500 and declined > 500


def test_unknown_plans_and_odd_arguments_decline() -> None:
    req = struct.pack(">hhih", 0, 8, 7, 3) + b"cli" + b"\x00" * 20
    assert decoding._defer_request_c(req, {}) is None
    assert decoding._defer_request_c(bytearray(req), {0 << 16 | 8: (1, len)}) is None
    assert decoding._defer_response_c(b"\x00\x00\x00\x07", 0, 8, {}) is None
    assert decoding._defer_response_c(b"\x00\x00\x00\x07", -1, 8, {0: (0, len)}) is None
    assert decoding._defer_response_c(b"\x00\x00\x00\x07", 1 << 40, 8, {0: (0, len)}) is None
    # a plan the Python side did not make (wrong header version) is refused
    assert decoding._defer_request_c(req, {0 << 16 | 8: (7, len)}) is None
