"""Producer health on pcaps/insights-idempotent-retry (connection cut with Produce
requests in flight) and pcaps/rdkafka-idempotent-txn (no retry), against the clients'
own logs: librdkafka's "Sent"/"Received" lines, delivery reports and the log read back."""

from __future__ import annotations

from collections import Counter

from insights_run import insights_of, manifest


def _producer(insights, client_id):
    rows = [p for p in insights["producers"] if p["client_id"] == client_id]
    assert len(rows) == 1
    return rows[0]


def test_resent_batches_are_counted_as_retries(retry_capture):
    """Every ProduceRequest the client logged sending is either a first send of a
    batch or a retry; the ones it logged no response for are the unanswered ones."""
    insights, doc = retry_capture
    p = _producer(insights, "payments-producer")
    sends = [r for r in doc["requests"]
             if r["client_id"] == "payments-producer" and r["api_name"] == "Produce"]
    unanswered = [r for r in sends if not _answered(doc, sends, r)]
    assert p["batches"] + p["retries"] == len(sends)
    assert p["retries"] == 4 == len(p["retried_batches"])
    assert p["unanswered_requests"] == len(unanswered)
    assert p["out_of_order"] == 0
    assert p["records"] == len(doc["insights"]["produced"])
    for r in p["retried_batches"]:
        assert r["resent_ts"] > doc["insights"]["connection_cut"][0]["down_at"] > \
            r["first_sent_ts"]


def _answered(doc, sends, send):
    """Whether the client logged a response to ``send``: one with its correlation id,
    logged after it and before the next send with the same id (the ids restart on each
    new connection)."""
    same = sorted(r["ts"] for r in sends if r["correlation_id"] == send["correlation_id"])
    later = [t for t in same if t > send["ts"]]
    until = later[0] if later else float("inf")
    return any(send["ts"] <= r["ts"] < until for r in doc["insights"]["responses"]
               if r["api"] == "Produce" and r["client_id"] == send["client_id"]
               and r["correlation_id"] == send["correlation_id"])


def test_batches_written_twice_are_the_duplicates_the_reader_saw(retry_capture):
    insights, doc = retry_capture
    p = _producer(insights, "payments-producer")
    log = doc["insights"]["log"]
    keys = Counter(m["key"] for m in log)
    duplicated = sorted(m["offset"] for m in log if keys[m["key"]] > 1)
    wire = sorted(o for w in p["written_twice"] for o in w["offsets"])
    assert wire == duplicated and len(wire) == 8
    # the offsets the client's delivery reports gave are the retries' (the later ones)
    delivered = {m["key"]: m["offset"] for m in doc["insights"]["produced"]}
    for w in p["written_twice"]:
        keys_at = {m["offset"]: m["key"] for m in log}
        assert delivered[keys_at[w["offsets"][0]]] == w["offsets"][-1]


def test_a_clean_idempotent_and_transactional_run_has_no_retries():
    insights = insights_of("rdkafka-idempotent-txn")
    doc = manifest("rdkafka-idempotent-txn")
    by_client = {p["client_id"]: p for p in insights["producers"]}
    assert set(by_client) == {"idem-producer", "txn-producer"}
    for client, p in by_client.items():
        sent = [m for m in doc["produced"] if m["client_id"] == client]
        assert p["records"] == len(sent)
        assert p["retries"] == p["out_of_order"] == p["unanswered_requests"] == 0
        assert p["written_twice"] == [] and p["errors"] == {}
    assert by_client["txn-producer"]["transactional_id"] == "kwsniff-txn"
    assert by_client["idem-producer"]["transactional_id"] is None
