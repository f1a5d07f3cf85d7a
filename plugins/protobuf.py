"""Protobuf record values (and keys), decoded with a compiled descriptor set.

Compile your ``.proto`` files into a descriptor set (``protoc --include_imports
--descriptor_set_out=shop.desc shop.proto``), then map topics to message types::

    --plugin-opt protobuf.descriptors=shop.desc
    --plugin-opt protobuf.topics=orders=shop.v1.Order,events.*=shop.v1.Event

Plain protobuf bytes and Confluent's Protobuf wire format (magic byte 0, 4-byte schema
id, message-index list) are both understood: a protobuf message never starts with a
zero byte, so the framing is unambiguous. In the framed form the message indexes pick
the message within the mapped type's ``.proto`` file, as Confluent's deserializer does;
``protobuf.ids=12=shop.v1.Order`` maps schema ids for topics without a mapping.

Decoding uses the ``protobuf`` package (the ``plugins`` extra). Results are
``{"format": "protobuf", "schema": <message type>, "data": {...}}`` (+ ``schema_id`` and
``message_indexes`` when framed, ``unknown_fields`` when the bytes carry field numbers
the type does not define). ``data`` is the canonical proto3 JSON mapping with the field
names of the ``.proto`` file (64-bit integers as strings, bytes in base64, enums by name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kwsniff.plugin_api import (
    OptionError,
    PayloadProblem,
    PayloadWhere,
    PluginContext,
    TopicMap,
    confluent_frame,
    protobuf_message_indexes,
)

DESCRIPTION = "Protobuf values/keys decoded with a descriptor set (.desc) and a topic map"
OPTIONS = {
    "descriptors": "descriptor set file(s) from protoc --include_imports "
                   "--descriptor_set_out (comma-separated)",
    "topics": "topic (glob) -> message type for values, e.g. orders=shop.v1.Order",
    "keys": "topic (glob) -> message type for keys",
    "ids": "Confluent schema id -> message type, for framed data of unmapped topics",
}


class Descriptors:
    """Message classes and per-file message order from descriptor sets."""

    def __init__(self, paths: list[Path]) -> None:
        from google.protobuf import descriptor_pb2, descriptor_pool

        self.pool = descriptor_pool.DescriptorPool()
        self.files: dict[str, Any] = {}        # file name -> FileDescriptorProto
        pending: list[Any] = []
        for path in paths:
            fds = descriptor_pb2.FileDescriptorSet()
            try:
                fds.ParseFromString(path.read_bytes())
            except OSError as err:
                raise OptionError(f"descriptors: cannot read {path}: "
                                  f"{err.strerror or err}") from None
            except Exception as exc:  # noqa: BLE001 - DecodeError and friends
                raise OptionError(f"descriptors: {path} is not a descriptor set "
                                  f"({type(exc).__name__}: {exc})") from None
            pending.extend(f for f in fds.file if f.name not in self.files)
            for f in fds.file:
                self.files.setdefault(f.name, f)
        self._add_in_dependency_order(pending)
        self._classes: dict[str, Any] = {}

    def _add_in_dependency_order(self, pending: list[Any]) -> None:
        added: set[str] = set()
        while pending:
            progress = False
            for f in list(pending):
                if all(d in added for d in f.dependency):
                    self.pool.Add(f)
                    added.add(f.name)
                    pending.remove(f)
                    progress = True
            if not progress:
                missing = sorted({d for f in pending for d in f.dependency if d not in added})
                raise OptionError(f"descriptors: imports not in the set: {', '.join(missing)} "
                                  "(compile with protoc --include_imports)")

    def message_class(self, full_name: str) -> Any:
        cls = self._classes.get(full_name)
        if cls is None:
            from google.protobuf import message_factory

            try:
                desc = self.pool.FindMessageTypeByName(full_name)
            except KeyError:
                raise OptionError(f"message type {full_name} is not in the descriptor "
                                  "set") from None
            cls = message_factory.GetMessageClass(desc)
            self._classes[full_name] = cls
        return cls

    def by_indexes(self, full_name: str, indexes: list[int]) -> str:
        """The message at ``indexes`` in the file that defines ``full_name``."""
        desc = self.pool.FindMessageTypeByName(full_name)
        fdp = self.files.get(desc.file.name)
        if fdp is None:
            raise PayloadProblem(f"file {desc.file.name} of {full_name} is not in the set")
        prefix = f"{fdp.package}." if fdp.package else ""
        types = fdp.message_type
        name = ""
        for depth, idx in enumerate(indexes):
            if idx >= len(types):
                raise PayloadProblem(f"message index {indexes} does not exist in "
                                     f"{fdp.name}")
            msg = types[idx]
            name = msg.name if depth == 0 else f"{name}.{msg.name}"
            types = msg.nested_type
        return prefix + name


def register(api: PluginContext) -> None:
    paths = api.options.get_paths("descriptors")
    if not paths:
        return   # inert until a descriptor set is given
    values = TopicMap(api.options.get_map("topics"))
    keys = TopicMap(api.options.get_map("keys"))
    ids = {}
    for k, v in api.options.get_map("ids").items():
        if not k.isdigit():
            raise OptionError(f"ids: {k!r} is not a schema id")
        ids[int(k)] = v
    if not values and not keys and not ids:
        api.report("descriptors given but no topics/keys/ids map: nothing to decode")
        return
    desc = Descriptors(paths)
    for full_name in [*values.values(), *keys.values(), *ids.values()]:
        desc.message_class(full_name)   # unknown types are option errors, found now

    def decode(data: bytes, where: PayloadWhere) -> Any:
        mapped = (keys if where.part == "key" else values).get(where.topic)
        return decode_protobuf(data, mapped, ids, desc)

    if values:
        api.payload_decoder(decode, topics=values.patterns() if not ids else "*",
                            parts=("value",), name="protobuf")
    elif ids:
        api.payload_decoder(decode, topics="*", parts=("value",), name="protobuf")
    if keys:
        api.payload_decoder(decode, topics=keys.patterns() if not ids else "*",
                            parts=("key",), name="protobuf")


def decode_protobuf(data: bytes, mapped: str | None, ids: dict[int, str],
                    desc: Descriptors) -> Any:
    """Decode one payload as ``mapped`` (or by its schema id); None when unmapped."""
    out: dict[str, Any] = {"format": "protobuf"}
    framed = confluent_frame(data)
    if framed is not None:
        schema_id, rest = framed
        full_name = mapped or ids.get(schema_id)
        if full_name is None:
            return None
        try:
            indexes, data = protobuf_message_indexes(rest)
        except ValueError as err:
            raise PayloadProblem(f"Confluent framing, schema id {schema_id}: bad message "
                                 f"indexes: {err}") from None
        # the indexes pick the message in the schema's file (Confluent's rule)
        full_name = desc.by_indexes(full_name, indexes)
        out["schema_id"] = schema_id
        out["message_indexes"] = indexes
    else:
        if mapped is None:
            return None
        full_name = mapped
    cls = desc.message_class(full_name)
    msg = cls()
    try:
        msg.ParseFromString(data)
    except Exception as exc:  # noqa: BLE001 - DecodeError: not this message type
        raise PayloadProblem(f"not a {full_name}: {type(exc).__name__}: {exc}") from None
    from google.protobuf import json_format

    out["schema"] = full_name
    unknown = _unknown_fields(msg)
    if unknown:
        out["unknown_fields"] = unknown
    out["data"] = json_format.MessageToDict(msg, preserving_proto_field_name=True)
    return out


def _unknown_fields(msg: Any) -> list[int]:
    """Field numbers present in the bytes but not defined by the message type."""
    try:
        from google.protobuf.unknown_fields import UnknownFieldSet
    except ImportError:
        return []
    return sorted({f.field_number for f in UnknownFieldSet(msg)})
