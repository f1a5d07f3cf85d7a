"""Avro in the Confluent Schema Registry wire format, decoded with local ``.avsc`` files.

Confluent's serializers write magic byte 0, the 4-byte big-endian schema id, then the
Avro binary encoding. Nothing here talks to a registry: point ``avro.schemas`` at a
directory of schema files, named by id (``7.avsc``) or by subject
(``orders-value.avsc``, Confluent's TopicNameStrategy ``<topic>-value``/``<topic>-key``),
and map other ids with ``avro.ids=7=orders-value,8=customer``. A value whose id has no
file is decoded with its topic's subject file when there is one. Schemas may refer to
named types of other ``.avsc`` files in the directory (``<full name>.avsc``).

Decoding uses fastavro (``pip install fastavro``; the ``plugins`` extra). Results are
``{"format": "avro", "schema_id", "schema": <full name>, "data": {...}}``; Avro logical
types become text (timestamps and dates in ISO 8601, decimals and UUIDs as strings).
"""

from __future__ import annotations

import functools
import io
from pathlib import Path
from typing import Any

from kwsniff.plugin_api import (
    OptionError,
    PayloadProblem,
    PayloadWhere,
    PluginContext,
    confluent_frame,
)

DESCRIPTION = "Avro (Confluent wire format) decoded with local .avsc schema files"
OPTIONS = {
    "schemas": "directory of .avsc files named by schema id (7.avsc) or subject "
               "(orders-value.avsc); nothing is decoded without it",
    "ids": "schema id -> subject or file name, e.g. 7=orders-value,8=customer",
    "topics": "topics (globs) whose values must be Avro: a value that is not is reported "
              "(default: every topic, decoding only what is framed and known; keys are "
              "never required to be Avro)",
    "parts": "what to decode: key, value or both (default: both)",
}


class AvroSchemas:
    """Parsed schemas by id and by subject, from one directory (see the docstring)."""

    def __init__(self, directory: Path, ids: dict[str, str], api: PluginContext) -> None:
        from fastavro.schema import load_schema

        if not directory.is_dir():
            raise OptionError(f"schemas: {directory} is not a directory")
        # (full name, parsed schema, whether values need plain())
        self.by_id: dict[int, tuple[str, Any, bool]] = {}
        self.by_subject: dict[str, tuple[str, Any, bool]] = {}
        for path in sorted(directory.glob("*.avsc")):
            try:
                parsed = load_schema(str(path))
            except Exception as exc:  # noqa: BLE001 - one bad file does not stop the others
                api.report(f"schema file {path.name} skipped: {type(exc).__name__}: {exc}")
                continue
            entry = (_schema_name(parsed, path.stem), parsed, _has_logical_types(parsed))
            if path.stem.isdigit():
                self.by_id[int(path.stem)] = entry
            else:
                self.by_subject[path.stem] = entry
                self.by_subject.setdefault(entry[0], entry)   # RecordNameStrategy
        for id_text, target in ids.items():
            try:
                schema_id = int(id_text)
            except ValueError:
                api.report(f"ids: {id_text!r} is not a schema id; ignored")
                continue
            stem = target[:-5] if target.endswith(".avsc") else target
            entry = self.by_subject.get(stem) or (self.by_id.get(int(stem))
                                                  if stem.isdigit() else None)
            if entry is None:
                api.report(f"ids: schema id {schema_id} maps to {target!r}, which is not a "
                           f"schema file in {directory}; ignored")
                continue
            self.by_id[schema_id] = entry

    def __len__(self) -> int:
        return len(self.by_id) + len(self.by_subject)


@functools.cache
def _reader() -> Any:
    """fastavro's reader, imported on first use (kwsniff starts without fastavro)."""
    from fastavro import schemaless_reader

    return schemaless_reader


def _has_logical_types(schema: Any, depth: int = 0) -> bool:
    """Whether fastavro may return values that need :func:`plain` (logical types)."""
    if depth > 64:
        return True
    if isinstance(schema, dict):
        if "logicalType" in schema:
            return True
        return any(_has_logical_types(v, depth + 1) for k, v in schema.items()
                   if k in ("type", "fields", "items", "values"))
    if isinstance(schema, list):
        return any(_has_logical_types(v, depth + 1) for v in schema)
    return False


def _schema_name(parsed: Any, default: str) -> str:
    if isinstance(parsed, dict):
        return str(parsed.get("name") or parsed.get("type") or default)
    if isinstance(parsed, list):
        return "union"
    return str(parsed)


def register(api: PluginContext) -> None:
    directory = api.options.get_path("schemas")
    if directory is None:
        return   # inert until a schema directory is given
    schemas = AvroSchemas(directory, api.options.get_map("ids"), api)
    if not len(schemas):
        api.report(f"no .avsc schema files in {directory}")
        return
    topics = api.options.get_list("topics")
    strict = bool(topics)   # the hook sees only these topics: they must be Avro
    parts = tuple(p for p in api.options.get_list("parts", ["key", "value"])
                  if p in ("key", "value")) or ("key", "value")

    def decode(data: bytes, where: PayloadWhere) -> Any:
        return decode_avro(data, where, schemas, strict and where.part == "value", api)

    api.payload_decoder(decode, topics=topics or "*", parts=parts, name="avro")


def decode_avro(data: bytes, where: PayloadWhere, schemas: AvroSchemas, strict: bool,
                api: PluginContext) -> Any:
    """Decode one Confluent-framed Avro payload; None when it is not one we know."""
    framed = confluent_frame(data)
    if framed is None:
        if strict:
            raise PayloadProblem("not in the Confluent wire format (no magic byte 0 + "
                                 "schema id)")
        return None
    schema_id, body = framed
    entry = schemas.by_id.get(schema_id)
    how = "id"
    if entry is None and where.topic is not None:
        entry = schemas.by_subject.get(f"{where.topic}-{where.part}")
        how = "subject"
    if entry is None:
        message = (f"schema id {schema_id} (topic {where.topic!r}, {where.part}) has no "
                   f"schema file: add {schema_id}.avsc or map it with avro.ids")
        if strict:
            raise PayloadProblem(message)
        api.report(message)
        return None
    name, parsed, logical = entry

    buf = io.BytesIO(body)
    problem = None
    try:
        value = _reader()(buf, parsed)
    except Exception as exc:  # noqa: BLE001 - malformed Avro for this schema
        problem = f"not decodable: {type(exc).__name__}: {exc}"
    else:
        left = len(body) - buf.tell()
        if left:
            problem = f"{left} bytes left after the Avro data (wrong schema?)"
    if problem is not None:
        if strict:
            raise PayloadProblem(f"schema id {schema_id} ({name}): {problem}")
        # on a topic not declared Avro, a zero byte + a known id may be a coincidence
        api.report(f"{where.part}s of topic {where.topic!r} framed with schema id "
                   f"{schema_id} do not decode with {name} ({problem}); name the topic in "
                   "avro.topics to see each one as a record problem")
        return None
    out: dict[str, Any] = {"format": "avro", "schema_id": schema_id, "schema": name}
    if how == "subject":
        out["schema_from"] = f"subject {where.topic}-{where.part} (id {schema_id} unknown)"
    out["data"] = plain(value) if logical else value
    return out


_PLAIN = frozenset({str, int, float, bool, bytes, type(None)})


def plain(value: Any) -> Any:
    """fastavro's values with logical types turned into JSON-friendly text."""
    t = type(value)
    if t in _PLAIN:
        return value
    if t is dict:
        return {k: v if type(v) in _PLAIN else plain(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [v if type(v) in _PLAIN else plain(v) for v in value]
    # (imported here, once, by the first value that is not plain: the plugin is loaded
    # on every run and these cost ~8 ms of start-up)
    import datetime as _dt
    import decimal
    import uuid

    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    return value
