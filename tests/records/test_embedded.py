"""Embedded protocols (consumer protocol, SASL, records tagging) on messages encoded by
kafka-python and decoded by kwsniff's protocol decoder."""

from __future__ import annotations

import struct
import warnings

import pytest

warnings.filterwarnings("ignore", category=DeprecationWarning)

from kafka.protocol.consumer.group import (  # noqa: E402
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.consumer.metadata import (  # noqa: E402
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest  # noqa: E402
from recordbuild import v2_batch  # noqa: E402

from kwsniff.kafka.embedded import (  # noqa: E402
    AnnotateContext,
    annotate,
    decode_assignment,
    decode_raw_sasl_token,
    decode_subscription,
)
from kwsniff.kafka.model import KafkaMessage  # noqa: E402
from kwsniff.kafka.protocol import decode_request, decode_response  # noqa: E402
from kwsniff.kafka.records import Records  # noqa: E402


def _req(msg) -> KafkaMessage:
    msg.with_header(correlation_id=11, client_id="test-client")
    out = decode_request(bytes(msg.encode(header=True)))
    assert out.body is not None and not out.problems, out.problems
    return out


def _resp(msg, api_key: int, version: int) -> KafkaMessage:
    msg.with_header(correlation_id=11)
    out = decode_response(bytes(msg.encode(header=True)), api_key, version)
    assert out.body is not None and not out.problems, out.problems
    return out


def subscription(version: int) -> bytes:
    kw: dict = {"topics": ["orders", "payments"], "user_data": b"\x01\x02"}
    if version >= 1:
        kw["owned_partitions"] = [("orders", [0, 2])]
    if version >= 2:
        kw["generation_id"] = 9
    if version >= 3:
        kw["rack_id"] = "rack-a"
    return bytes(ConsumerProtocolSubscription(version=version, **kw).encode())


def assignment(version: int) -> bytes:
    return bytes(ConsumerProtocolAssignment(version=version, assigned_partitions=[("orders", [1, 3])],
                                            user_data=None).encode())


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_all_versions(version: int) -> None:
    d = decode_subscription(subscription(version))
    assert d["schema"] == "ConsumerProtocolSubscription" and d["version"] == version
    assert "problems" not in d
    data = d["data"]
    assert data["Topics"] == ["orders", "payments"] and data["UserData"] == b"\x01\x02"
    if version >= 1:
        assert data["OwnedPartitions"] == [{"Topic": "orders", "Partitions": [0, 2]}]
    if version >= 2:
        assert data["GenerationId"] == 9
    if version >= 3:
        assert data["RackId"] == "rack-a"


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_all_versions(version: int) -> None:
    d = decode_assignment(assignment(version))
    assert d["version"] == version and "problems" not in d
    assert d["data"]["AssignedPartitions"] == [{"Topic": "orders", "Partitions": [1, 3]}]


def test_newer_subscription_version_decoded_with_newest_known() -> None:
    raw = b"\x00\x07" + subscription(3)[2:] + b"future-field"
    d = decode_subscription(raw)
    assert d["version"] == 7 and d["decoded_as"] == 3 and d["data"]["RackId"] == "rack-a"


def test_garbage_subscription_reports_problems() -> None:
    d = decode_subscription(b"\x00\x00\x7f\xff\xff\xff")
    assert d["problems"]
    assert decode_subscription(b"\x00")["problems"]


@pytest.mark.parametrize("version", [0, 5, 6, 9])
def test_join_group_request_metadata_decoded_in_place(version: int) -> None:
    proto = JoinGroupRequest.JoinGroupRequestProtocol
    req = JoinGroupRequest(version=version, group_id="g1", session_timeout_ms=10000, rebalance_timeout_ms=30000,
                           member_id="", group_instance_id=None, protocol_type="consumer",
                           protocols=[proto(name="range", metadata=subscription(1)),
                                      proto(name="cooperative-sticky", metadata=subscription(3))])
    msg = _req(req)
    annotate(msg)
    protos = msg.body["Protocols"]
    assert isinstance(protos[0]["Metadata"], bytes)
    assert protos[0]["_decoded_Metadata"]["version"] == 1
    assert protos[1]["_decoded_Metadata"]["data"]["RackId"] == "rack-a"
    assert msg.problems == []


def test_join_group_other_protocol_type_left_alone() -> None:
    proto = JoinGroupRequest.JoinGroupRequestProtocol
    req = JoinGroupRequest(version=5, group_id="g1", session_timeout_ms=10000, rebalance_timeout_ms=30000,
                           member_id="", group_instance_id=None, protocol_type="connect",
                           protocols=[proto(name="sessioned", metadata=subscription(0))])
    msg = _req(req)
    annotate(msg)
    assert "_decoded_Metadata" not in msg.body["Protocols"][0]


def test_join_group_response_members_decoded_via_request_or_assignor_name() -> None:
    member = JoinGroupResponse.JoinGroupResponseMember
    resp = JoinGroupResponse(version=5, throttle_time_ms=0, error_code=0, generation_id=3, protocol_name="range",
                             leader="m1", member_id="m1",
                             members=[member(member_id="m1", group_instance_id=None, metadata=subscription(2))])
    msg = _resp(resp, 11, 5)
    annotate(msg)  # no ProtocolType in v5 responses: "range" is a consumer assignor
    assert msg.body["Members"][0]["_decoded_Metadata"]["data"]["GenerationId"] == 9


def test_sync_group_request_and_response() -> None:
    a = SyncGroupRequest.SyncGroupRequestAssignment
    req = SyncGroupRequest(version=5, group_id="g1", generation_id=3, member_id="m1", group_instance_id=None,
                           protocol_type="consumer", protocol_name="range",
                           assignments=[a(member_id="m1", assignment=assignment(0)),
                                        a(member_id="m2", assignment=assignment(3))])
    msg = _req(req)
    annotate(msg)
    assert [x["_decoded_Assignment"]["version"] for x in msg.body["Assignments"]] == [0, 3]
    resp = SyncGroupResponse(version=3, throttle_time_ms=0, error_code=0, assignment=assignment(1))
    rmsg = _resp(resp, 14, 3)
    annotate(rmsg, request=msg)
    assert rmsg.body["_decoded_Assignment"]["data"]["AssignedPartitions"][0]["Topic"] == "orders"


def test_describe_groups_members() -> None:
    body = {"Groups": [{"ErrorCode": 0, "GroupId": "g", "GroupState": "Stable", "ProtocolType": "consumer",
                        "ProtocolData": "range",
                        "Members": [{"MemberId": "m1", "ClientId": "c", "ClientHost": "/1.2.3.4",
                                     "MemberMetadata": subscription(0), "MemberAssignment": assignment(0)}]},
                       {"ProtocolType": "connect", "Members": [{"MemberMetadata": subscription(0)}]}]}
    msg = KafkaMessage(kind="response", raw=b"", api_key=15, api_version=1, body=body)
    annotate(msg)
    m = body["Groups"][0]["Members"][0]
    assert m["_decoded_MemberMetadata"]["data"]["Topics"] == ["orders", "payments"]
    assert m["_decoded_MemberAssignment"]["data"]["AssignedPartitions"][0]["Partitions"] == [1, 3]
    assert "_decoded_MemberMetadata" not in body["Groups"][1]["Members"][0]


def test_unexpected_body_shapes_never_raise() -> None:
    for key, kind in ((11, "request"), (11, "response"), (14, "request"), (14, "response"), (15, "response"),
                      (36, "request"), (0, "request"), (1, "response"), (3, "response"), (59, "response")):
        for body in ({}, {"Protocols": [None]}, {"Groups": "x"}, {"AuthBytes": 5}, {"TopicData": [{}]},
                     {"Responses": [{"Partitions": [{"Records": b"x"}]}]}):
            msg = KafkaMessage(kind=kind, raw=b"", api_key=key, api_version=0, body=body)
            annotate(msg)


# -- SASL --------------------------------------------------------------------------------

def _sasl_auth(token: bytes, kind: str = "request") -> KafkaMessage:
    if kind == "request":
        return _req(SaslAuthenticateRequest(version=1, auth_bytes=token))
    return _resp(SaslAuthenticateResponse(version=1, error_code=0, error_message=None, auth_bytes=token,
                                          session_lifetime_ms=0), 36, 1)


def test_sasl_plain_redacted_in_body_and_decoded() -> None:
    from kafka.net.sasl.plain import SaslMechanismPlain
    token = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="hunter2",
                               security_protocol="SASL_SSL").auth_bytes()
    ctx = AnnotateContext()
    annotate(_req(SaslHandshakeRequest(version=1, mechanism="PLAIN")), context=ctx, connection=1)
    msg = _sasl_auth(token)
    annotate(msg, context=ctx, connection=1)
    dec = msg.body["_decoded_AuthBytes"]
    assert dec["schema"] == "SASL PLAIN"
    assert dec["data"]["username"] == "alice" and dec["data"]["password"] == "<redacted>"
    assert b"hunter2" not in msg.body["AuthBytes"] and msg.body["_redacted_AuthBytes"] is True
    assert "hunter2" not in repr(msg.body)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_sasl_secret_masked_in_the_frame_too(version: int) -> None:
    """Hex views show ``msg.raw``: the password is masked there as in the body, at the
    AuthBytes field's place, every other byte unchanged (kafka-python's v2 client-final
    message, with its compact length prefix, showed the SCRAM proof in ``decode -x``)."""
    token = b"\x00alice\x00hunter2-pw"
    msg = _req(SaslAuthenticateRequest(version=version, auth_bytes=token))
    before = bytes(msg.raw)
    annotate(msg, context=AnnotateContext(), connection=1)
    at = before.index(token)
    assert bytes(msg.raw) == before[:at] + b"\x00alice\x00" + b"*" * 10 + before[at + len(token):]


def test_sasl_frame_masked_without_byte_ranges() -> None:
    """Without the field's byte range (no header version here) the token's bytes are
    masked wherever they occur in the frame."""
    token = b"\x00alice\x00hunter2-pw"
    frame = b"\x00\x24\x00\x01" + struct.pack(">i", len(token)) + token
    msg = KafkaMessage(kind="request", raw=frame, api_key=36, api_version=1,
                       body={"AuthBytes": token})
    annotate(msg, context=AnnotateContext(), connection=1)
    assert b"hunter2" not in msg.raw and len(msg.raw) == len(frame)


def test_sasl_show_secrets() -> None:
    token = b"\x00alice\x00hunter2"
    msg = _sasl_auth(token)
    annotate(msg, context=AnnotateContext(show_secrets=True))
    assert msg.body["_decoded_AuthBytes"]["data"]["password"] == "hunter2"
    assert msg.body["AuthBytes"] == token and "_redacted_AuthBytes" not in msg.body


def test_sasl_scram_exchange_from_kafka_python_client() -> None:
    from kafka.net.sasl.scram import ScramClient
    client = ScramClient("bob", "s3cr3t-pw", "SCRAM-SHA-512")
    first = client.first_message()
    server_first = b"r=" + client.nonce + b"srvnonce,s=" + b"c2FsdHNhbHQ=" + b",i=4096"
    client.process_server_first_message(server_first)
    final = client.final_message()
    ctx = AnnotateContext()
    annotate(_req(SaslHandshakeRequest(version=1, mechanism="SCRAM-SHA-512")), context=ctx, connection="c")
    out = []
    for token, kind in ((first, "request"), (server_first, "response"), (final, "request"),
                        (b"v=" + b"c2lnbmF0dXJl", "response")):
        msg = _sasl_auth(token, kind)
        annotate(msg, context=ctx, connection="c")
        out.append(msg)
    d = [m.body["_decoded_AuthBytes"]["data"] for m in out]
    assert [x["mechanism"] for x in d] == ["SCRAM-SHA-512"] * 4
    assert [x["message"] for x in d] == ["client-first", "server-first", "client-final", "server-final"]
    assert d[0]["username"] == "bob" and d[1]["iterations"] == 4096
    assert d[2]["proof"] == "<redacted>" and d[3]["server_signature"] == "<redacted>"
    proof = final.split(b"p=")[1]
    assert proof not in out[2].body["AuthBytes"]


def test_sasl_oauthbearer_token_redacted_claims_kept() -> None:
    import base64
    import json

    def b64(o) -> str:
        return base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()

    jwt = f"{b64({'alg': 'RS256'})}.{b64({'sub': 'svc', 'exp': 1900000000})}.c2lnbmF0dXJl"
    token = f"n,,\x01auth=Bearer {jwt}\x01logicalCluster=lkc-1\x01\x01".encode()
    msg = _sasl_auth(token)
    annotate(msg)
    d = msg.body["_decoded_AuthBytes"]["data"]
    assert d["mechanism"] == "OAUTHBEARER" and d["token"] == "<redacted>"
    assert d["token_claims"] == {"sub": "svc", "exp": 1900000000}
    assert d["extensions"] == {"logicalCluster": "lkc-1"}
    assert jwt.encode() not in msg.body["AuthBytes"]


def test_raw_sasl_token_after_handshake_v0() -> None:
    d = decode_raw_sasl_token(b"\x00u\x00p", "PLAIN", from_client=True)
    assert d["schema"] == "SASL PLAIN" and d["data"]["password"] == "<redacted>"
    assert d["data"]["secret_spans"] == [[3, 4]]


# -- records tagging ------------------------------------------------------------------------

def test_produce_and_fetch_records_tagged_with_topic_and_partition() -> None:
    r1, r2 = Records(v2_batch(0, n=1)), Records(v2_batch(0, n=1))
    produce = KafkaMessage(kind="request", raw=b"", api_key=0, api_version=9, body={
        "TopicData": [{"Name": "orders", "PartitionData": [{"Index": 4, "Records": r1}]}]})
    annotate(produce)
    assert (r1.topic, r1.partition) == ("orders", 4)
    ctx = AnnotateContext()
    tid = "0d3c8b2a-1111-2222-3333-444455556666"
    meta = KafkaMessage(kind="response", raw=b"", api_key=3, api_version=12,
                        body={"Topics": [{"Name": "payments", "TopicId": tid}]})
    annotate(meta, context=ctx)
    fetch = KafkaMessage(kind="response", raw=b"", api_key=1, api_version=13, body={
        "Responses": [{"TopicId": tid, "Partitions": [{"PartitionIndex": 2, "Records": r2}]}]})
    annotate(fetch, context=ctx)
    assert (r2.topic, r2.partition) == ("payments", 2)


def test_offset_commit_records_in_a_fetch_of_consumer_offsets() -> None:
    from recordbuild import raw_v2_batch, v2_record

    def s(x: str) -> bytes:
        return struct.pack(">h", len(x)) + x.encode()

    key = struct.pack(">h", 1) + s("grp") + s("orders") + struct.pack(">i", 3)
    value = struct.pack(">h", 3) + struct.pack(">qi", 1234, 5) + s("meta") + struct.pack(">q", 1700000000000)
    recs = Records(raw_v2_batch([v2_record(0, key, value), v2_record(1, key, None)]))
    fetch = KafkaMessage(kind="response", raw=b"", api_key=1, api_version=11, body={
        "Responses": [{"Topic": "__consumer_offsets", "Partitions": [{"PartitionIndex": 7, "Records": recs}]}]})
    annotate(fetch)
    r0, r1 = list(recs.iter_records())
    assert r0.key_decoded == {"schema": "OffsetCommitKey", "version": 1,
                              "data": {"group": "grp", "topic": "orders", "partition": 3}}
    assert r0.value_decoded["schema"] == "OffsetCommitValue"
    assert r0.value_decoded["data"] == {"offset": 1234, "leaderEpoch": 5, "metadata": "meta",
                                        "commitTimestamp": 1700000000000}
    assert r1.value is None and r1.value_decoded is None  # tombstone
    assert recs.problems == []
