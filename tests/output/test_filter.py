"""The display-filter language: evaluation, error messages with positions, completion."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from builders import build, exchange, record_batch, request, response
from kwsniff.errors import UserError
from kwsniff.kafka.model import UNANSWERED
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.fields import FIELDS, field_help
from kwsniff.output.filter import FilterError, check_filter, compile_filter, suggest, tokenize


@pytest.fixture(scope="module")
def produce() -> ExchangeFacts:
    parts = [{"Index": i, "Records": record_batch([b"v"] * 10)} for i in range(3)]
    req = request(build(ProduceRequest, 9, {
        "TransactionalId": "tx-1", "Acks": -1, "TimeoutMs": 30000,
        "TopicData": [{"Name": "orders", "PartitionData": parts}]}), client_id="billing-svc")
    resp = response(build(ProduceResponse, 9, {
        "Responses": [{"Name": "orders", "PartitionResponses": [
            {"Index": i, "ErrorCode": 6 if i == 2 else 0, "BaseOffset": 0} for i in range(3)]}],
        "ThrottleTimeMs": 0}), req, ts=req.ts_last + 0.0605)
    return ExchangeFacts(exchange(req, resp, index=4, stream=2))


@pytest.fixture(scope="module")
def fetch() -> ExchangeFacts:
    req = request(build(FetchRequest, 12, {
        "ReplicaId": -1, "MaxWaitMs": 500, "SessionId": 0, "SessionEpoch": -1,
        "Topics": [{"Topic": "payments", "Partitions": [{"Partition": 7, "FetchOffset": 1}]}]}),
        client_id="")
    return ExchangeFacts(exchange(req, None, status=UNANSWERED, index=5, stream=3))


MATCHING = [
    'api == "Produce" and topic == "orders" and latency_ms > 50',
    "api == produce",
    "api == 0",
    "api in {Produce Fetch}",
    "version >= 9 && version < 10",
    "client_id == billing-svc",
    'client_id matches "^bill"',
    "client_id contains svc",
    "topic == orders",
    "partition == 2",
    "partition in {1..2}",
    "partition in {5, 0}",
    "partition != 9",
    "error",
    "error == NOT_LEADER_OR_FOLLOWER",
    "error == not_leader_or_follower",
    "error == 6",
    "error contains LEADER",
    "error in {3, 6}",
    "status == paired",
    "status == PAIRED",
    "client == 10.0.0.1",
    'client == "10.0.0.1:50002"',
    "broker == 10.0.0.2:9092",
    "broker_port == 9092",
    "stream == 2",
    "exchange == 4",
    "frame == 2",
    "records == 30",
    "records",
    "bytes > 100",
    "acks == -1",
    "transactional_id == tx-1",
    "latency_ms >= 60.4",
    "not topic == payments",
    "!(api == Fetch) and (topic == orders or topic == x)",
    "topic not in {payments}",
    "api eq Produce and version ge 9",
    "topic ~ ord",
    "TOPIC == orders",
]

NOT_MATCHING = [
    "api == Fetch",
    "topic != orders",
    "topic == payments",
    "partition > 2",
    "error == UNKNOWN_TOPIC_OR_PARTITION",
    "latency_ms < 50",
    "status != paired",
    "client == 10.0.0.9",
    "problem",
    "group",
    "not records",
    "topic in {a, b}",
    "partition in {3..9}",
]


@pytest.mark.parametrize("expr", MATCHING)
def test_matching(produce: ExchangeFacts, expr: str) -> None:
    assert compile_filter(expr).matches(produce), expr


@pytest.mark.parametrize("expr", NOT_MATCHING)
def test_not_matching(produce: ExchangeFacts, expr: str) -> None:
    assert not compile_filter(expr).matches(produce), expr


def test_absent_values(fetch: ExchangeFacts) -> None:
    assert compile_filter("status == unanswered").matches(fetch)
    assert not compile_filter("latency_ms > 0").matches(fetch)
    assert compile_filter("latency_ms != 5").matches(fetch)
    assert not compile_filter("latency_ms").matches(fetch)
    assert not compile_filter("client_id").matches(fetch)     # empty client id: absent
    assert not compile_filter("error").matches(fetch)
    assert compile_filter("topic == payments and partition == 7").matches(fetch)
    assert not compile_filter("records").matches(fetch)


ERRORS = [
    # (expression, message fragment, column)
    ('api == "Produc"', "unknown api 'Produc'; did you mean 'Produce'?", 8),
    ("topc == orders", "unknown field 'topc'; did you mean 'topic'?", 1),
    ("version == abc", "field 'version' is a number; 'abc' is not", 12),
    ("api ==", "expected a value after '==', found end of expression", 7),
    ("(api == Fetch", "expected ')' to close the '(' at column 1", 14),
    ('topic == "abc', "unterminated string", 10),
    ("error == NOT_LEADER", "unknown error name 'NOT_LEADER'; did you mean "
                           "'NOT_LEADER_OR_FOLLOWER'?", 10),
    ('topic matches "(["', "bad regular expression", 17),
    ("api == Fetch )", "unmatched ')'", 14),
    ("version contains 1", "'contains' needs a text field; 'version' is a number", 18),
    ("", "empty expression", 1),
    ("   ", "empty expression", 4),
    ("topic in {}", "empty set '{}'", 11),
    ("topic in {a", "expected '}' to close the '{' at column 10", 12),
    ("client > 1", "does not apply to address field 'client'", 8),
    ("api $ 3", "unexpected character '$'", 5),
    ("status == done", "unknown status 'done'", 11),
    ("latency_ms > 1 and", "expected a field name, found end of expression", 19),
    ("topic in {a..b}", "a range needs", 11),
    ("topic orders", "expected an operator", 7),
    ("== 3", "expected a field name, found '=='", 1),
    ("()", "empty parentheses", 2),
    ("api == Produce Fetch", "expected 'and', 'or' or end of expression, found 'Fetch'", 16),
]


@pytest.mark.parametrize("expr,fragment,column", ERRORS)
def test_errors(expr: str, fragment: str, column: int) -> None:
    with pytest.raises(FilterError) as info:
        compile_filter(expr)
    err = info.value
    assert isinstance(err, UserError)
    assert fragment in err.message
    assert err.column == column, (err.message, err.column)
    lines = str(err).splitlines()
    assert lines[0].startswith("bad display filter: ")
    assert lines[0].endswith(f"(column {column})")
    assert lines[1] == "    " + expr
    assert lines[2] == "    " + " " * (column - 1) + "^"


def test_check_filter() -> None:
    assert check_filter("api == Produce") is None
    err = check_filter("api ==")
    assert err is not None and err.position == 6


def test_tokenize_words_numbers_ranges() -> None:
    kinds = [(t.kind, t.text) for t in tokenize("partition in {0..3} and client == 10.0.0.1:5")]
    assert kinds == [("WORD", "partition"), ("WORD", "in"), ("LBRACE", "{"), ("NUMBER", "0"),
                     ("DOTDOT", ".."), ("NUMBER", "3"), ("RBRACE", "}"), ("AND", "and"),
                     ("WORD", "client"), ("OP", "=="), ("WORD", "10.0.0.1:5"), ("EOF", "")]
    values = [t.value for t in tokenize("0x10 -3 2.5 1e3") if t.kind == "NUMBER"]
    assert values == [16, -3, 2.5, 1000.0]
    assert [t.text for t in tokenize(r'"a\"b\x41\n"')][:1] == ['a"bA\n']


def test_field_list_is_documented() -> None:
    names = [n for n, _, _ in field_help()]
    for required in ("api", "version", "client_id", "topic", "partition", "group", "error",
                     "latency_ms", "status", "client", "broker", "bytes", "records"):
        assert required in names
    assert all(desc for _, _, desc in field_help())
    with open(_doc_path(), encoding="utf-8") as fh:
        doc = fh.read()
    for name in FIELDS:
        assert f"`{name}`" in doc, f"field {name} missing from docs/display-filters.md"


def _doc_path() -> str:
    from pathlib import Path
    return str(Path(__file__).resolve().parents[2] / "docs" / "display-filters.md")


def test_suggest() -> None:
    assert suggest("to") == ["topic", "topic_id"]
    assert "contains" in suggest("topic ")
    assert suggest('api == "Pro') == ['"Produce"']
    assert suggest("status == ") == ['"paired"', '"no_response_expected"', '"unanswered"',
                                     '"orphan_response"']
    assert suggest("api == Fetch a") == ["and"]
    assert "error" in suggest("api == Fetch and ")
