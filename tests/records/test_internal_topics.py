"""Internal topics (__consumer_offsets, __transaction_state, __cluster_metadata) and KRaft
control records; record keys/values are encoded here by hand from Kafka's schema files."""

from __future__ import annotations

import struct
import uuid
import warnings

from recordbuild import raw_v2_batch, v2_record

from kwsniff.kafka import internal_topics
from kwsniff.kafka.records import Records

warnings.filterwarnings("ignore", category=DeprecationWarning)


def s16(x: str | None) -> bytes:
    return b"\xff\xff" if x is None else struct.pack(">h", len(x)) + x.encode()


def b32(x: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if x is None else struct.pack(">i", len(x)) + x


def uv(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cstr(x: str) -> bytes:
    return uv(len(x) + 1) + x.encode()


def records_of(topic: str, recs: list[bytes], attributes: int = 0) -> Records:
    rs = Records(raw_v2_batch(recs, attributes=attributes))
    rs.topic, rs.partition = topic, 0
    return rs


def test_group_metadata_with_consumer_members() -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription
    sub = bytes(ConsumerProtocolSubscription(version=0, topics=["orders"], user_data=None).encode())
    asg = bytes(ConsumerProtocolAssignment(version=0, assigned_partitions=[("orders", [0])],
                                           user_data=None).encode())
    key = struct.pack(">h", 2) + s16("grp")
    member = (s16("m-1") + s16(None) + s16("client") + s16("/10.0.0.1") + struct.pack(">ii", 300000, 45000)
              + b32(sub) + b32(asg))
    value = (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 5) + s16("range") + s16("m-1")
             + struct.pack(">q", 1700000000000) + struct.pack(">i", 1) + member)
    rs = records_of("__consumer_offsets", [v2_record(0, key, value)])
    (r,) = rs.iter_records()
    assert r.key_decoded["schema"] == "GroupMetadataKey" and r.key_decoded["data"] == {"group": "grp"}
    v = r.value_decoded
    assert v["schema"] == "GroupMetadataValue" and v["version"] == 3 and "problems" not in v
    m = v["data"]["members"][0]
    assert m["memberId"] == "m-1" and m["sessionTimeout"] == 45000
    assert m["_decoded_subscription"]["data"]["Topics"] == ["orders"]
    assert m["_decoded_assignment"]["data"]["AssignedPartitions"] == [{"Topic": "orders", "Partitions": [0]}]
    assert rs.problems == []


def test_unknown_key_version_reported() -> None:
    rs = records_of("__consumer_offsets", [v2_record(0, struct.pack(">h", 99) + b"x", b"\x00\x00")])
    (r,) = rs.iter_records()
    assert r.key_decoded["data"] is None
    assert any("unknown group coordinator record type 99" in p for p in rs.problems)


def test_transaction_log() -> None:
    key = struct.pack(">h", 0) + s16("txn-1")
    value = (struct.pack(">h", 0) + struct.pack(">qhib", 4000, 2, 60000, 1)
             + struct.pack(">i", 1) + s16("orders") + struct.pack(">ii", 1, 3)
             + struct.pack(">qq", 1700000000001, 1700000000000))
    rs = records_of("__transaction_state", [v2_record(0, key, value)])
    (r,) = rs.iter_records()
    assert r.key_decoded["data"] == {"TransactionalId": "txn-1"}
    d = r.value_decoded["data"]
    assert d["ProducerId"] == 4000 and d["TransactionStatus"] == 1
    assert d["TransactionPartitions"] == [{"Topic": "orders", "PartitionIds": [3]}]
    assert rs.problems == []


def test_cluster_metadata_records() -> None:
    tid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    topic = uv(1) + uv(2) + uv(0) + cstr("orders") + tid.bytes + uv(0)
    feature = uv(0) + uv(12) + uv(0) + cstr("metadata.version") + struct.pack(">h", 21) + uv(0)
    unknown = uv(1) + uv(250) + uv(0) + b"\x00"
    rs = records_of("__cluster_metadata", [v2_record(0, None, topic), v2_record(1, None, feature),
                                           v2_record(2, None, unknown)])
    r0, r1, r2 = rs.iter_records()
    assert r0.value_decoded == {"schema": "TopicRecord", "version": 0, "record_type": 2, "frame_version": 1,
                                "data": {"Name": "orders", "TopicId": str(tid)}}
    assert r1.value_decoded["data"] == {"Name": "metadata.version", "FeatureLevel": 21}
    assert r2.value_decoded["data"] is None
    assert len(rs.problems) == 1 and "unknown metadata record type 250" in rs.problems[0]


def test_kraft_control_records() -> None:
    voter = struct.pack(">i", 1) + uv(0)
    leader_change = struct.pack(">hi", 0, 1) + uv(2) + voter + uv(2) + voter + uv(0)
    header = struct.pack(">hq", 0, 1700000000000) + uv(0)
    footer = struct.pack(">h", 0) + uv(0)
    kraft_version = struct.pack(">hh", 0, 1) + uv(0)
    dir_id = uuid.UUID(int=7)
    voters = (struct.pack(">h", 0) + uv(2) + struct.pack(">i", 1) + dir_id.bytes
              + uv(2) + cstr("CONTROLLER") + cstr("localhost") + struct.pack(">H", 9093) + uv(0)
              + struct.pack(">hh", 0, 1) + uv(0) + uv(0) + uv(0))
    recs = [v2_record(i, struct.pack(">hh", 0, t), v)
            for i, (t, v) in enumerate([(2, leader_change), (3, header), (4, footer), (5, kraft_version),
                                        (6, voters)])]
    rs = records_of("__cluster_metadata", recs, attributes=0x20)
    out = list(rs.iter_records())
    assert [r.control["type"] for r in out] == ["LEADER_CHANGE", "SNAPSHOT_HEADER", "SNAPSHOT_FOOTER",
                                                 "KRAFT_VERSION", "KRAFT_VOTERS"]
    assert out[0].control["data"] == {"Version": 0, "LeaderId": 1, "Voters": [{"VoterId": 1}],
                                      "GrantingVoters": [{"VoterId": 1}]}
    assert out[1].control["data"]["LastContainedLogTimestamp"] == 1700000000000
    assert out[3].control["data"]["KRaftVersion"] == 1
    v = out[4].control["data"]["Voters"][0]
    assert v["VoterDirectoryId"] == str(dir_id)
    assert v["Endpoints"] == [{"Name": "CONTROLLER", "Host": "localhost", "Port": 9093}]
    assert all(r.value_decoded is None for r in out)  # control records are not metadata records
    assert rs.problems == [] and all(not r.problems for r in out)


def test_bad_kraft_control_value_reported_on_the_record() -> None:
    rs = records_of("__cluster_metadata", [v2_record(0, struct.pack(">hh", 0, 2), b"\x00\x00\x00")],
                    attributes=0x20)
    (r,) = rs.iter_records()
    assert r.control["type"] == "LEADER_CHANGE" and r.problems


def test_helpers_never_raise_on_garbage() -> None:
    for buf in (b"", b"\x00", b"\x00\x01\xff", b"\xff" * 30):
        internal_topics.decode_prefixed("OffsetCommitValue", buf)
        internal_topics.decode_versioned("LeaderChangeMessage", buf)
        internal_topics.decode_metadata_value(buf)
        internal_topics.decode_coordinator_record("group", buf, buf)
    assert internal_topics.decode_schema("NoSuchSchema", 0, b"")["problems"]
    assert internal_topics.decode_schema("OffsetCommitKey", -1, b"")["problems"]
