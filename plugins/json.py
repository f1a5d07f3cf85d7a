"""JSON record values (and keys) of the topics you name, pretty and structured.

Opt-in per topic: ``--plugin-opt json.topics=orders,events.*``. Values of those topics
are parsed as JSON (UTF-8) and shown as structured fields in the ``-V`` tree and the
TUI, and as ``value_decoded`` in the export (``--records``), so Spark jobs can query
them. A value of such a topic that is not JSON is reported as a record problem.
Values framed by Confluent's JSON Schema serializer (magic byte 0 + 4-byte schema id)
are unwrapped and the schema id is kept.

Result: ``{"format": "json", "data": <the JSON value>}`` (+ ``"schema_id"`` when framed).
"""

from __future__ import annotations

import json
from typing import Any

from kwsniff.plugin_api import PayloadProblem, PayloadWhere, PluginContext, confluent_frame

DESCRIPTION = "JSON record values (and keys) of the topics you name"
OPTIONS = {
    "topics": "topics (globs, comma-separated) whose values are JSON; nothing is decoded "
              "without it",
    "parts": "what to decode: value, key, or both (default: value)",
}


def register(api: PluginContext) -> None:
    topics = api.options.get_list("topics")
    if not topics:
        return   # opt-in: inert until topics are named
    parts = api.options.get_list("parts", ["value"])
    bad = [p for p in parts if p not in ("key", "value")]
    if bad:
        api.report(f"parts {', '.join(bad)} ignored (use key and/or value)")
        parts = [p for p in parts if p in ("key", "value")] or ["value"]
    api.payload_decoder(decode_json, topics=topics, parts=tuple(parts), name="json")


def decode_json(data: bytes, where: PayloadWhere) -> Any:
    """The JSON value of ``data`` (see the module docstring)."""
    schema_id = None
    framed = confluent_frame(data)
    if framed is not None:
        schema_id, data = framed
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise PayloadProblem(f"not JSON: invalid UTF-8 at byte {err.start}") from None
    try:
        value = json.loads(text)
    except ValueError as err:
        raise PayloadProblem(f"not JSON: {err}") from None
    out: dict[str, Any] = {"format": "json"}
    if schema_id is not None:
        out["schema_id"] = schema_id
    out["data"] = value
    return out
