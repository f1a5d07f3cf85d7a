"""Odd input never breaks the output layer: filters, digests, trees, export, stats."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kwsniff.kafka.model import STATUSES, Exchange, KafkaMessage
from kwsniff.kafka.records import Records
from kwsniff.output.digest import digest
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.fields import FIELDS
from kwsniff.output.filter import FilterError, compile_filter
from kwsniff.output.jsonl import ExportEncoder
from kwsniff.output.stats import StatsCollector
from kwsniff.output.summary import SummaryFormatter
from kwsniff.output.tree import build_tree, render_tree

# Field names the output layer looks at, so random bodies hit the interesting paths.
KEYS = ["Topics", "TopicData", "Responses", "Partitions", "PartitionData",
        "PartitionResponses", "Name", "Topic", "TopicId", "Index", "PartitionIndex",
        "Partition", "ErrorCode", "GroupId", "Groups", "MemberId", "Records", "Members",
        "Assignment", "ProducerId", "TransactionalId", "Key", "KeyType", "CoordinatorKeys",
        "ApiKeys", "Brokers", "Results", "Offset", "HighWatermark", "_topic_name",
        "_decoded_Assignment", "_unknown_tags", "ResourceType", "ResourceName", "Acks"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63), st.text(max_size=8),
                    st.binary(max_size=24), st.floats(allow_nan=True),
                    st.builds(Records, st.binary(max_size=80)))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
    max_leaves=25)
bodies = st.one_of(st.none(), st.dictionaries(st.sampled_from(KEYS), values, max_size=6))


@st.composite
def exchanges(draw: st.DrawFn) -> Exchange:
    api_key = draw(st.one_of(st.none(), st.integers(-1, 100)))
    version = draw(st.one_of(st.none(), st.integers(-1, 20)))
    protocol = draw(st.sampled_from(["kafka", "kafka", "kafka-0.7", "kafka-sasl"]))

    def message(kind: str) -> KafkaMessage | None:
        if not draw(st.booleans()):
            return None
        return KafkaMessage(kind=kind, raw=draw(st.binary(max_size=40)), api_key=api_key,
                            api_version=version, correlation_id=draw(st.integers(-5, 5)),
                            client_id=draw(st.one_of(st.none(), st.text(max_size=6))),
                            header=draw(st.dictionaries(st.sampled_from(KEYS), scalars,
                                                        max_size=3)),
                            body=draw(bodies), problems=draw(st.lists(st.text(max_size=5),
                                                                      max_size=2)),
                            ts_last=draw(st.floats(0, 2e9)), missing=draw(st.integers(0, 9)))
    req, resp = message("request"), message("response")
    if req is None and resp is None:
        req = KafkaMessage(kind="request", raw=b"", api_key=api_key)
    return Exchange(index=1, stream=0, client=("10.0.0.1", 1), broker=("::1", 9092),
                    status=draw(st.sampled_from(STATUSES)), request=req, response=resp,
                    protocol=protocol)


FILTERS = [compile_filter(e) for e in (
    "topic == a or partition in {0..3} or error or group contains x",
    "records > 0 and bytes > 0 and not problem", "client_id matches '.' or latency_ms < 1",
    " or ".join(f"{name}" for name in FIELDS if "." not in name))]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exchanges())
def test_views_never_raise(ex: Exchange) -> None:
    facts = ExchangeFacts(ex)
    assert isinstance(digest(ex, facts), str)
    assert isinstance(SummaryFormatter().format(ex, facts), str)
    for flt in FILTERS:
        assert flt.matches(facts) in (True, False)
    lines = list(render_tree(build_tree(ex, spans=True)))
    assert lines and lines[0].startswith("Exchange 1: ")
    for line in ExportEncoder("c", records=True).lines(ex):
        json.loads(line)
    StatsCollector().add(ExchangeFacts(ex))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("apitoc_ =!<>~{}()'\".,0123456789&|-x\\")),
               max_size=30))
def test_filter_errors_are_filter_errors(text: str) -> None:
    try:
        compile_filter(text)
    except FilterError as err:
        assert 0 <= err.position <= len(text)
        assert str(err).splitlines()[0].startswith("bad display filter: ")
