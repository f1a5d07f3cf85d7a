"""Names for API keys, error codes and enums; field metadata for the tree view."""

from __future__ import annotations

from kwsniff.kafka.protocol import (
    ENUMS,
    ERRORS,
    api_key_by_name,
    api_name,
    enum_label,
    error_description,
    error_name,
    field_info,
    fields_at,
    flexible_from,
    version_range,
)
from kwsniff.kafka.protocol.error_codes import is_error_field


def test_error_table_is_complete_and_contiguous() -> None:
    assert sorted(ERRORS) == list(range(-1, 134))
    assert len({name for name, _ in ERRORS.values()}) == len(ERRORS)
    assert error_name(-1) == "UNKNOWN_SERVER_ERROR"
    assert error_name(0) == "NONE"
    assert error_name(6) == "NOT_LEADER_OR_FOLLOWER"
    assert error_name(35) == "UNSUPPORTED_VERSION"
    assert error_name(100) == "UNKNOWN_TOPIC_ID"
    assert error_name(133) == "SHARE_SESSION_LIMIT_REACHED"
    assert error_name(134) == "UNKNOWN_CODE_134"
    assert error_name(None) == "NONE"
    assert "not in Kafka's table" in error_description(-77)
    assert is_error_field("ErrorCode") and is_error_field("TopLevelErrorCode")
    assert not is_error_field("ErrorMessage")


def test_error_names_agree_with_kafka_python() -> None:
    import inspect

    import kafka.errors as ke

    aliases = {"NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER", "UNKNOWN": "UNKNOWN_SERVER_ERROR",
               "MESSAGE_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE", "NO_ERROR": "NONE",
               "INVALID_TOPIC": "INVALID_TOPIC_EXCEPTION",
               "INVALID_REPLICATION_ASSIGNMENT": "INVALID_REPLICA_ASSIGNMENT"}
    checked = 0
    for _, cls in inspect.getmembers(ke, inspect.isclass):
        code = getattr(cls, "errno", None)
        if issubclass(cls, ke.BrokerResponseError) and isinstance(code, int):
            assert error_name(code) == aliases.get(cls.message, cls.message), code
            checked += 1
    assert checked > 120


def test_api_names() -> None:
    assert api_name(0) == "Produce"
    assert api_name(18) == "ApiVersions"
    assert api_name(74) == "ListConfigResources"
    assert api_name(88) == "StreamsGroupHeartbeat"
    assert api_name(92) == "DeleteShareGroupOffsets"
    assert api_name(93) == "Unknown(93)"
    assert api_name(None) == "Unknown(None)"
    assert api_key_by_name("fetch") == 1 and api_key_by_name("nope") is None
    assert all(not api_name(k).startswith("Unknown") for k in range(93))


def test_enums() -> None:
    assert enum_label("AclResourceType", 2) == "TOPIC"
    assert enum_label("AclOperation", 4) == "WRITE"
    assert enum_label("IsolationLevel", 1) == "READ_COMMITTED"
    assert enum_label("ConfigResourceType", 4) == "BROKER"
    assert enum_label("CoordinatorType", 1) == "TRANSACTION"
    assert enum_label("ListOffsetsTimestamp", -2) == "EARLIEST"
    assert enum_label("ListOffsetsTimestamp", 1700000000000) is None
    assert enum_label("NoSuchEnum", 1) is None and enum_label(None, 1) is None
    assert enum_label("AclOperation", [1, 2]) is None
    assert all(isinstance(v, str) for table in ENUMS.values() for v in table.values())


def test_field_metadata_for_the_tree_view() -> None:
    info = field_info(0, "request", 9, ("TopicData", 0, "PartitionData", 1, "Records"))
    assert info is not None
    assert info.type == "records" and info.nullable and info.tag is None
    assert info.about == "The record data to be produced."
    tid = field_info(0, "request", 3, ("TransactionalId",))
    assert tid is not None and tid.default == "null" and tid.entity == "transactionalId"
    assert field_info(0, "request", 2, ("TransactionalId",)) is None
    cluster = field_info(1, "request", 12, ("ClusterId",))
    assert cluster is not None and cluster.tag == 0 and cluster.nullable
    assert field_info(1, "request", 4, ("IsolationLevel",)).enum == "IsolationLevel"
    assert field_info(29, "request", 1, ("ResourceTypeFilter",)).enum == "AclResourceType"
    assert field_info(32, "request", 4, ("Resources", 0, "ResourceType")).enum == "ConfigResourceType"
    assert field_info(10, "request", 4, ("KeyType",)).enum == "CoordinatorType"
    assert field_info(999, "request", 0, ("X",)) is None
    names = [f.name for f in fields_at(3, "request", 12)]
    assert names == ["Topics", "AllowAutoTopicCreation", "IncludeTopicAuthorizedOperations"]


def test_franz_go_versions_keep_kafka_names() -> None:
    # ConsumerGroupHeartbeat v1 only exists in franz-go's definitions
    assert [f.name for f in fields_at(68, "request", 1)][:3] == ["GroupId", "MemberId", "MemberEpoch"]
    assert field_info(68, "response", 1, ("Assignment", "TopicPartitions", 0, "TopicId")) is not None
    # keys 88-92: names from Kafka's message definitions of those APIs
    assert [f.name for f in fields_at(88, "request", 0)][:2] == ["GroupId", "MemberId"]
    assert field_info(91, "response", 0, ("Responses", 0, "Partitions", 0, "PartitionIndex"))
    assert field_info(89, "response", 0, ("ThrottleTimeMs",)) is not None
    # ShareFetch response: franz-go says bytes, Kafka says records
    rec = field_info(78, "response", 1, ("Responses", 0, "Partitions", 0, "Records"))
    assert rec is not None and rec.type == "records"


def test_coverage_numbers() -> None:
    assert version_range(0) == (0, 13) and version_range(1) == (0, 18)
    assert version_range(4) == (0, 7) and version_range(92) == (0, 0)
    assert flexible_from(0) == 9 and flexible_from(17) is None
    total = sum(version_range(k)[1] - version_range(k)[0] + 1 for k in range(93))
    assert total == 360
