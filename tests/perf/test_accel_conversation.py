"""The accelerator's conversation paths (``_speedups.conv_frames`` / ``conv_refresh`` /
``conv_data``, kwsniff/_speedups_conv.c, and ``engine_data``, kwsniff/_speedups_engine.c)
against the Python methods they copy (``Conversation._frames`` / ``_refresh`` / ``data``
with ``Framer.data``, ``Engine._feed``): on every sample capture, and on damaged,
cut, reordered and duplicated packets of them, the engine gives the same exchanges (every
slot of every exchange and message, in the same order), the same run counters and the
same connection summaries, with bodies deferred (where C takes frames) and without."""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from kwsniff import engine as engine_module
from kwsniff.accel import speedups
from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka import conversation
from kwsniff.kafka.model import Exchange, KafkaMessage

ROOT = Path(__file__).resolve().parents[2]
PCAPS = sorted((ROOT / "pcaps").glob("*.pcap"))

if str(ROOT / "tests" / "conversation") not in sys.path:    # the synthetic-session helpers
    sys.path.insert(0, str(ROOT / "tests" / "conversation"))
from convsim import Sim, merge  # noqa: E402
from kscenario import play, session  # noqa: E402

pytestmark = pytest.mark.skipif(conversation._FRAMES_C is None,
                                reason="needs the C accelerator")


def _message(msg: KafkaMessage | None) -> Any:
    if msg is None:
        return None
    out = []
    for f in dataclasses.fields(KafkaMessage):
        value = getattr(msg, f.name)
        if f.name == "body":
            value = repr(value)
        elif isinstance(value, dict):
            value = [(k, type(v), v) for k, v in value.items()]
        out.append((f.name, type(value), value))
    return out


def _exchange(ex: Exchange) -> Any:
    return (ex.index, ex.stream, ex.client, ex.broker, ex.status, ex.protocol,
            list(ex.problems), _message(ex.request), _message(ex.response))


def _run(packets: list[tuple], fast: bool, defer: bool) -> Any:
    saved = conversation._FRAMES_C, conversation._REFRESH_C, engine_module._CONV_DATA
    if not fast:
        conversation._FRAMES_C = conversation._REFRESH_C = engine_module._CONV_DATA = None
    try:
        engine = Engine(EngineOptions(defer_bodies=defer, reorder_limit=64, timeout=30.0))
        exchanges = [_exchange(ex) for ex in engine.run(packets)]
    finally:
        conversation._FRAMES_C, conversation._REFRESH_C, engine_module._CONV_DATA = saved
    summary = engine.summary.to_dict()
    conns = [dataclasses.asdict(c) for c in engine.connection_summaries()]
    return exchanges, summary, conns


def _packets(pcap: Path) -> list[tuple]:
    with open_capture(str(pcap)) as source:
        return [tuple(p) for p in source]


def _compare(packets: list[tuple], defer: bool, what: str) -> None:
    fast = _run(packets, True, defer)
    slow = _run(packets, False, defer)
    assert fast[1] == slow[1], f"{what}: run counters differ"
    assert fast[2] == slow[2], f"{what}: connection summaries differ"
    assert len(fast[0]) == len(slow[0]), f"{what}: exchange counts differ"
    for a, b in zip(fast[0], slow[0]):
        assert a == b, f"{what}: exchange {b[0]} differs"


@pytest.mark.parametrize("pcap", PCAPS, ids=[p.stem for p in PCAPS])
@pytest.mark.parametrize("defer", [True, False], ids=["deferred", "eager"])
def test_sample_captures_decode_the_same(pcap: Path, defer: bool) -> None:
    _compare(_packets(pcap), defer, pcap.name)


def test_the_c_paths_take_most_frames_of_a_long_conversation() -> None:
    """The comparison above is only worth something if C takes frames: on the capture
    with the longest conversations most paired frames go through it."""
    pcap = ROOT / "pcaps" / "rdkafka-consumer-group.pcap"
    packets = _packets(pcap)
    before = speedups.conv_taken()
    exchanges, _, _ = _run(packets, True, True)
    after = speedups.conv_taken()
    requests, responses = after[0] - before[0], after[1] - before[1]
    paired = sum(1 for ex in exchanges if ex[4] == "paired")
    assert requests > 0 and responses > 0
    assert responses >= paired // 8, (requests, responses, paired)
    # without deferred bodies, C takes no frame (every frame goes to the Python methods);
    # it still cuts them
    before = speedups.conv_taken()
    _run(packets, True, False)
    after = speedups.conv_taken()
    assert after[:2] == before[:2] and after[2] > before[2]


def _sessions(seed: int) -> list[tuple]:
    """Four long kafka-python-encoded client sessions (Produce with acks 1 and 0, Fetch,
    Heartbeat, ListOffsets, FindCoordinator...), two of them pipelined, interleaved."""
    sims = []
    for k in range(4):
        sim = Sim(client=("10.0.0.1", 40001 + k), t0=1_700_000_000.0 + k * 0.00003)
        play(sim, session(n=250, seed=seed * 10 + k, start_corr=1 + 1000 * k), pipeline=k % 2 == 1)
        sim.fin()
        sims.append(sim)
    return merge(*sims)


def test_long_sessions_go_through_c_and_decode_the_same() -> None:
    packets = _sessions(1)
    before = speedups.conv_taken()
    _compare(packets, True, "long sessions")
    after = speedups.conv_taken()
    # (the comparison ran the engine once with C): C took a good share of the 1,000
    # requests and 830 responses (not: FindCoordinator, not deferred; requests beyond
    # the small reorder limit of these runs; responses after a waiting acks=0 Produce)
    assert after[0] - before[0] > 380 and after[1] - before[1] > 200, (before, after)
    assert after[2] - before[2] > 1000, (before, after)
    _compare(packets, False, "long sessions, eager")


def _mutate(packets: list[tuple], rng: random.Random) -> list[tuple]:
    """Flip payload bytes, drop, duplicate and swap packets, cut some short."""
    out = []
    for p in packets:
        frame, ts, linktype, data, orig_len = p
        r = rng.random()
        if r < 0.03:
            continue                                      # lost
        if r < 0.10 and len(data) > 60:
            b = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(54, len(b))             # past Ethernet/IPv4/TCP headers
                b[i] = rng.randrange(256)
            data = bytes(b)
        elif r < 0.13 and len(data) > 60:
            data = data[:rng.randrange(54, len(data))]     # snapped short
        out.append((frame, ts, linktype, data, orig_len))
        if r > 0.98:
            out.append((frame, ts, linktype, data, orig_len))   # retransmitted
    for _ in range(len(out) // 50):
        i = rng.randrange(max(1, len(out) - 1))
        out[i], out[i + 1] = out[i + 1], out[i]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_damaged_traffic_decodes_the_same(seed: int) -> None:
    rng = random.Random(seed)
    for pcap in PCAPS:
        packets = _mutate(_packets(pcap), rng)
        _compare(packets, True, f"{pcap.name} seed {seed}")
    _compare(_mutate(_sessions(seed), rng), True, f"long sessions seed {seed}")


def test_a_patched_method_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    """A patched (or subclassed) data/_request/_response/_refresh runs: C steps aside."""
    calls = {"data": 0, "_request": 0, "_response": 0, "_refresh": 0}
    for name in calls:
        original = getattr(conversation.Conversation, name)

        def wrapper(self: Any, *args: Any, _name: str = name, _orig: Any = original) -> Any:
            calls[_name] += 1
            return _orig(self, *args)

        monkeypatch.setattr(conversation.Conversation, name, wrapper)
    packets = _packets(ROOT / "pcaps" / "rdkafka-acks.pcap")
    before = speedups.conv_taken()
    exchanges, _, _ = _run(packets, True, True)
    assert speedups.conv_taken() == before
    requests = sum(1 for ex in exchanges if ex[7] is not None)
    assert calls["_request"] >= requests and calls["_response"] > 0 and calls["_refresh"] > 0
    assert calls["data"] > 0


def test_a_patched_engine_feed_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    """engine_data hands every event to a patched Engine._feed."""
    seen: list[str] = []
    original = engine_module.Engine._feed

    def wrapper(self: Any, ev: Any) -> Any:
        seen.append(type(ev).__name__)
        return original(self, ev)

    monkeypatch.setattr(engine_module.Engine, "_feed", wrapper)
    packets = _packets(ROOT / "pcaps" / "rdkafka-acks.pcap")
    fast = _run(packets, True, True)
    assert "StreamData" in seen and "ConnectionOpened" in seen
    monkeypatch.undo()
    assert fast == _run(packets, False, True)


@pytest.mark.parametrize("name", ["_release", "count"])
def test_a_patched_release_or_count_is_honoured(monkeypatch: pytest.MonkeyPatch,
                                               name: str) -> None:
    """engine_data releases through a patched Engine._release or RunSummary.count (it
    drains and counts in C only while both are the ones bound)."""
    owner = engine_module.Engine if name == "_release" else engine_module.RunSummary
    original = getattr(owner, name)
    calls = [0]

    def wrapper(self: Any, *args: Any) -> Any:
        calls[0] += 1
        return original(self, *args)

    monkeypatch.setattr(owner, name, wrapper)
    packets = _packets(ROOT / "pcaps" / "rdkafka-acks.pcap")
    patched = _run(packets, True, True)
    assert calls[0] > 0
    monkeypatch.undo()
    calls[0] = 0
    assert patched == _run(packets, True, True) == _run(packets, False, True)
