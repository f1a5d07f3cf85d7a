"""The schema-driven facts walkers find exactly what the generic walk finds, in the same
order: on every body of the sample captures, and on bodies carrying keys added after
decoding (which send a struct to the generic walk)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.output.facts import ExchangeFacts, TopicNames, _Collector
from kwsniff.output.facts_walk import body_walker

PCAPS = sorted((Path(__file__).resolve().parents[2] / "pcaps").glob("*.pcap"))
FIELDS = ("topics", "topic_ids", "partitions", "groups", "txn_ids", "members",
          "producer_ids", "errors", "records", "per_topic")

pytestmark = pytest.mark.skipif(not PCAPS, reason="no sample captures in pcaps/")


def _found(col: _Collector) -> tuple:
    return tuple(list(getattr(col, f).items()) if isinstance(getattr(col, f), dict)
                 else getattr(col, f) for f in FIELDS) + (
        [(t, p, id(r)) for t, p, r in col.sets],)


def _both(body: dict[str, Any], walker: Any, is_response: bool) -> tuple[tuple, tuple]:
    generic = _Collector(TopicNames(), is_response)
    generic.walk(body, None, None)
    planned = _Collector(TopicNames(), is_response)
    walker(planned, body)
    return _found(generic), _found(planned)


def _messages() -> list[Any]:
    out = []
    for pcap in PCAPS:
        with open_capture(str(pcap)) as source:
            for ex in Engine(EngineOptions()).run(source):
                for msg in (ex.request, ex.response):
                    if msg is not None and isinstance(msg.body, dict) and ex.protocol == "kafka":
                        out.append(msg)
    return out


def _structs(obj: Any) -> list[dict[str, Any]]:
    """Every dict in a body, outermost first."""
    out = []
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            out.append(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


def test_walkers_match_the_generic_walk_on_sample_captures() -> None:
    walked = 0
    for msg in _messages():
        version = msg.header.get("_body_version", msg.api_version)
        walker = body_walker(msg.api_key, msg.kind, version)
        if walker is None:
            continue
        generic, planned = _both(msg.body, walker, msg.kind == "response")
        assert generic == planned, (msg.api_key, msg.kind, version)
        walked += 1
    assert walked > 100


def test_walkers_hand_unexpected_keys_and_types_to_the_generic_walk() -> None:
    for msg in _messages()[:400]:
        version = msg.header.get("_body_version", msg.api_version)
        walker = body_walker(msg.api_key, msg.kind, version)
        if walker is None:
            continue
        for i, variant in enumerate(("extra key", "odd value")):
            body = copy.deepcopy(msg.body)
            structs = _structs(body)
            target = structs[(len(structs) - 1) * i // 2]
            if variant == "extra key":
                target["_topic_name"] = "renamed"
                target["_decoded_X"] = {"data": {"Topics": ["t1"], "GroupId": "g"}}
            else:
                for key, value in list(target.items()):
                    if type(value) is int:
                        target[key] = [7]          # a list where the schema has an int
                        break
            generic, planned = _both(body, walker, msg.kind == "response")
            assert generic == planned, (msg.api_key, msg.kind, version, variant)


def test_facts_of_an_exchange_do_not_depend_on_the_walker() -> None:
    """ExchangeFacts picks the walker itself; its topics equal a generic-walk result."""
    msg = next(m for m in _messages() if m.api_key == 1 and m.kind == "request")
    col = _Collector(None, False)
    col.walk(msg.body, None, None)

    class _Ex:
        protocol = "kafka"
        request = msg
        response = None

    facts = ExchangeFacts(_Ex(), None)  # type: ignore[arg-type]
    assert facts.topics == list(col.topics)
    assert facts.partitions == list(col.partitions)


def test_walkers_take_the_topic_name_added_next_to_a_topic_id() -> None:
    """``_topic_name`` (added by the topic id table) is handled by the walker itself, with
    the generic walk's precedence: a name field of the struct first, then the added name."""
    compared = 0
    for msg in _messages():
        version = msg.header.get("_body_version", msg.api_version)
        walker = body_walker(msg.api_key, msg.kind, version)
        if walker is None:
            continue
        for name in ("renamed", None, 7):
            body = copy.deepcopy(msg.body)
            with_id = [s for s in _structs(body) if "TopicId" in s]
            if not with_id:
                break
            for struct in with_id:
                struct["_topic_name"] = name
            generic, planned = _both(body, walker, msg.kind == "response")
            assert generic == planned, (msg.api_key, msg.kind, version, name)
            compared += 1
    assert compared > 30


def test_record_problems_are_counted_once() -> None:
    """The run's problem count (Selection) and the summary line read the same number,
    even when something decodes the records in between and finds record-level ones."""
    from fuzz import wire
    from kwsniff.kafka.model import Exchange, KafkaMessage
    from kwsniff.kafka.records import Records
    good = wire.v2_record(0, b"k", b"v")
    bad = good[:4] + wire.varint(100) + good[5:]        # a key claimed past the record
    data = wire.v2_batch([good, bad])
    body = {"TopicData": [{"Name": "t", "PartitionData": [{"Index": 0,
                                                          "Records": Records(data)}]}]}

    def facts() -> ExchangeFacts:
        msg = KafkaMessage("request", b"\0" * 16, 0, 9, body=body)
        return ExchangeFacts(Exchange(1, 0, ("a", 1), ("b", 2), "paired", request=msg))

    first = facts()
    assert first.record_problems == 0                   # batch header and CRC are fine
    records = body["TopicData"][0]["PartitionData"][0]["Records"]
    list(records.iter_records())                         # record-level problems appear
    assert records.problem_count > 0
    assert first.record_problems == 0                    # counted once
    assert facts().record_problems == records.problem_count


# -- the record sets alone (ExchangeFacts(lean=True), the -V path) -----------------------

def _exchanges() -> list[Any]:
    out = []
    for pcap in PCAPS:
        with open_capture(str(pcap)) as source:
            out += list(Engine(EngineOptions()).run(source))
    return out


def test_records_paths_name_every_records_field() -> None:
    from kwsniff.output.facts_walk import records_paths
    assert records_paths(0, "request", 9) == (("TopicData", "PartitionData", "Records"),)
    assert records_paths(1, "response", 11) == (("Responses", "Partitions", "Records"),)
    assert records_paths(59, "response", 0) == (("Topics", "Partitions", "UnalignedRecords"),)
    assert records_paths(3, "response", 12) == ()              # Metadata: none
    assert records_paths(12345, "request", 0) is None          # not in the table


def test_found_records_are_the_walks_record_sets_on_sample_captures() -> None:
    """find_records gives the very objects the walkers collect, also on bodies with
    keys added after decoding and values of unexpected types."""
    from kwsniff.output.facts_walk import find_records, records_paths
    with_sets = 0
    for msg in _messages():
        version = msg.header.get("_body_version", msg.api_version)
        paths = records_paths(msg.api_key, msg.kind, version)
        if paths is None:
            continue
        for variant in ("as decoded", "extra key", "odd values"):
            body = copy.deepcopy(msg.body) if variant != "as decoded" else msg.body
            for struct in _structs(body)[::2] if variant != "as decoded" else ():
                if variant == "extra key":
                    struct["_decoded_X"] = {"data": {"Topics": ["t1"]}}
                else:
                    for key, value in list(struct.items()):
                        if type(value) is list and value and type(value[0]) is dict:
                            struct[key] = value[0]      # a struct where an array was
                            break
            col = _Collector(TopicNames(), msg.kind == "response")
            col.walk(body, None, None)
            walked = [id(r) for _, _, r in col.sets]
            found = [id(r) for r in find_records(body, paths)]
            assert sorted(found) == sorted(walked), (msg.api_key, msg.kind, version, variant)
            with_sets += bool(found)
    assert with_sets > 50


def test_lean_facts_count_the_same_problems_and_learn_the_same_names() -> None:
    """Selection(lean=True) over every sample capture: the same problem count, the same
    per-exchange record problems and the same topic-id map as the full walks."""
    from kwsniff.output.pipeline import Selection
    for pcap in PCAPS:
        runs = []
        for lean in (False, True):
            sel = Selection(lean=lean)
            with open_capture(str(pcap)) as source:
                per = [(ex.index, f.record_problems)
                       for ex, f in sel(Engine(EngineOptions()).run(source))]
            runs.append((sel.problems, per, list(sel.names._names.items())))
        assert runs[0] == runs[1], pcap.name


def test_lean_facts_walk_bodies_that_teach_topic_names() -> None:
    """A Metadata response with topic ids is walked (its names are learnt) even when
    only the record problems are asked for; a Produce request is not walked."""
    from kwsniff.output.facts import teaches
    for ex in _exchanges():
        if ex.protocol != "kafka":
            continue
        names = TopicNames()
        facts = ExchangeFacts(ex, names, lean=True)
        facts.record_problems  # noqa: B018
        walked = facts._req is not None
        assert walked == (teaches(ex.request) or teaches(ex.response)), ex.index


def test_lean_record_problems_count_damaged_record_sets() -> None:
    """A batch with a bad CRC inside a Produce request counts as in a full walk."""
    from fuzz import wire
    from kwsniff.kafka.model import Exchange, KafkaMessage
    from kwsniff.kafka.records import Records
    data = bytearray(wire.v2_batch([wire.v2_record(0, b"k", b"v")]))
    data[-1] ^= 0xFF                                       # the CRC no longer matches
    counts = []
    for lean in (False, True):
        body = {"Acks": 1, "TimeoutMs": 5, "TopicData": [
            {"Name": "t", "PartitionData": [{"Index": 0, "Records": Records(bytes(data))},
                                            {"Index": 1, "Records": Records(bytes(data))}]}]}
        msg = KafkaMessage("request", b"\0" * 16, 0, 9, body=body)
        ex = Exchange(1, 0, ("a", 1), ("b", 2), "paired", request=msg)
        counts.append(ExchangeFacts(ex, TopicNames(), lean=lean).record_problems)
    assert counts[0] == counts[1] == 2
