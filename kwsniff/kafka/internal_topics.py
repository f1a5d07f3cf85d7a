"""Records of Kafka's internal topics, decoded with the coordinator and KRaft schemas.

Contract:

* :func:`decode_records` fills ``key_decoded``/``value_decoded`` of the records of
  ``__consumer_offsets``, ``__transaction_state``, ``__share_group_state`` and
  ``__cluster_metadata`` (control records are left to :mod:`kwsniff.kafka.records`).
  It never raises; what cannot be decoded is reported in the batch's problem list.
* A decoded key or value is ``{"schema": name, "version": v, "data": {...}}`` (plus
  ``"record_type"`` and ``"frame_version"`` for KRaft metadata records, and
  ``"problems"`` when the bytes did not fit the schema exactly). A tombstone (null
  value) leaves ``value_decoded`` None.
* Group metadata of the "consumer" protocol type also gets its members'
  ``subscription``/``assignment`` decoded into ``_decoded_subscription`` /
  ``_decoded_assignment`` (the convention of :mod:`kwsniff.kafka.embedded`).
* :func:`decode_schema`, :func:`decode_prefixed` and :func:`decode_versioned` are the
  shared helpers over :func:`kwsniff.kafka.protocol.decode_struct` (also used for the
  consumer protocol and KRaft control records).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from kwsniff.kafka.records import uvarint
from kwsniff.text import counted

if TYPE_CHECKING:
    from kwsniff.kafka.records import Record

#: internal topic -> coordinator name in the schema table ("metadata" for KRaft)
INTERNAL_TOPICS: dict[str, str] = {
    "__consumer_offsets": "group",
    "__transaction_state": "transaction",
    "__share_group_state": "share",
    "__cluster_metadata": "metadata",
}

_I16 = struct.Struct(">h")


def decode_schema(name: str, version: int, buf: bytes, offset: int = 0,
                  exact: bool = True) -> dict[str, Any]:
    """Decode ``buf[offset:]`` as schema ``name`` at ``version``.

    Returns ``{"schema", "version", "data"}`` and ``problems`` when something is wrong
    (unknown schema or version, bytes that do not fit, with ``exact`` also bytes left
    over); ``data`` then holds what decoded before the failure (None if nothing could). A version newer than the table knows is
    decoded with the newest known one (Kafka's rule for these schemas) and noted in
    ``decoded_as``.
    """
    out: dict[str, Any] = {"schema": name, "version": version, "data": None}
    try:
        from kwsniff.kafka.protocol import decode_struct
        from kwsniff.kafka.protocol.schema import struct_versions
    except ImportError as exc:
        out["problems"] = [f"schema decoder unavailable ({exc})"]
        return out
    known = struct_versions(name)
    if known is None:
        out["problems"] = [f"no schema named {name}"]
        return out
    use = version
    if version > known[1]:
        use = known[1]
        out["decoded_as"] = use
    elif version < known[0]:
        out["problems"] = [f"{name} has no version {version} (known: {known[0]}-{known[1]})"]
        return out
    problems: list[str] = []
    try:
        data, end = decode_struct(name, use, buf, offset, problems)
    except Exception as exc:  # the decoder promises not to raise; guard anyway
        data, end = None, offset
        problems.append(f"{name} v{version}: {type(exc).__name__}: {exc}")
    out["data"] = data
    if exact and not problems and end != len(buf) and use == version:
        problems.append(f"{counted(len(buf) - end, 'byte')} after {name} v{version}")
    if problems:
        out["problems"] = problems
    return out


def decode_prefixed(name: str, buf: bytes) -> dict[str, Any]:
    """An int16 version followed by ``name`` at that version (coordinator values, the
    consumer protocol)."""
    if buf is None or len(buf) < 2:
        return {"schema": name, "version": None, "data": None,
                "problems": [f"{name}: {0 if buf is None else len(buf)} bytes, no version field"]}
    return decode_schema(name, _I16.unpack_from(buf, 0)[0], buf, 2)


def decode_versioned(name: str, buf: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """A schema whose first field is its own int16 ``Version`` (KRaft control records):
    (decoded dict or None, problem or None)."""
    if buf is None or len(buf) < 2:
        return None, f"{name}: no version field"
    res = decode_schema(name, _I16.unpack_from(buf, 0)[0], buf, 0)
    problems = res.get("problems")
    return res["data"], ("; ".join(problems) if problems else None)


def decode_metadata_value(buf: bytes) -> dict[str, Any]:
    """A ``__cluster_metadata`` record value: uvarint frame version, uvarint record type
    (the schema's apiKey), uvarint version, then the record."""
    from kwsniff.kafka.protocol.schema import metadata_record_schema
    try:
        frame, pos = uvarint(buf, 0)
        rtype, pos = uvarint(buf, pos)
        version, pos = uvarint(buf, pos)
    except (IndexError, ValueError):
        return {"schema": None, "version": None, "data": None,
                "problems": ["metadata record header (frame version, type, version) truncated"]}
    name = metadata_record_schema(rtype)
    if name is None:
        return {"schema": None, "version": version, "record_type": rtype, "frame_version": frame,
                "data": None, "problems": [f"unknown metadata record type {rtype}"]}
    out = decode_schema(name, version, buf, pos)
    out["record_type"] = rtype
    out["frame_version"] = frame
    return out


def decode_coordinator_record(coordinator: str, key: bytes | None,
                              value: bytes | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(key_decoded, value_decoded) of one coordinator record."""
    from kwsniff.kafka.protocol.schema import coordinator_record_schemas
    if key is None or len(key) < 2:
        return ({"schema": None, "version": None, "data": None,
                 "problems": ["record key missing or shorter than its version field"]}, None)
    key_version = _I16.unpack_from(key, 0)[0]
    names = coordinator_record_schemas(coordinator, key_version)
    if names is None:
        return ({"schema": None, "version": key_version, "data": None,
                 "problems": [f"unknown {coordinator} coordinator record type {key_version}"]}, None)
    key_decoded = decode_schema(names[0], key_version, key, 2)
    if value is None:
        return key_decoded, None
    value_decoded = decode_prefixed(names[1], value)
    if names[1] == "GroupMetadataValue":
        _decode_group_members(value_decoded)
    return key_decoded, value_decoded


def _decode_group_members(value_decoded: dict[str, Any]) -> None:
    data = value_decoded.get("data")
    if not isinstance(data, dict) or data.get("protocolType") != "consumer":
        return
    for member in data.get("members") or ():
        for field, schema in (("subscription", "ConsumerProtocolSubscription"),
                              ("assignment", "ConsumerProtocolAssignment")):
            raw = member.get(field)
            if raw:
                member[f"_decoded_{field}"] = decode_prefixed(schema, bytes(raw))


def decode_records(topic: str, records: list[Record], problems: list[str]) -> None:
    """Fill ``key_decoded``/``value_decoded`` of an internal topic's records in place;
    each record's decoding problems go to ``problems`` (the batch's list)."""
    coordinator = INTERNAL_TOPICS.get(topic)
    if coordinator is None:
        return
    for r in records:
        if r.control is not None:
            continue
        try:
            if coordinator == "metadata":
                if r.value is not None:
                    r.value_decoded = decode_metadata_value(r.value)
            else:
                r.key_decoded, r.value_decoded = decode_coordinator_record(coordinator, r.key, r.value)
        except Exception as exc:  # never let bad bytes escape
            problems.append(f"record {r.offset}: {topic} decoding failed: {type(exc).__name__}: {exc}")
            continue
        for part, dec in (("key", r.key_decoded), ("value", r.value_decoded)):
            if dec and dec.get("problems"):
                problems.extend(f"record {r.offset} {part} ({dec.get('schema')}): {p}"
                                for p in dec["problems"])
