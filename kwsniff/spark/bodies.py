"""Typed views of decoded bodies, derived from Kafka's message definitions.

The export keeps ``request``/``response`` bodies as raw JSON text (their shape depends on
the API and version). An analysis parses only the fields it needs with
``from_json(col, view)``, where a *view* is a Spark struct built here from the generated
schema table (``kwsniff.kafka.protocol.schema_table``, i.e. ``../shared/kafka-protocol``):

* :func:`message_view` takes an API key, ``"request"``/``"response"`` and a *selection*
  (a nested dict: field name -> None for a leaf or a sub-selection for a struct or array
  of structs) and returns the struct of those fields, typed from the definitions of
  **every** version of that message (a field absent at some version reads as null there).
  Kafka types map as: int8/int16/int32/uint16 -> int, int64/uint32 -> long, float64 ->
  double, bool -> boolean, string/uuid -> string, bytes -> the export's bytes struct,
  records -> the export's record-set summary struct, ``[]T`` -> array.
* kwsniff's annotations are typed too: ``_topic_name`` (string, next to ``TopicId``) and
  ``_decoded_<Field>`` (``struct<schema, version, data>`` with ``data`` typed from the
  embedded schema named in the selection, e.g. ``ConsumerProtocolAssignment``).
* :data:`LEGACY07_REQUEST`/:data:`LEGACY07_RESPONSE` are the views of the Kafka 0.7
  bodies (``kwsniff.kafka.legacy07``'s contract: ``Topic``, ``Partition``, ``Messages``,
  ``Produces``/``Responses``), which Kafka's definitions do not describe.
* A selected name the definitions do not have raises :class:`~kwsniff.spark.schema.SchemaError`:
  a typo must not silently read as null.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Union

from pyspark.sql import types as T

from kwsniff.kafka.protocol import schema as kschema
from kwsniff.spark.schema import SchemaError, bytes_type, record_set_type

Selection = dict[str, Union["Selection", None]]

TOPIC_NAME = "_topic_name"
DECODED_PREFIX = "_decoded_"

_SCALARS: dict[str, T.DataType] = {
    "int8": T.IntegerType(), "int16": T.IntegerType(), "int32": T.IntegerType(),
    "uint16": T.IntegerType(), "int64": T.LongType(), "uint32": T.LongType(),
    "float64": T.DoubleType(), "bool": T.BooleanType(), "string": T.StringType(),
    "uuid": T.StringType(),
}


def _scalar(kafka_type: str) -> T.DataType | None:
    if kafka_type == "bytes":
        return bytes_type()
    if kafka_type == "records":
        return record_set_type()
    return _SCALARS.get(kafka_type)


def _merge(a: T.DataType, b: T.DataType, where: str) -> T.DataType:
    """The type that holds values of both ``a`` and ``b`` (ints widen to long)."""
    if a == b:
        return a
    ints = (T.IntegerType(), T.LongType())
    if a in ints and b in ints:
        return T.LongType()
    if isinstance(a, T.ArrayType) and isinstance(b, T.ArrayType):
        return T.ArrayType(_merge(a.elementType, b.elementType, where), True)
    if isinstance(a, T.StructType) and isinstance(b, T.StructType):
        fields = {f.name: f.dataType for f in a.fields}
        for f in b.fields:
            fields[f.name] = _merge(fields[f.name], f.dataType, f"{where}.{f.name}") \
                if f.name in fields else f.dataType
        return T.StructType([T.StructField(n, t, True) for n, t in fields.items()])
    raise SchemaError(f"{where}: {a.simpleString()} and {b.simpleString()} in different versions")


def _rows_named(field_lists: list[tuple], name: str) -> list[tuple]:
    return [row for fields in field_lists for row in fields
            if row[kschema.F_NAME] == name]


def _row_type(rows: list[tuple], sub: Selection | None, where: str) -> T.DataType:
    """One type for all definitions (versions) of a field; struct fields are united."""
    arrays = {row[kschema.F_TYPE].startswith("[]") for row in rows}
    if len(arrays) != 1:
        raise SchemaError(f"{where}: an array in some versions and not in others")
    children = [row[kschema.F_CHILDREN] for row in rows if row[kschema.F_CHILDREN]]
    if children:
        if len(children) != len(rows):
            raise SchemaError(f"{where}: a struct in some versions and not in others")
        if sub is None:
            raise SchemaError(f"{where} is a struct: select its fields")
        result: T.DataType = _select(children, sub, where)
    else:
        if sub is not None:
            raise SchemaError(f"{where} is a {rows[0][kschema.F_TYPE]}, not a struct")
        found: T.DataType | None = None
        for row in rows:
            ktype = row[kschema.F_TYPE]
            scalar = _scalar(ktype[2:] if ktype.startswith("[]") else ktype)
            if scalar is None:
                raise SchemaError(f"{where}: unknown Kafka type {ktype!r}")
            found = scalar if found is None else _merge(found, scalar, where)
        assert found is not None
        result = found
    return T.ArrayType(result, True) if arrays.pop() else result


def _decoded_type(sub: Selection | None, where: str) -> T.DataType:
    """``_decoded_<Field>``: selection ``{"<SchemaName>": {...fields of data...}}``."""
    if not sub or len(sub) != 1:
        raise SchemaError(f"{where}: select exactly one embedded schema name")
    (schema_name, data_sel), = sub.items()
    found = kschema.STRUCTS.get(schema_name)
    if found is None:
        raise SchemaError(f"{where}: no embedded schema {schema_name!r}")
    segments = found[1]
    data = _select([seg[4] for seg in segments], data_sel or {}, f"{where}.data")
    return T.StructType([
        T.StructField("schema", T.StringType(), True),
        T.StructField("version", T.IntegerType(), True),
        T.StructField("data", data, True),
    ])


def _select(field_lists: list[tuple], selection: Selection, where: str) -> T.StructType:
    fields = []
    for name, sub in selection.items():
        path = f"{where}.{name}"
        if name == TOPIC_NAME:
            t: T.DataType = T.StringType()
        elif name.startswith(DECODED_PREFIX):
            t = _decoded_type(sub, path)
        else:
            rows = _rows_named(field_lists, name)
            if not rows:
                raise SchemaError(f"{path}: no such field in any version")
            t = _row_type(rows, sub, path)
        fields.append(T.StructField(name, t, True))
    return T.StructType(fields)


def _freeze(selection: Selection) -> tuple:
    return tuple((k, _freeze(v) if isinstance(v, dict) else None) for k, v in selection.items())


def _thaw(frozen: tuple) -> Selection:
    return {k: (_thaw(v) if v is not None else None) for k, v in frozen}


@lru_cache(maxsize=256)
def _message_view(api_key: int, kind: str, frozen: tuple) -> T.StructType:
    found = kschema.MESSAGES.get((api_key, kind))
    if found is None:
        raise SchemaError(f"no {kind} definition for API key {api_key}")
    name, segments = found
    return _select([seg[4] for seg in segments], _thaw(frozen), name)


def message_view(api_key: int, kind: str, selection: Selection) -> T.StructType:
    """The struct of ``selection`` in ``kind`` bodies of ``api_key`` (see the module doc)."""
    return _message_view(api_key, kind, _freeze(selection))


def _legacy07(response: bool) -> T.StructType:
    part = [T.StructField("Topic", T.StringType(), True),
            T.StructField("Partition", T.IntegerType(), True),
            T.StructField("Messages", record_set_type(), True)]
    if response:
        part.insert(2, T.StructField("ErrorCode", T.IntegerType(), True))
    fields = list(part) + [T.StructField("Produces" if not response else "Responses",
                                         T.ArrayType(T.StructType(part), True), True)]
    if not response:
        fields.append(T.StructField("Fetches", T.ArrayType(T.StructType(part[:2]), True), True))
    return T.StructType(fields)


LEGACY07_REQUEST: T.StructType = _legacy07(False)
LEGACY07_RESPONSE: T.StructType = _legacy07(True)


def view_fields(view: T.StructType) -> list[str]:
    """Dotted paths of every leaf of a view (for documentation and tests)."""
    out: list[str] = []

    def walk(t: Any, prefix: str) -> None:
        while isinstance(t, T.ArrayType):
            t = t.elementType
            prefix += "[]"
        if isinstance(t, T.StructType):
            for f in t.fields:
                walk(f.dataType, f"{prefix}.{f.name}" if prefix else f.name)
        else:
            out.append(prefix)
    walk(view, "")
    return out
