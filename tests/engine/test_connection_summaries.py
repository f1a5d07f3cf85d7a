"""The engine's finished-connection summaries (``Engine.connections``) and decrypted
connections' TLS details (``Engine.tls_info``) are bounded tables: the oldest entries
are forgotten first, and commands whose output never lists connections keep none."""

from __future__ import annotations

import argparse
from collections import OrderedDict

import pytest
from capture_edit import decode, packets

from kwsniff.commands.decode import engine_options
from kwsniff.engine import _keep

CAPTURE = "rdkafka-consumer-group.pcap"


def _retired_order(pkts: list[tuple]) -> list[int]:
    """Stream indexes of the finished Kafka connections, in the order they finished."""
    eng, _ = decode(pkts)
    return list(eng.connections)


def test_the_newest_summaries_are_kept_up_to_the_limit() -> None:
    pkts = packets(CAPTURE)
    order = _retired_order(pkts)
    assert len(order) >= 4
    for limit in (1, 2, len(order) - 1):
        eng, out = decode(pkts, max_connection_summaries=limit)
        assert list(eng.connections) == order[-limit:]
        # the decoding itself is the same
        assert len(out) == len(decode(pkts)[1])


def test_no_summary_is_kept_at_zero_and_nothing_else_changes() -> None:
    pkts = packets(CAPTURE)
    full, base = decode(pkts)
    eng, out = decode(pkts, max_connection_summaries=0)
    assert eng.connections == {} and not eng._earlier
    assert [(e.index, e.stream, e.status, e.api_key) for e in out] == \
        [(e.index, e.stream, e.status, e.api_key) for e in base]
    assert eng.summary.kafka_connections == full.summary.kafka_connections > 0
    assert eng.summary.problems == full.summary.problems


def test_streaming_commands_keep_no_connection_summary() -> None:
    """``decode``, ``export``, ``stats`` (and the parallel and Spark decoders that share
    their options) never list connections."""
    args = argparse.Namespace(port=None, no_detect=False, timeout=None)
    assert engine_options(args).max_connection_summaries == 0


def test_keep_forgets_the_oldest_first_stored_key() -> None:
    table: OrderedDict[int, str] = OrderedDict()
    for key in (5, 3, 9):
        _keep(table, key, f"v{key}", 2)
    assert list(table.items()) == [(3, "v3"), (9, "v9")]
    _keep(table, 3, "again", 2)          # stored again: keeps its place
    assert list(table.items()) == [(3, "again"), (9, "v9")]
    _keep(table, 7, "v7", 2)
    assert list(table.items()) == [(9, "v9"), (7, "v7")]


@pytest.mark.parametrize("n", [10, 1000])
def test_keep_holds_at_most_limit_keys(n: int) -> None:
    table: OrderedDict[int, int] = OrderedDict()
    for key in range(n):
        _keep(table, key, key, 7)
        assert len(table) == min(key + 1, 7)
    assert list(table) == list(range(n - 7, n))


def test_equal_api_versions_answers_share_one_dict() -> None:
    """Connections that got the same ApiVersions answer keep one dict of version
    ranges between them (not one each), equal to the answer; different answers keep
    their own."""
    from kwsniff.engine import Engine, EngineOptions
    eng = Engine(EngineOptions())
    out = list(eng.run(packets(CAPTURE)))
    answers = {}
    for ex in out:
        if ex.api_key == 18 and ex.response is not None and ex.response.body:
            keys = ex.response.body.get("ApiKeys") or []
            answers[ex.stream] = {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"])
                                  for k in keys}
    summaries = [cs for cs in eng.connection_summaries() if cs.api_versions]
    assert len(summaries) >= 2
    for cs in summaries:
        assert cs.api_versions == answers[cs.stream]
    by_content: dict[tuple, set[int]] = {}
    for cs in summaries:
        by_content.setdefault(tuple(cs.api_versions.items()), set()).add(id(cs.api_versions))
    assert all(len(ids) == 1 for ids in by_content.values())
    assert len({id(cs.api_versions) for cs in summaries}) == len(by_content) < len(summaries)


def test_shared_ranges_is_bounded() -> None:
    from kwsniff.engine import Engine
    ctx = Engine().ctx
    first = ctx.shared_ranges({18: (0, 3)})
    assert ctx.shared_ranges({18: (0, 3)}) is first
    for n in range(1100):
        ctx.shared_ranges({18: (0, n)})
    assert len(ctx.version_ranges) <= 1024
