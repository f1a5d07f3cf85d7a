"""Test helpers: real captures as packet tuples, and small edits of them (drop packets,
change the bytes of one Kafka message in place) to make damaged copies."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions

PCAPS = Path(__file__).resolve().parents[2] / "pcaps"


def packets(name: str) -> list[tuple]:
    """The packet tuples of ``pcaps/<name>``, data as bytes."""
    with open_capture(str(PCAPS / name)) as src:
        return [(f, ts, lt, bytes(data), orig) for f, ts, lt, data, orig in src]


def decode(pkts: list[tuple], **opts: Any) -> tuple[Engine, list]:
    eng = Engine(EngineOptions(**opts))
    return eng, list(eng.run(pkts))


def message_at(pkts: list[tuple], raw: bytes, frame: int) -> tuple[int, int]:
    """``(packet index, offset of the size prefix in its data)`` of the Kafka message
    ``raw`` (bytes after the size prefix) whose first byte is in capture frame ``frame``."""
    i = frame - 1
    data = pkts[i][3]
    head = struct.pack(">i", len(raw)) + raw[:min(len(raw), 12)]
    at = data.find(head)
    assert at >= 0, "message start not found in its frame"
    return i, at


def patch(pkts: list[tuple], index: int, at: int, new: bytes) -> list[tuple]:
    """A copy of ``pkts`` with ``new`` written over packet ``index`` from byte ``at``."""
    f, ts, lt, data, orig = pkts[index]
    data = data[:at] + new + data[at + len(new):]
    out = list(pkts)
    out[index] = (f, ts, lt, data, orig)
    return out
