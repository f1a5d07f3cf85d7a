"""Deferred bodies (``EngineOptions.defer_bodies``, what ``-j`` workers run): the engine
leaves the bodies it does not read itself undecoded, and
:func:`kwsniff.kafka.decoding.complete` decodes them later. Completed exchanges must be
exactly what the eager engine gives (header, body with types and key order, record
sets with their topic/partition tags, problems in order, offsets), and the engine's own
results (exchanges, statuses, order, counters) must not depend on which exchanges are
completed: a worker completes only the ones it renders.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from fuzz.checks import engine_view, exchange_state, message_state
from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka import decoding
from kwsniff.kafka.protocol.decoder import complete_body
from kwsniff.output.pipeline import run_counters

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "pcaps").glob("*.pcap"))


def run(capture: Path, defer: bool, completed: Any = lambda ex: True) -> tuple:
    """``(states of the completed exchanges, engine views of all, counters, deferred
    messages seen)`` of one engine run (``fuzz.checks`` compares the same way)."""
    engine = Engine(EngineOptions(defer_bodies=defer))
    states, order, deferred = [], [], 0
    with open_capture(str(capture)) as source:
        for ex in engine.run(source):
            for msg in (ex.request, ex.response):
                if msg is not None and msg.deferred is not None:
                    deferred += 1
            order.append(engine_view(ex))
            if completed(ex):
                decoding.complete(ex, engine.ctx.annotate_ctx)
                states.append(exchange_state(ex))
        counters = run_counters(engine.summary, source.problems)
    return states, order, counters, engine.summary.to_dict(), deferred


@pytest.mark.parametrize("capture", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_completed_exchanges_are_the_eager_ones(capture: Path) -> None:
    eager = run(capture, False)
    assert eager[4] == 0                            # the default engine defers nothing
    deferred = run(capture, True)
    assert deferred[:4] == eager[:4]
    # a worker completes some exchanges only: the engine's results stay the same
    odd = run(capture, True, lambda ex: ex.index % 2 == 1)
    assert odd[1:4] == eager[1:4]
    assert odd[0] == [s for s in eager[0] if s[0] % 2 == 1]


def test_real_traffic_is_deferred() -> None:
    """The bodies of every deferrable API of a real client are deferred (so the
    speed-up is real); Metadata and ApiVersions are decoded at once."""
    engine = Engine(EngineOptions(defer_bodies=True))
    keys = set()
    with open_capture(str(ROOT / "pcaps" / "aiokafka.pcap")) as source:
        for ex in engine.run(source):
            for msg in (ex.request, ex.response):
                if msg is not None and msg.deferred is not None:
                    keys.add(msg.api_key)
                    assert msg.body is None and msg.body_offset > 0
                elif msg is not None and msg.api_key in (3, 18):
                    assert msg.body is not None
    assert keys == decoding.DEFERRABLE_APIS


def _produce_v8(acks: int, txn: bytes | None, tail: bytes) -> bytes:
    head = struct.pack(">hhih", 0, 8, 7, 3) + b"cli"
    txn_field = struct.pack(">h", -1) if txn is None else struct.pack(">h", len(txn)) + txn
    return head + txn_field + struct.pack(">hi", acks, 1000) + tail


@pytest.mark.parametrize("txn", [None, b"tx-1"])
@pytest.mark.parametrize("acks", [0, 1, -1])
def test_produce_acks_read_without_the_body(acks: int, txn: bytes | None) -> None:
    """acks=0 decides pairing: a deferred Produce request gives the eager answer, even
    when its body is damaged after the acks field."""
    from kwsniff.kafka.conversation import Conversation

    for tail in (struct.pack(">i", 0), b"\xff\xff\xff\x05junk"):
        raw = _produce_v8(acks, txn, tail)
        eager = decoding.decode_request(raw)
        lazy = decoding.decode_request(raw, defer=True)
        assert lazy.deferred is not None and lazy.body is None
        assert Conversation._acks(lazy) == Conversation._acks(eager) == acks
        complete_body(lazy)
        assert message_state(lazy) == message_state(eager)


def test_body_problems_go_before_later_ones() -> None:
    """A damaged deferred body: its problems land where the eager decode put them,
    before those the conversation layer added afterwards."""
    raw = _produce_v8(1, None, b"\xff\xff\xff\x05junk")
    eager = decoding.decode_request(raw)
    assert eager.problems
    lazy = decoding.decode_request(raw, defer=True)
    assert lazy.problems == []
    lazy.problems.append("resynchronised: 12 bytes before this message were skipped")
    eager.problems.append("resynchronised: 12 bytes before this message were skipped")
    assert complete_body(lazy) and not complete_body(lazy)     # once only
    assert message_state(lazy) == message_state(eager)


def test_what_is_never_deferred() -> None:
    # not a deferrable API (Metadata v9)
    meta = struct.pack(">hhih", 3, 9, 1, 1) + b"c" + b"\x00" * 4
    assert decoding.decode_request(meta, defer=True).deferred is None
    # versions with topic ids (Fetch v13 request)
    assert not decoding.deferrable(1, "request", 13) and decoding.deferrable(1, "request", 12)
    # a header with problems: the message is decoded at once
    bad = struct.pack(">hhih", 0, 8, 7, 50) + b"cli"
    assert decoding.decode_request(bad, defer=True).deferred is None
    # headers only (bodies off) and ApiVersions responses (their body version varies)
    assert decoding.decode_request(_produce_v8(1, None, b""), False, True).deferred is None
    resp = struct.pack(">ih", 1, 0) + struct.pack(">i", 0)
    assert decoding.decode_response(resp, 18, 0, defer=True).deferred is None
