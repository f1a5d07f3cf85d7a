"""Spark schemas of the JSON Lines export, derived from its JSON Schema (never inferred).

Contract:

* :func:`spark_type` converts one JSON Schema node of ``kwsniff/output/export_schema.json``
  into a Spark type: ``integer`` -> long, ``number`` -> double, ``boolean`` -> boolean,
  ``string``/``enum``/``const`` -> string, ``array`` -> array of its ``items``, ``object``
  with ``properties`` -> struct (fields in the schema's order), ``$ref``/``anyOf`` with
  ``null`` -> the referenced type (every Spark field is nullable). Nodes marked
  ``"x-spark-type": "json-string"`` (decoded bodies, request header, control records,
  decoded payloads) become strings holding the raw JSON text: their shape depends on the
  API and version, so they are parsed later with per-API views (:mod:`kwsniff.spark.bodies`).
* :func:`exchange_schema`, :func:`record_schema`, :func:`summary_schema` are the
  ``$defs`` of the three line kinds; :func:`line_schema` is the union of their fields
  (what the JSON reader is given, so one pass reads a mixed export). Field descriptions
  travel as Spark field metadata (``comment``).
* A schema node this converter does not understand raises :class:`SchemaError` with the
  JSON pointer of the node: the export schema and this module must evolve together.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from pyspark.sql import types as T

JSON_STRING = "json-string"
SCHEMA_ID = "kwsniff.exchange/1"


class SchemaError(ValueError):
    """The export JSON Schema has a construct with no Spark equivalent here."""


@lru_cache(maxsize=1)
def export_json_schema() -> dict[str, Any]:
    """The JSON Schema shipped in ``kwsniff.output`` (parsed once)."""
    text = resources.files("kwsniff.output").joinpath("export_schema.json").read_text("utf-8")
    return json.loads(text)


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise SchemaError(f"{ref}: only local references are supported")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def _types_of(node: dict[str, Any]) -> list[str]:
    t = node.get("type")
    if t is None:
        return []
    return [t] if isinstance(t, str) else list(t)


def spark_type(node: dict[str, Any], root: dict[str, Any] | None = None,
               pointer: str = "#") -> T.DataType:
    """The Spark type of JSON Schema ``node`` (see the module contract)."""
    root = root if root is not None else export_json_schema()
    if node.get("x-spark-type") == JSON_STRING:
        return T.StringType()
    if "$ref" in node:
        return spark_type(_resolve(root, node["$ref"]), root, node["$ref"])
    for combiner in ("anyOf", "oneOf"):
        if combiner in node:
            options = [o for o in node[combiner] if _types_of(o) != ["null"]]
            if len(options) != 1:
                raise SchemaError(f"{pointer}: {combiner} with {len(options)} non-null options")
            return spark_type(options[0], root, f"{pointer}/{combiner}")
    if "const" in node and isinstance(node["const"], str):
        return T.StringType()
    if "enum" in node:
        values = [v for v in node["enum"] if v is not None]
        if values and all(isinstance(v, str) for v in values):
            return T.StringType()
        if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return T.LongType()
        raise SchemaError(f"{pointer}: enum of mixed types")
    kinds = [k for k in _types_of(node) if k != "null"]
    if len(kinds) != 1:
        raise SchemaError(f"{pointer}: type {node.get('type')!r} has no single Spark type")
    kind = kinds[0]
    if kind == "integer":
        return T.LongType()
    if kind == "number":
        return T.DoubleType()
    if kind == "boolean":
        return T.BooleanType()
    if kind == "string":
        return T.StringType()
    if kind == "array":
        items = node.get("items")
        if not isinstance(items, dict):
            raise SchemaError(f"{pointer}: array without a single items schema")
        return T.ArrayType(spark_type(items, root, f"{pointer}/items"), True)
    if kind == "object":
        props = node.get("properties")
        if not props:
            raise SchemaError(f"{pointer}: object without properties and not a json-string")
        return struct_of(props, root, pointer)
    raise SchemaError(f"{pointer}: unsupported type {kind!r}")


def struct_of(properties: dict[str, Any], root: dict[str, Any], pointer: str) -> T.StructType:
    fields = []
    for name, sub in properties.items():
        meta = {"comment": sub["description"]} if isinstance(sub.get("description"), str) else {}
        fields.append(T.StructField(name, spark_type(sub, root, f"{pointer}/properties/{name}"),
                                    True, meta))
    return T.StructType(fields)


def definition_schema(name: str) -> T.StructType:
    """The struct of ``$defs/<name>`` (``exchange``, ``record``, ``summary``, ...)."""
    root = export_json_schema()
    node = root["$defs"][name]
    result = spark_type(node, root, f"#/$defs/{name}")
    if not isinstance(result, T.StructType):
        raise SchemaError(f"#/$defs/{name} is not an object")
    return result


@lru_cache(maxsize=None)
def exchange_schema() -> T.StructType:
    return definition_schema("exchange")


@lru_cache(maxsize=None)
def record_schema() -> T.StructType:
    return definition_schema("record")


@lru_cache(maxsize=None)
def summary_schema() -> T.StructType:
    return definition_schema("summary")


@lru_cache(maxsize=None)
def line_schema() -> T.StructType:
    """The fields of all three line kinds, for reading a mixed export in one pass.

    Fields come in the order exchange, record, summary; a name already taken with another
    type keeps the first type (the summary's integer ``problems`` yields to the
    exchange's array, so summary lines read it as null: use :func:`summary_schema` to
    read summaries exactly).
    """
    fields: dict[str, T.StructField] = {}
    for part in (exchange_schema(), record_schema(), summary_schema()):
        for f in part.fields:
            fields.setdefault(f.name, f)
    return T.StructType(list(fields.values()))


def record_set_type() -> T.DataType:
    """The export's record-set summary (``$defs/record_set``) as a Spark struct."""
    root = export_json_schema()
    return spark_type(root["$defs"]["record_set"], root, "#/$defs/record_set")


def bytes_type() -> T.DataType:
    """The export's bytes object (``$defs/bytes``): ``struct<text, base64>``."""
    root = export_json_schema()
    return spark_type(root["$defs"]["bytes"], root, "#/$defs/bytes")
