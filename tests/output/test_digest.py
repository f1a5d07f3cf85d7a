"""Per-API digests on messages encoded by kafka-python and decoded by kwsniff."""

from __future__ import annotations

from kafka.protocol.admin.topics import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse,
                                 SaslHandshakeRequest)
from kafka.protocol.producer.transaction import (
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
)

from builders import build, exchange, record_batch, request, response
from kwsniff.kafka.model import NO_RESPONSE_EXPECTED, UNANSWERED
from kwsniff.output.digest import digest, human_bytes, ranges, register_digest, topic_partitions
from kwsniff.output.facts import ExchangeFacts


def _pair(req_cls, resp_cls, version, req_body, resp_body):
    req = request(build(req_cls, version, req_body))
    resp = response(build(resp_cls, version, resp_body), req) if resp_body is not None else None
    return exchange(req, resp)


def _produce(acks=-1):
    parts = [{"Index": i, "Records": record_batch([b"v%d" % j for j in range(40)])}
             for i in range(3)]
    return {"TransactionalId": None, "Acks": acks, "TimeoutMs": 30000,
            "TopicData": [{"Name": "orders", "PartitionData": parts}]}


def test_helpers():
    assert ranges([2, 0, 1, 5, 7, 8]) == "0..2,5,7,8"
    assert ranges([]) == ""
    assert topic_partitions([("a", [0, 1]), ("b", []), ("a", [2])]) == "a[0..2] b"
    assert human_bytes(512) == "512 B"
    assert human_bytes(48 * 1024 + 200) == "48.2 KiB"


def test_produce():
    parts = [{"Index": i, "ErrorCode": 6 if i == 2 else 0, "BaseOffset": 100 * i,
              "LogAppendTimeMs": -1, "LogStartOffset": 0} for i in range(3)]
    ex = _pair(ProduceRequest, ProduceResponse, 9, _produce(),
               {"Responses": [{"Name": "orders", "PartitionResponses": parts}],
                "ThrottleTimeMs": 0})
    text = digest(ex)
    assert text.startswith("orders[0..2] 3 batches 120 records ")
    assert "acks=-1 → 2 ok, 1 NOT_LEADER_OR_FOLLOWER" in text


def test_produce_acks0_and_unanswered():
    req = request(build(ProduceRequest, 7, _produce(acks=0)))
    assert digest(exchange(req, None, status=NO_RESPONSE_EXPECTED)).endswith(
        "acks=0 (no response expected)")
    req = request(build(ProduceRequest, 7, _produce()))
    assert digest(exchange(req, None, status=UNANSWERED)).endswith("→ no response")


def test_fetch():
    ex = _pair(FetchRequest, FetchResponse, 12,
               {"ReplicaId": -1, "MaxWaitMs": 500, "MinBytes": 1, "MaxBytes": 1 << 20,
                "SessionId": 0, "SessionEpoch": -1,
                "Topics": [{"Topic": "orders", "Partitions": [{"Partition": 0,
                                                                "FetchOffset": 1200}]}]},
               {"ThrottleTimeMs": 0, "ErrorCode": 0, "SessionId": 0,
                "Responses": [{"Topic": "orders", "Partitions": [
                    {"PartitionIndex": 0, "ErrorCode": 0, "HighWatermark": 1700,
                     "Records": record_batch([b"x"] * 500)}]}]})
    text = digest(ex)
    assert text.startswith("orders[0] offset 1200 wait 500 ms → 500 records ")
    assert text.endswith(", hw 1700")


def test_list_offsets():
    ex = _pair(ListOffsetsRequest, ListOffsetsResponse, 7,
               {"ReplicaId": -1, "IsolationLevel": 0,
                "Topics": [{"Name": "orders", "Partitions": [{"PartitionIndex": 1,
                                                              "Timestamp": -1}]}]},
               {"ThrottleTimeMs": 0, "Topics": [{"Name": "orders", "Partitions": [
                   {"PartitionIndex": 1, "ErrorCode": 0, "Timestamp": -1, "Offset": 4242,
                    "LeaderEpoch": 0}]}]})
    assert digest(ex) == "orders[1] latest → offset 4242"


def test_metadata():
    ex = _pair(MetadataRequest, MetadataResponse, 12,
               {"Topics": [{"Name": "orders"}], "AllowAutoTopicCreation": False,
                "IncludeTopicAuthorizedOperations": False},
               {"ThrottleTimeMs": 0, "Brokers": [{"NodeId": 1, "Host": "b1", "Port": 9092}],
                "ClusterId": "c", "ControllerId": 1,
                "Topics": [{"ErrorCode": 0, "Name": "orders", "IsInternal": False,
                            "Partitions": [{"ErrorCode": 0, "PartitionIndex": i, "LeaderId": 1,
                                            "LeaderEpoch": 0, "ReplicaNodes": [1],
                                            "IsrNodes": [1], "OfflineReplicas": []}
                                           for i in range(3)]}]})
    assert digest(ex) == "topics orders → 1 broker, 1 topic, 3 partitions, controller 1"
    all_topics = _pair(MetadataRequest, MetadataResponse, 12, {"Topics": None}, None)
    assert digest(all_topics).startswith("all topics")


def test_group_apis():
    join = _pair(JoinGroupRequest, JoinGroupResponse, 5,
                 {"GroupId": "billing", "SessionTimeoutMs": 10000, "RebalanceTimeoutMs": 30000,
                  "MemberId": "", "ProtocolType": "consumer",
                  "Protocols": [{"Name": "range", "Metadata": b"\x00\x00\x00\x00\x00\x00"}]},
                 {"ThrottleTimeMs": 0, "ErrorCode": 0, "GenerationId": 7, "ProtocolName": "range",
                  "Leader": "consumer-1-abc", "MemberId": "consumer-1-abc", "Members": []})
    assert digest(join) == ("group=billing member=(new) consumer [range] → leader, generation 7, "
                            "protocol range")
    sync = _pair(SyncGroupRequest, SyncGroupResponse, 3,
                 {"GroupId": "billing", "GenerationId": 7, "MemberId": "consumer-1-abc",
                  "Assignments": []},
                 {"ThrottleTimeMs": 0, "ErrorCode": 27, "Assignment": b""})
    assert digest(sync) == ("group=billing gen 7 member=consumer-1-… → REBALANCE_IN_PROGRESS")
    hb = _pair(HeartbeatRequest, HeartbeatResponse, 4,
               {"GroupId": "billing", "GenerationId": 7, "MemberId": "m"},
               {"ThrottleTimeMs": 0, "ErrorCode": 0})
    assert digest(hb) == "group=billing gen 7 member=m → ok"
    commit = _pair(OffsetCommitRequest, OffsetCommitResponse, 8,
                   {"GroupId": "billing", "GenerationIdOrMemberEpoch": 7, "MemberId": "m",
                    "Topics": [{"Name": "orders", "Partitions": [
                        {"PartitionIndex": 0, "CommittedOffset": 1200}]}]},
                   {"ThrottleTimeMs": 0, "Topics": [{"Name": "orders", "Partitions": [
                       {"PartitionIndex": 0, "ErrorCode": 0}]}]})
    assert digest(commit) == "group=billing gen 7 orders[0] offset 1200 → 1 ok"


def test_coordinator_versions_and_txn():
    fc = _pair(FindCoordinatorRequest, FindCoordinatorResponse, 4,
               {"KeyType": 0, "CoordinatorKeys": ["billing"]},
               {"ThrottleTimeMs": 0, "Coordinators": [
                   {"Key": "billing", "NodeId": 2, "Host": "b2", "Port": 9093, "ErrorCode": 0}]})
    assert digest(fc) == "group billing → node 2 b2:9093"
    assert ExchangeFacts(fc).groups == ["billing"]
    av = _pair(ApiVersionsRequest, ApiVersionsResponse, 3,
               {"ClientSoftwareName": "kwsniff-test", "ClientSoftwareVersion": "1.0"},
               {"ErrorCode": 0, "ApiKeys": [{"ApiKey": 0, "MinVersion": 0, "MaxVersion": 11},
                                            {"ApiKey": 1, "MinVersion": 0, "MaxVersion": 17}],
                "ThrottleTimeMs": 0})
    assert digest(av) == "client kwsniff-test 1.0 → 2 APIs"
    init = _pair(InitProducerIdRequest, InitProducerIdResponse, 4,
                 {"TransactionalId": "tx-1", "TransactionTimeoutMs": 60000, "ProducerId": -1,
                  "ProducerEpoch": -1},
                 {"ThrottleTimeMs": 0, "ErrorCode": 0, "ProducerId": 1000, "ProducerEpoch": 0})
    assert digest(init) == "txn=tx-1 timeout 60000 ms → producer id 1000 epoch 0"
    end = _pair(EndTxnRequest, EndTxnResponse, 3,
                {"TransactionalId": "tx-1", "ProducerId": 1000, "ProducerEpoch": 0,
                 "Committed": True},
                {"ThrottleTimeMs": 0, "ErrorCode": 0})
    assert digest(end) == "txn=tx-1 pid 1000/0 commit → ok"


def test_create_topics_errors():
    ex = _pair(CreateTopicsRequest, CreateTopicsResponse, 5,
               {"Topics": [{"Name": "a", "NumPartitions": 3, "ReplicationFactor": 1,
                            "Assignments": [], "Configs": []}], "timeoutMs": 1000,
                "validateOnly": False},
               {"ThrottleTimeMs": 0, "Topics": [{"Name": "a", "ErrorCode": 36,
                                                 "ErrorMessage": "exists", "NumPartitions": -1,
                                                 "ReplicationFactor": -1, "Configs": None}]})
    assert digest(ex) == "a (3 partitions, rf 1) → a: TOPIC_ALREADY_EXISTS"


def test_generic_digest_and_plugin_override():
    # DescribeConfigs has a built-in digest; replace it for this test and restore.
    from kwsniff.output import digest as mod
    saved = mod._REQUEST.get(3), mod._RESPONSE.get(3)
    try:
        register_digest(3, request=lambda b, v, f: "custom", response=lambda b, v, f, r: "done")
        ex = _pair(MetadataRequest, MetadataResponse, 12, {"Topics": None}, None)
        assert digest(ex) == "custom"
    finally:
        mod._REQUEST[3], mod._RESPONSE[3] = saved


def test_broken_digest_falls_back_to_generic():
    from kwsniff.output import digest as mod
    saved = mod._REQUEST[0]
    try:
        def boom(b, v, f):
            raise KeyError("x")
        mod._REQUEST[0] = boom
        req = request(build(ProduceRequest, 9, _produce()))
        assert digest(exchange(req, None, status=UNANSWERED)) == \
            "orders [0..2] 120 records → no response"
    finally:
        mod._REQUEST[0] = saved


def test_sasl_authenticate_says_what_the_token_says():
    request(build(SaslHandshakeRequest, 1, {"Mechanism": "OAUTHBEARER"}))   # the mechanism
    ex = _pair(SaslAuthenticateRequest, SaslAuthenticateResponse, 2,
               {"AuthBytes": b"n,a=svc,\x01auth=Bearer abc.def.ghi\x01\x01"},
               {"ErrorCode": 58, "ErrorMessage": "bad token",
                "AuthBytes": b'{"status":"invalid_token"}', "SessionLifetimeMs": 0})
    text = digest(ex)
    assert "OAUTHBEARER initial-response user svc 34 B token → SASL_AUTHENTICATION_FAILED" in text
    assert text.endswith("SASL error invalid_token")
    assert "abc.def" not in text
