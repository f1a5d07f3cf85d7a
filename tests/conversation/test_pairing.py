"""Pairing, statuses, latency, capture order, timeouts and limits (synthetic TCP streams)."""

from __future__ import annotations

import uuid

from convsim import Sim, frame, kreq, kresp, merge
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse
from kscenario import (
    api_versions,
    fetch,
    find_coordinator,
    heartbeat,
    list_offsets,
    metadata,
    play,
    produce,
    session,
)

from kwsniff.engine import Engine, EngineOptions
from kwsniff.tcp import iter_tcp_events
from kwsniff.kafka.model import NO_RESPONSE_EXPECTED, ORPHAN_RESPONSE, PAIRED, UNANSWERED


def run(*sims: Sim, drop=(), **opts):  # type: ignore[no-untyped-def]
    eng = Engine(EngineOptions(**opts))
    out = list(eng.run(merge(*sims, drop=drop)))
    return eng, out


def test_session_all_paired_with_exact_latency() -> None:
    steps = session(25, seed=7, big_fetch=4000)
    s = Sim()
    play(s, steps)
    s.fin()
    eng, out = run(s)
    assert len(out) == len(steps)
    by_corr = {e.correlation_id: e for e in out}
    for st in steps:
        ex = by_corr[st.corr]
        assert ex.api_key == st.api_key and ex.api_version == st.version
        if st.response is None:
            assert ex.status == NO_RESPONSE_EXPECTED and ex.response is None
        else:
            assert ex.status == PAIRED, ex.all_problems()
            assert ex.response.correlation_id == st.corr
            expected = (ex.response.ts_last - ex.request.ts_last) * 1000
            assert abs(ex.latency_ms - expected) < 1e-9
            assert ex.latency_ms > 0
        assert not ex.all_problems()
    assert [e.index for e in out] == list(range(1, len(out) + 1))
    assert eng.summary.exchanges[PAIRED] == sum(1 for st in steps if st.response)
    conn = eng.connection_summaries()[0]
    assert conn.client == ("10.0.0.1", 40001) and conn.broker == ("10.0.0.2", 9092)
    assert conn.client_ids == ["cli"] and conn.api_versions[3] == (0, 12)
    assert conn.client_side_by == "syn"


def test_unanswered_and_orphan_and_close() -> None:
    s = Sim()
    hb = heartbeat(5)
    s.s(hb.response)                      # response before any request: orphan
    md = metadata(6)
    s.c(md.request)                       # never answered
    s.fin()
    eng, out = run(s)
    statuses = sorted(e.status for e in out)
    assert statuses == [ORPHAN_RESPONSE, UNANSWERED]
    un = next(e for e in out if e.status == UNANSWERED)
    assert "closed before a response" in un.problems[0]
    orphan = next(e for e in out if e.status == ORPHAN_RESPONSE)
    assert orphan.request is None and orphan.correlation_id == 5
    # a heartbeat response alone ([error code]) fits many APIs: left undecoded, says why
    assert orphan.response.body is None and "ambiguous" in orphan.problems[0]


def test_timeout_makes_request_unanswered_in_capture_time() -> None:
    s = Sim()
    md = metadata(1)
    s.c(md.request)
    s.wait(5.0)
    for corr in range(2, 6):
        hb = heartbeat(corr)
        s.c(hb.request)
        s.s(hb.response)
        s.wait(1.0)
    eng = Engine(EngineOptions(timeout=3.0, overtake_limit=100))
    got = []
    pk = merge(s)
    it = eng.run(pk)
    first = next(it)
    got.append(first)
    got.extend(it)
    assert first.status == UNANSWERED and first.correlation_id == 1
    assert "no response within 3 s" in first.problems[0]
    assert [e.status for e in got[1:]] == [PAIRED] * 4


def test_overtaken_request_becomes_unanswered() -> None:
    s = Sim()
    lost = heartbeat(1)
    s.c(lost.request)                      # the broker never answers this one
    for corr in range(2, 5):
        st = heartbeat(corr)
        s.c(st.request)
        s.s(st.response)
    eng, out = run(s, overtake_limit=2)
    assert out[0].status == UNANSWERED and "later requests" in out[0].problems[0]
    assert [e.status for e in out[1:]] == [PAIRED] * 3


def test_reused_correlation_id() -> None:
    s = Sim()
    a = heartbeat(9)
    b = find_coordinator(9)
    s.c(a.request)
    s.c(b.request)
    s.s(b.response)
    eng, out = run(s)
    assert [e.status for e in out] == [UNANSWERED, PAIRED]
    assert "reused" in out[0].problems[0]
    assert out[1].api_key == 10


def test_acks0_no_response_and_stray_response_pairs() -> None:
    s = Sim()
    p0 = produce(1, acks=0)
    s.c(p0.request)
    s.wait(2.0)
    p1 = produce(2, acks=0)
    s.c(p1.request)
    stray = produce(2, acks=1)            # some brokers (librdkafka's mock) answer anyway
    s.s(stray.response)
    hb = heartbeat(3)
    s.c(hb.request)
    s.s(hb.response)
    s.fin()
    eng, out = run(s)
    assert [e.status for e in out] == [NO_RESPONSE_EXPECTED, PAIRED, PAIRED]
    assert out[0].problems == [] and out[0].response is None
    assert "acks=0" in out[1].problems[0]


def test_capture_order_across_connections() -> None:
    a = Sim(client=("10.0.0.1", 40001), t0=100.0)
    b = Sim(client=("10.0.0.3", 40002), t0=100.00005)
    slow = fetch(1)
    a.c(slow.request)                      # long-polling fetch, answered last
    quick = [heartbeat(c) for c in range(1, 4)]
    for st in quick:
        b.c(st.request)
        b.s(st.response)
    a.wait(0.5)
    a.s(slow.response)
    eng, out = run(a, b)
    assert [e.index for e in out] == [1, 2, 3, 4]
    assert out[0].stream == 0 and out[0].api_key == 1    # first request in the capture
    firsts = [e.request.frame_first for e in out]
    assert firsts == sorted(firsts)


OUT_OF_ORDER = "released out of capture order (reorder buffer limit)"


def test_reorder_limit_releases_others_while_a_request_waits() -> None:
    """A request that waits long (a JoinGroup during a rebalance, a long-poll Fetch)
    while more than ``reorder_limit`` later exchanges complete stops holding back the
    order; it stays waiting and, never answered, is reported at the end."""
    a = Sim(client=("10.0.0.1", 40001), t0=100.0)
    b = Sim(client=("10.0.0.3", 40002), t0=100.001)
    a.c(fetch(1).request)                  # never answered, blocks the order
    for c in range(1, 40):
        st = heartbeat(c)
        b.c(st.request)
        b.s(st.response)
    eng = Engine(EngineOptions(reorder_limit=10))
    out = list(eng.run(merge(a, b)))
    assert [e.index for e in out] == list(range(1, 41))
    assert all(e.status == PAIRED and e.api_key == 12 for e in out[:39])
    assert [e.correlation_id for e in out[:39]] == list(range(1, 40))
    last = out[39]
    assert last.status == UNANSWERED and last.api_key == 1
    assert last.problems == ["capture ended before a response", OUT_OF_ORDER]
    assert eng.ctx.reorder.forced >= 1 and eng.ctx.unordered.live == 0


def test_reorder_limit_keeps_the_late_answer_paired() -> None:
    """The waiting request's late response still pairs with it (true latency, no
    orphan); the exchange comes out when it completes, flagged as out of order."""
    a = Sim(client=("10.0.0.1", 40001), t0=100.0)
    b = Sim(client=("10.0.0.3", 40002), t0=100.001)
    slow = fetch(1)
    a.c(slow.request)
    for c in range(1, 40):
        st = heartbeat(c)
        b.c(st.request)
        b.s(st.response)
    a.wait(9.0)
    a.s(slow.response)
    eng, out = run(a, b, reorder_limit=10)
    assert [e.index for e in out] == list(range(1, 41))
    assert [e.status for e in out] == [PAIRED] * 40
    late = [e for e in out if e.api_key == 1]
    assert len(late) == 1 and late[0].problems == [OUT_OF_ORDER]
    assert late[0].latency_ms > 9000
    # released once 10 later exchanges waited behind it, before the 40th heartbeat
    assert out.index(late[0]) == 39
    assert eng.summary.exchanges[ORPHAN_RESPONSE] == 0
    assert eng.ctx.unordered.live == 0


def test_requests_waiting_out_of_order_are_bounded() -> None:
    """At most ``reorder_limit`` requests wait out of capture order in the whole run
    (memory stays bounded): the oldest beyond it is reported unanswered."""
    sims = [Sim(client=("10.0.0.1", 41000 + i), t0=100.0 + i * 0.0001) for i in range(4)]
    for s in sims:
        s.c(fetch(1).request)              # four requests that are never answered
    busy = Sim(client=("10.0.0.3", 40002), t0=100.01)
    for c in range(1, 80):
        st = heartbeat(c)
        busy.c(st.request)
        busy.s(st.response)
    eng = Engine(EngineOptions(reorder_limit=2))
    peak = 0
    out = []
    for ev in iter_tcp_events(merge(*sims, busy)):
        out += eng.feed_event(ev)
        peak = max(peak, eng.ctx.unordered.live)
    out += eng.finish()
    assert peak <= 2
    assert [e.index for e in out] == list(range(1, 84))
    given_up = [e for e in out if e.api_key == 1 and "requests waited out of capture order"
                in e.problems[0]]
    assert len(given_up) == 2
    assert all(e.status == UNANSWERED for e in out if e.api_key == 1)


def test_pipelined_requests_pair_in_any_order() -> None:
    s = Sim()
    steps = [heartbeat(1), find_coordinator(2), list_offsets(3), metadata(4)]
    play(s, steps, pipeline=True)
    eng, out = run(s)
    assert [e.status for e in out] == [PAIRED] * 4
    assert [e.api_key for e in out] == [12, 10, 2, 3]


def test_sasl_handshake_v0_raw_tokens() -> None:
    s = Sim()
    av = api_versions(1, 0)
    s.c(av.request)
    s.s(av.response)
    s.c(kreq(SaslHandshakeRequest, 0, 2, mechanism="PLAIN"))
    s.s(kresp(SaslHandshakeResponse, 0, 2, error_code=0, mechanisms=["PLAIN"]))
    s.c(frame(b"\x00alice\x00s3cret"))
    s.s(frame(b""))
    md = metadata(3)
    s.c(md.request)
    s.s(md.response)
    eng, out = run(s)
    assert [(e.protocol, e.status, e.api_key) for e in out] == [
        ("kafka", PAIRED, 18), ("kafka", PAIRED, 17), ("kafka-sasl", PAIRED, None), ("kafka", PAIRED, 3)]
    tok = out[2]
    assert tok.request.body["data"]["username"] == "alice"
    assert b"s3cret" not in tok.request.raw           # secrets masked unless asked
    assert tok.response.raw == b""
    assert eng.connection_summaries()[0].sasl_mechanism == "PLAIN"
    eng2, out2 = run(s, show_secrets=True)
    assert b"s3cret" in out2[2].request.raw


def _scram_v0_session() -> Sim:
    s = Sim()
    s.c(kreq(SaslHandshakeRequest, 0, 1, mechanism="SCRAM-SHA-256"))
    s.s(kresp(SaslHandshakeResponse, 0, 1, error_code=0, mechanisms=["SCRAM-SHA-256"]))
    s.c(frame(b"n,,n=erin,r=abcdefgh"))                          # packet 5 (after the SYNs)
    s.s(frame(b"r=abcdefghSRV,s=c2FsdA==,i=4096"))               # packet 6
    s.c(frame(b"c=biws,r=abcdefghSRV,p=cHJvb2Zwcm9vZnByb29m"))  # packet 7
    s.s(frame(b"e=unknown-user"))                                # packet 8
    md = metadata(3)
    s.c(md.request)
    s.s(md.response)
    return s


def test_raw_sasl_tokens_after_a_lost_broker_token() -> None:
    """The server-first token is lost: the framer finds the server-final token again
    and it answers the client-final one (SCRAM kinds); the client-first one is
    unanswered, and the Kafka traffic after them is paired as before."""
    eng, out = run(_scram_v0_session(), drop=[(0, 6)])
    got = [(e.protocol, e.status) for e in out]
    assert got == [("kafka", PAIRED), ("kafka-sasl", UNANSWERED), ("kafka-sasl", PAIRED),
                   ("kafka", PAIRED)]
    first, final = out[1], out[2]
    assert first.request.body["data"]["message"] == "client-first"
    assert "lost in a capture gap" in first.problems[0]
    assert final.request.body["data"]["message"] == "client-final"
    assert final.response.body["data"]["error"] == "unknown-user" and not final.problems
    assert b"cHJvb2Zw" not in final.request.raw


def test_raw_sasl_tokens_after_a_lost_client_token() -> None:
    eng, out = run(_scram_v0_session(), drop=[(0, 7)])
    got = [(e.protocol, e.status) for e in out]
    assert got == [("kafka", PAIRED), ("kafka-sasl", PAIRED), ("kafka-sasl", ORPHAN_RESPONSE),
                   ("kafka", PAIRED)]
    assert out[2].response.body["data"]["message"] == "server-final"
    assert "no client token waiting" in out[2].problems[0]


def test_topic_ids_resolved_from_metadata() -> None:
    tid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    s = Sim()
    md = metadata(1, version=12, topics=(("orders", tid),))
    s.c(md.request)
    s.s(md.response)
    f = fetch(2, version=13, topic_id=tid)
    s.c(f.request)
    s.s(f.response)
    eng, out = run(s)
    req_topic = out[1].request.body["Topics"][0]
    assert req_topic["TopicId"] == str(tid) and req_topic["_topic_name"] == "orders"
    keys = list(req_topic)
    assert keys.index("_topic_name") == keys.index("TopicId") + 1
    assert out[1].response.body["Responses"][0]["_topic_name"] == "orders"
    assert eng.summary.topic_ids_resolved == 2


def test_summary_counts_errors_and_requests() -> None:
    from kafka.protocol.consumer import HeartbeatResponse
    s = Sim()
    hb = heartbeat(1)
    s.c(hb.request)
    s.s(kresp(HeartbeatResponse, 1, 1, error_code=27))       # REBALANCE_IN_PROGRESS
    md = metadata(2)
    s.c(md.request)
    s.s(md.response)
    eng, out = run(s)
    c = eng.connection_summaries()[0]
    assert c.requests == {12: 1, 3: 1} and c.errors == {27: 1} and c.error_responses == 1
    assert c.statuses == {PAIRED: 2}
    assert c.bytes_from_client == sum(len(x) for x in (hb.request, md.request))


def test_header_only_mode() -> None:
    s = Sim()
    play(s, session(10, seed=4))
    eng, out = run(s, bodies=False)
    assert all(e.status in (PAIRED, NO_RESPONSE_EXPECTED) for e in out)
    assert all(e.request.body is None for e in out)


def test_metadata_request_with_null_client_id() -> None:
    s = Sim()
    s.c(kreq(MetadataRequest, 1, 1, client_id=None, topics=[]))
    s.s(metadata(1).response)
    eng, out = run(s)
    assert out[0].status == PAIRED and out[0].client_id is None


def test_raw_sasl_tokens_without_handshake_kafka_09_gssapi() -> None:
    # Kafka 0.9 brokers took raw GSSAPI tokens right after connecting (no SaslHandshake)
    s = Sim()
    s.c(frame(b"\x60\x82\x02\x10\x06\x09\x2a\x86\x48\x86\xf7\x12\x01\x02\x02" + bytes(40)))
    s.s(frame(b"\x60\x81\x80\x06\x09\x2a\x86\x48\x86\xf7\x12\x01\x02\x02" + bytes(30)))
    md = metadata(7)
    s.c(md.request)
    s.s(md.response)
    eng, out = run(s)
    assert [(e.protocol, e.status) for e in out] == [("kafka-sasl", PAIRED), ("kafka", PAIRED)]
    assert out[0].request.body["data"]["mechanism"] == "GSSAPI"
    assert "not captured" in " ".join(out[0].all_problems())


def test_topic_ids_learned_from_create_topics_and_describe_topic_partitions() -> None:
    from kafka.protocol.admin import CreateTopicsResponse, DescribeTopicPartitionsResponse

    from kwsniff.kafka import protocol
    from kwsniff.kafka.topic_ids import TopicIds

    a, b = uuid.uuid4(), uuid.uuid4()
    CT = CreateTopicsResponse.CreatableTopicResult
    raw = kresp(CreateTopicsResponse, 7, 1, throttle_time_ms=0, topics=[
        CT(name="created", topic_id=a, error_code=0, error_message=None, num_partitions=1,
           replication_factor=1, configs=[])])
    DT = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
    raw2 = kresp(DescribeTopicPartitionsResponse, 0, 2, throttle_time_ms=0, topics=[
        DT(error_code=0, name="described", topic_id=b, is_internal=False, partitions=[],
           topic_authorized_operations=0)], next_cursor=None)
    ids = TopicIds()
    ids.learn(19, protocol.decode_response(raw[4:], 19, 7).body)
    ids.learn(75, protocol.decode_response(raw2[4:], 75, 0).body)
    assert ids.name_of(str(a)) == "created" and ids.name_of(str(b)) == "described"
    body = {"Topics": [{"TopicId": str(b), "Partitions": []},
                       {"TopicId": "00000000-0000-0000-0000-000000000000"}]}
    ids.annotate(1, body, "request", 13)
    assert body["Topics"][0]["_topic_name"] == "described"
    assert "_topic_name" not in body["Topics"][1]          # the zero id means "no id"
    old = {"Topics": [{"Topic": "t", "Partitions": []}]}
    ids.annotate(1, old, "request", 12)                      # no ids at this version
    assert old == {"Topics": [{"Topic": "t", "Partitions": []}]}
