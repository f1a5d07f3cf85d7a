"""Read access to the generated schema table (``schema_table.py``).

Contract:

* :func:`message_schema` finds the segment that defines one (api key, kind, version);
  :func:`struct_schema` does the same for headers and non-API schemas.
* :func:`field_info` returns the metadata of one field (type, about text, nullability,
  tag, default, entity type, enum) by a path of field names, e.g.
  ``field_info(0, "request", 9, ("TopicData", "PartitionData", "Records"))``; array
  indexes in the path are ignored, so a path from :func:`field_spans` works as is.
* Field tuples are the raw table rows; the ``F_*`` constants index them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kwsniff.kafka.protocol.schema_table import (
    API_NAMES,
    COORDINATOR_RECORDS,
    MESSAGES,
    METADATA_RECORDS,
    STRUCTS,
)

REQUEST = "request"
RESPONSE = "response"

# indexes into a field row
F_NAME, F_TYPE, F_VERSIONS, F_NULLABLE, F_TAG, F_TAGGED, F_FLEX = 0, 1, 2, 3, 4, 5, 6
F_DEFAULT, F_ENTITY, F_ENUM, F_ABOUT, F_CHILDREN = 7, 8, 9, 10, 11

OPEN_END = 32767

Segment = tuple  # (lo, hi, flexible_range, source, fields)
FieldRow = tuple


class FieldInfo(NamedTuple):
    """What the table says about one field at one version."""

    name: str
    type: str            # Kafka type string, e.g. "int32", "[]string", "[]TopicData", "records"
    about: str
    nullable: bool       # nullable at this version
    tag: int | None      # tag number when the field is a tagged field at this version
    default: str | None  # Kafka's default, as written in the definitions ("-1", "null", ...)
    entity: str | None   # Kafka's entityType (topicName, groupId, brokerId, ...)
    enum: str | None     # name of an enum in kwsniff.kafka.protocol.enums, if enum-like
    versions: tuple[int, int]
    is_array: bool
    is_struct: bool      # struct or array of structs


def in_range(v: int, r: tuple[int, int] | None) -> bool:
    return r is not None and r[0] <= v <= r[1]


def _find(segments: tuple, version: int) -> Segment | None:
    for seg in segments:
        if seg[0] <= version <= seg[1]:
            return seg
    return None


def message_schema(api_key: int, kind: str, version: int) -> Segment | None:
    """The table segment defining this message version, or None if unknown."""
    entry = MESSAGES.get((api_key, kind))
    if entry is None:
        return None
    return _find(entry[1], version)


def struct_schema(name: str, version: int) -> Segment | None:
    entry = STRUCTS.get(name)
    if entry is None:
        return None
    return _find(entry[1], version)


def version_range(api_key: int, kind: str = REQUEST) -> tuple[int, int] | None:
    """(lowest, highest) version kwsniff decodes for this API key, or None."""
    entry = MESSAGES.get((api_key, kind))
    if entry is None:
        return None
    segs = entry[1]
    return (segs[0][0], segs[-1][1])


def flexible_from(api_key: int, kind: str = REQUEST) -> int | None:
    """First flexible version of the API (per the newest segment), or None if never."""
    entry = MESSAGES.get((api_key, kind))
    if entry is None:
        return None
    lo, hi = entry[1][-1][2]
    return lo if lo <= hi else None


def is_flexible(api_key: int, version: int, kind: str = REQUEST) -> bool | None:
    """Whether this version uses the flexible encoding; None when the API key is unknown.

    Versions above the newest known one are flexible when the API's flexible range is
    open-ended (it always is for Kafka), so headers of future versions still parse.
    """
    entry = MESSAGES.get((api_key, kind))
    if entry is None:
        return None
    seg = _find(entry[1], version) or entry[1][-1]
    return in_range(version, seg[2])


def segment_sources(api_key: int, kind: str = REQUEST) -> list[tuple[int, int, str]]:
    """[(lo, hi, source id)] for an API: which definition each version range comes from."""
    entry = MESSAGES.get((api_key, kind))
    return [] if entry is None else [(s[0], s[1], s[3]) for s in entry[1]]


def api_keys() -> list[int]:
    return sorted(API_NAMES)


def _child_rows(fields: tuple, path: tuple, version: int) -> FieldRow | None:
    row = None
    for part in path:
        if isinstance(part, int):
            continue
        if fields is None:
            return None
        row = next((f for f in fields if f[F_NAME] == part and in_range(version, f[F_VERSIONS])),
                   None)
        if row is None:
            return None
        fields = row[F_CHILDREN]
    return row


def _info(row: FieldRow, version: int) -> FieldInfo:
    tagged = row[F_TAG] is not None and in_range(version, row[F_TAGGED])
    return FieldInfo(
        name=row[F_NAME], type=row[F_TYPE], about=row[F_ABOUT],
        nullable=in_range(version, row[F_NULLABLE]),
        tag=row[F_TAG] if tagged else None, default=row[F_DEFAULT], entity=row[F_ENTITY],
        enum=row[F_ENUM], versions=row[F_VERSIONS], is_array=row[F_TYPE].startswith("[]"),
        is_struct=row[F_CHILDREN] is not None,
    )


def field_info(api_key: int, kind: str, version: int, path: tuple[Any, ...]) -> FieldInfo | None:
    """Metadata of the field at ``path`` (names; int indexes skipped) or None."""
    seg = message_schema(api_key, kind, version)
    if seg is None:
        return None
    row = _child_rows(seg[4], path, version)
    return None if row is None else _info(row, version)


def struct_field_info(name: str, version: int, path: tuple[Any, ...]) -> FieldInfo | None:
    """Like :func:`field_info` for headers and non-API schemas (``STRUCTS``)."""
    seg = struct_schema(name, version)
    if seg is None:
        return None
    row = _child_rows(seg[4], path, version)
    return None if row is None else _info(row, version)


def fields_at(api_key: int, kind: str, version: int) -> list[FieldInfo]:
    """Top-level fields of a message version, in wire order (tagged ones last)."""
    seg = message_schema(api_key, kind, version)
    if seg is None:
        return []
    return [_info(r, version) for r in seg[4] if in_range(version, r[F_VERSIONS])]


def metadata_record_schema(record_type: int) -> str | None:
    """Schema name of a KRaft ``__cluster_metadata`` record type (its "apiKey")."""
    return METADATA_RECORDS.get(record_type)


def coordinator_record_schemas(coordinator: str, key_version: int) -> tuple[str, str] | None:
    """(key schema, value schema) of a coordinator record by its key version.

    ``coordinator`` is "group" (``__consumer_offsets``), "transaction"
    (``__transaction_state``) or "share" (``__share_group_state``); the key version is
    the int16 that starts every record key of those topics.
    """
    return COORDINATOR_RECORDS.get(coordinator, {}).get(key_version)


def struct_versions(name: str) -> tuple[int, int] | None:
    entry = STRUCTS.get(name)
    if entry is None:
        return None
    return (entry[1][0][0], entry[1][-1][1])


def struct_names() -> list[str]:
    return sorted(STRUCTS)
