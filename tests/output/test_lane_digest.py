"""The C digest of the summary lane (``_speedups.lane_digest``, kwsniff/_speedups_lane.c)
must give exactly the text of the Python digests (kwsniff.output.digest's Produce and
Fetch digests joined by ``compose``) wherever it gives one, and give one for the usual
shapes. Compared on the skimmed bodies of every committed capture and on seeded random
bodies around those shapes (odd types, missing keys, several topics, errors)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka.model import PAIRED, Exchange
from kwsniff.output import digest as D
from kwsniff.output import skim
from kwsniff.output.skim import SkimFacts, _body

ROOT = Path(__file__).resolve().parents[2]
PCAPS = sorted((ROOT / "pcaps").glob("*.pcap"))

pytestmark = pytest.mark.skipif(skim._lane_digest is None,
                                reason="lane_digest needs the C accelerator")

_EX = Exchange(index=1, stream=0, client=("10.0.0.1", 1), broker=("10.0.0.2", 9092),
               status=PAIRED)


def python_text(key: int, req: dict[str, Any], resp: dict[str, Any]) -> str:
    facts = SkimFacts(_EX, None, "", [])
    left = D._REQUEST[key](req, 8, facts)
    right = D._RESPONSE[key](resp, 8, facts, req)
    return D.compose(_EX, left, right)


def check(key: int, req: Any, resp: Any) -> bool:
    """Whether the C digest made a text (then it must be the Python one)."""
    text = skim._lane_digest(key, req, resp)
    if text is None:
        return False
    assert text == python_text(key, req, resp), (key, req, resp)
    return True


def test_skimmed_bodies_of_every_capture() -> None:
    made = total = 0
    for pcap in PCAPS:
        engine = Engine(EngineOptions(defer_bodies=True))
        with open_capture(str(pcap)) as source:
            for ex in engine.run(source):
                req, resp = ex.request, ex.response
                if ex.protocol != "kafka" or req is None or resp is None \
                        or req.deferred is None or resp.deferred is None \
                        or req.api_key not in (0, 1):
                    continue
                rb, pb = _body(req, None), _body(resp, [])
                if rb is not None and pb is not None:
                    total += 1
                    made += check(req.api_key, rb, pb)
    assert total > 50 and made >= 0.8 * total


def test_usual_shapes_are_made() -> None:
    produce = {"TransactionalId": None, "Acks": -1, "TimeoutMs": 30000, "TopicData": [
        {"Name": "orders", "PartitionData": [{"Index": 2, "Records": (1, 3, 300)}]}]}
    produced = {"Responses": [{"Name": "orders", "PartitionResponses": [
        {"Index": 2, "ErrorCode": 0, "BaseOffset": 77}]}], "ThrottleTimeMs": 5}
    assert check(0, produce, produced)
    assert skim._lane_digest(0, produce, produced) == \
        "orders[2] 1 batch 3 records 300 B acks=-1 → 1 ok, offset 77, throttled 5 ms"
    fetch = {"MaxWaitMs": 500, "SessionId": 9, "SessionEpoch": 4, "ForgottenTopicsData": [],
             "Topics": [{"Topic": "a", "Partitions": [{"Partition": p, "FetchOffset": 1}
                                                      for p in (5, 0, 1, 2, 7, 8)]}]}
    fetched = {"ErrorCode": 0, "Responses": [{"Topic": "a", "Partitions": [
        {"PartitionIndex": 0, "ErrorCode": 0, "HighWatermark": 10, "Records": (2, 5, 5000)},
        {"PartitionIndex": 1, "ErrorCode": 0, "HighWatermark": 10, "Records": None}]}]}
    assert skim._lane_digest(1, fetch, fetched) == \
        "a[0..2,5,7,8] 6 partitions session 9/4 wait 500 ms → 5 records 4.9 KiB, " \
        "from 1/2 partitions"
    assert check(1, fetch, fetched)


def test_declines_what_it_does_not_word() -> None:
    req = {"Acks": 1, "TopicData": [{"Name": "t", "PartitionData": [{"Index": 0}]}]}
    ok = {"Responses": [{"Name": "t", "PartitionResponses": [{"Index": 0, "ErrorCode": 0}]}]}
    assert check(0, req, ok)
    failed = {"Responses": [{"Name": "t", "PartitionResponses": [{"Index": 0, "ErrorCode": 6}]}]}
    assert skim._lane_digest(0, req, failed) is None                 # error codes
    assert skim._lane_digest(0, dict(req, TransactionalId="tx"), ok) is None
    ids = {"Acks": 1, "TopicData": [{"TopicId": b"\x01" * 16, "PartitionData": []}]}
    assert skim._lane_digest(0, ids, ok) is None                     # a topic id
    twice = {"Acks": 1, "TopicData": [{"Name": "t", "PartitionData": []}] * 2}
    assert skim._lane_digest(0, twice, ok) is None                   # merged topics
    assert skim._lane_digest(3, req, ok) is None                     # another API
    assert skim._lane_digest(0, req, None) is None                   # no response


_NAMES = ["orders", "payments", "t", "ünïcode", "", "orders"]


def _value(rng: random.Random, usual: Any) -> Any:
    """Mostly the usual value, sometimes something odd."""
    roll = rng.random()
    if roll < 0.95:
        return usual
    return rng.choice([None, True, -1, 0, 1 << 70, "x", 3.5, [], {}, (1, 2, 3), b"\x00"])


def _partition(rng: random.Random, key: str, fields: dict[str, Any]) -> Any:
    if rng.random() < 0.03:
        return rng.choice([1, None, "p"])
    d = {rng.choice([key, key, "PartitionIndex", "Partition", "Index", "PartitionId", "X"]):
         _value(rng, rng.randrange(8))}
    for name, usual in fields.items():
        if rng.random() < 0.95:
            d[name] = _value(rng, usual() if callable(usual) else usual)
    return d


def _records(rng: random.Random) -> Any:
    return rng.choice([None, (1, rng.randrange(5), rng.randrange(5000)),
                       (rng.randrange(3), rng.randrange(3), rng.choice([0, 1023, 1024,
                                                                         1 << 20, 5 << 30]))])


def _topics(rng: random.Random, tkey: str, pkey: str, part: str,
            fields: dict[str, Any]) -> Any:
    if rng.random() < 0.03:
        return rng.choice([None, {}, "x"])
    out = []
    for _ in range(rng.choice([0, 1, 1, 1, 2, 3, 4])):
        if rng.random() < 0.03:
            out.append("not a struct")
            continue
        t = {rng.choice(["Name", "Topic", "TopicName", "Name", "TopicId"]):
             _value(rng, rng.choice(_NAMES))}
        parts = [_partition(rng, part, fields) for _ in range(rng.choice([0, 1, 1, 2, 5]))]
        t[pkey] = _value(rng, parts)
        out.append(t)
    return out


def _error(rng: random.Random) -> Any:
    return 0 if rng.random() < 0.9 else rng.choice([1, 6, None])


def test_seeded_random_bodies() -> None:
    rng = random.Random(20261123)
    made = declined = 0
    for _ in range(6000):
        if rng.random() < 0.5:
            key = 0
            req = {"Acks": _value(rng, rng.choice([0, 1, -1])),
                   "TopicData": _topics(rng, "TopicData", "PartitionData", "Index",
                                        {"Records": lambda: _records(rng)})}
            if rng.random() < 0.1:
                req["TransactionalId"] = rng.choice([None, "", "txn-1"])
            resp = {"Responses": _topics(rng, "Responses", "PartitionResponses", "Index",
                                         {"ErrorCode": lambda: _error(rng),
                                          "BaseOffset": lambda: rng.randrange(1000)}),
                    "ThrottleTimeMs": _value(rng, rng.choice([0, 0, 20]))}
        else:
            key = 1
            req = {"MaxWaitMs": _value(rng, 500),
                   "SessionId": _value(rng, rng.choice([0, 0, 12])),
                   "SessionEpoch": _value(rng, rng.choice([-1, 3])),
                   "ForgottenTopicsData": _value(rng, []),
                   "Topics": _topics(rng, "Topics", "Partitions", "Partition",
                                     {"FetchOffset": lambda: rng.randrange(100)})}
            resp = {"ErrorCode": _value(rng, 0),
                    "Responses": _topics(rng, "Responses", "Partitions", "PartitionIndex",
                                         {"ErrorCode": lambda: _error(rng),
                                          "HighWatermark": lambda: rng.randrange(100),
                                          "Records": lambda: _records(rng)})}
        for body in (req, resp):
            if rng.random() < 0.05:
                body.pop(rng.choice(list(body)))
        try:
            python_text(key, req, resp)
        except Exception:  # noqa: BLE001 - the lane then declines; C must not make a text
            assert skim._lane_digest(key, req, resp) is None
            continue
        if check(key, req, resp):
            made += 1
        else:
            declined += 1
    assert made > 800 and declined > 800, (made, declined)
