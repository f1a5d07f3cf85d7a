"""decode_struct for every non-API schema and version; record-type lookups."""

from __future__ import annotations

from typing import Any

import pytest

from kwsniff.kafka.protocol import (
    coordinator_record_schemas,
    decode_struct,
    metadata_record_schema,
    struct_field_info,
    struct_names,
    struct_spans,
    struct_versions,
)

protocol_wire = pytest.importorskip("protocol_wire")
if not protocol_wire.SHARED.is_dir():
    pytest.skip("../shared/kafka-protocol is not present", allow_module_level=True)


def _cases() -> list[tuple[str, int]]:
    out = []
    for name, by_origin in sorted(protocol_wire.json_structs().items()):
        versions = set()
        for s in by_origin.values():
            versions.update(range(s.valid[0], s.valid[1] + 1))
        out.extend((name, v) for v in sorted(versions))
    return out


CASES = _cases()


def test_every_non_api_schema_is_in_the_table() -> None:
    assert struct_names() == sorted(protocol_wire.json_structs())
    for name in ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment", "LeaderChangeMessage",
                 "SnapshotHeaderRecord", "SnapshotFooterRecord", "VotersRecord", "KRaftVersionRecord",
                 "DefaultPrincipalData", "OffsetCommitKey", "OffsetCommitValue",
                 "TransactionLogValue", "ShareSnapshotValue", "PartitionRecord", "RequestHeader"):
        assert name in struct_names()


@pytest.mark.parametrize("name,version", CASES)
@pytest.mark.parametrize("variant", ["full", "nulls"])
def test_struct_roundtrip(name: str, version: int, variant: str) -> None:
    schema = protocol_wire.struct_schema_for(name, version)
    flexible = protocol_wire.within(version, schema.flexible)
    maker = protocol_wire.ValueMaker(f"struct/{name}/{version}/{variant}", nulls=variant == "nulls")
    values = maker.struct(schema.fields, version)
    enc = protocol_wire.Encoder(version, flexible, maker.rng, unknown_tags=variant == "full")
    data = b"\xee" * 3 + enc.struct(schema.fields, values) + b"\xdd"
    problems: list[str] = []
    out, end = decode_struct(name, version, data, 3, problems)
    assert problems == []
    assert end == len(data) - 1
    assert _norm(out) == _norm(values)
    spans = struct_spans(name, version, data, 3)
    assert all(3 <= s.offset and s.offset + s.length <= end for s in spans)


def _norm(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _norm(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_norm(v) for v in obj]
    return obj


def test_unknown_schema_and_version() -> None:
    out, end = decode_struct("NoSuchThing", 0, b"\x00\x01", 1)
    assert end == 1 and out == {"_problems": ["unknown schema 'NoSuchThing'"]}
    out, end = decode_struct("OffsetCommitValue", 99, b"\x00")
    assert "OffsetCommitValue v99 is not a known version (kwsniff decodes v0-v4)" in out["_problems"][0]


def test_truncated_struct_reports_and_keeps_partial() -> None:
    problems: list[str] = []
    # OffsetCommitValue v1: Offset int64, Metadata string, CommitTimestamp, ExpireTimestamp
    data = (7).to_bytes(8, "big") + b"\x00\x02hi" + b"\x00\x00"
    out, end = decode_struct("OffsetCommitValue", 1, data, 0, problems)
    assert out == {"offset": 7, "metadata": "hi"}   # Kafka spells these in lower case
    assert end == 12
    assert problems and problems[0].startswith("OffsetCommitValue v1 decoded only partly")


def test_metadata_record_types() -> None:
    assert metadata_record_schema(0) == "RegisterBrokerRecord"
    assert metadata_record_schema(2) == "TopicRecord"
    assert metadata_record_schema(3) == "PartitionRecord"
    assert metadata_record_schema(27) == "RegisterControllerRecord"
    assert metadata_record_schema(999) is None
    for key in range(28):
        name = metadata_record_schema(key)
        if name is not None:
            assert struct_versions(name) is not None


def test_coordinator_record_types() -> None:
    assert coordinator_record_schemas("group", 0) == ("OffsetCommitKey", "OffsetCommitValue")
    assert coordinator_record_schemas("group", 1) == ("OffsetCommitKey", "OffsetCommitValue")
    assert coordinator_record_schemas("group", 2) == ("GroupMetadataKey", "GroupMetadataValue")
    assert coordinator_record_schemas("group", 3) == ("ConsumerGroupMetadataKey",
                                                      "ConsumerGroupMetadataValue")
    assert coordinator_record_schemas("group", 15) == ("ShareGroupStatePartitionMetadataKey",
                                                       "ShareGroupStatePartitionMetadataValue")
    assert coordinator_record_schemas("transaction", 0) == ("TransactionLogKey", "TransactionLogValue")
    assert coordinator_record_schemas("share", 0) == ("ShareSnapshotKey", "ShareSnapshotValue")
    assert coordinator_record_schemas("share", 1) == ("ShareUpdateKey", "ShareUpdateValue")
    assert coordinator_record_schemas("group", 99) is None
    assert coordinator_record_schemas("nope", 0) is None


def test_struct_field_info() -> None:
    info = struct_field_info("ConsumerProtocolSubscription", 3, ("RackId",))
    assert info is not None and info.type == "string" and info.nullable and info.default == "null"
    assert struct_field_info("ConsumerProtocolSubscription", 0, ("RackId",)) is None
    info = struct_field_info("ConsumerProtocolSubscription", 1, ("OwnedPartitions", 0, "Partitions"))
    assert info is not None and info.type == "[]int32" and info.is_array
