"""Topic id annotation along the schema plan (``TopicIds._visit``) does exactly what the
walk over every struct of the body (``TopicIds._walk``) does: the same names added in
the same places, the same ids learned, the same counters; on every body of the sample
captures that can hold a topic id, and on damaged copies of them."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka.topic_ids import TopicIds, id_plan

PCAPS = sorted((Path(__file__).resolve().parents[2] / "pcaps").glob("*.pcap"))

pytestmark = pytest.mark.skipif(not PCAPS, reason="no sample captures in pcaps/")


def _bodies() -> list[tuple[int, str, int, dict[str, Any]]]:
    """(api key, kind, version, body as decoded, before annotation) of every message with
    a plan; and a table that knows every id/name pair of the captures."""
    out = []
    for pcap in PCAPS:
        with open_capture(str(pcap)) as source:
            for ex in Engine(EngineOptions()).run(source):
                for kind, msg in (("request", ex.request), ("response", ex.response)):
                    if (msg is None or not isinstance(msg.body, dict) or msg.api_version is None
                            or id_plan(msg.api_key, kind, msg.api_version) is None):
                        continue
                    body = copy.deepcopy(msg.body)
                    _strip_names(body)
                    out.append((msg.api_key, kind, msg.api_version, body))
    return out


def _strip_names(node: Any) -> None:
    if isinstance(node, dict):
        node.pop("_topic_name", None)
        for v in node.values():
            _strip_names(v)
    elif isinstance(node, list):
        for v in node:
            _strip_names(v)


def _table(bodies: list) -> TopicIds:
    ids = TopicIds()
    for api_key, kind, _version, body in bodies:
        if kind == "response":
            ids.learn(api_key, body)
    assert ids.names, "the sample captures teach no topic ids"
    return ids


def _compare(ids: TopicIds, api_key: int, kind: str, version: int, body: dict) -> bool:
    walked, visited = copy.deepcopy(body), copy.deepcopy(body)
    a, b = copy.deepcopy(ids), copy.deepcopy(ids)
    a._walk(walked, 0)
    b.annotate(api_key, visited, kind, version)
    assert repr(visited) == repr(walked)          # same keys, same order, same values
    assert (list(b.names.items()), b.learned, b.resolved) == \
        (list(a.names.items()), a.learned, a.resolved)
    return b.resolved > ids.resolved


def _damage(node: Any, rng: random.Random) -> None:
    """Drop fields, null or empty arrays, put non-structs in arrays, zero ids."""
    if isinstance(node, dict):
        for k in list(node):
            r = rng.random()
            if r < 0.05:
                del node[k]
            elif r < 0.1 and isinstance(node[k], list):
                node[k] = rng.choice([None, [], [1, 2], ["x", {"TopicId": node.get("TopicId")}]])
            elif r < 0.13 and k == "TopicId":
                node[k] = "AAAAAAAAAAAAAAAAAAAAAA"
            else:
                _damage(node[k], rng)
    elif isinstance(node, list):
        for v in node:
            _damage(v, rng)


def test_plan_walk_same_as_full_walk_on_sample_bodies():
    bodies = _bodies()
    ids = _table(bodies)
    resolved = sum(_compare(ids, *entry) for entry in bodies)
    assert resolved > 0, "no body of the sample captures had a name added"


def test_plan_walk_same_as_full_walk_on_damaged_bodies():
    bodies = _bodies()
    ids = _table(bodies)
    rng = random.Random(2)
    for api_key, kind, version, body in bodies:
        for _ in range(5):
            damaged = copy.deepcopy(body)
            _damage(damaged, rng)
            _compare(ids, api_key, kind, version, damaged)


def test_no_plan_for_versions_without_topic_ids():
    assert id_plan(1, "request", 12) is None          # Fetch names topics until v13
    assert id_plan(1, "request", 13) is not None
    assert id_plan(12, "request", 4) is None           # Heartbeat
    assert id_plan(10_000, "request", 0) is None       # unknown API


def test_a_plan_exactly_where_the_schema_has_topic_ids():
    from kwsniff.kafka.protocol.schema_table import MESSAGES
    from kwsniff.kafka.topic_ids import has_topic_ids
    checked = 0
    for (api_key, kind), entry in MESSAGES.items():
        for seg in entry[1]:
            for version in range(seg[0], min(seg[1], 40) + 1):
                assert (id_plan(api_key, kind, version) is not None) == \
                    has_topic_ids(api_key, kind, version), (api_key, kind, version)
                checked += has_topic_ids(api_key, kind, version)
    assert checked > 50
