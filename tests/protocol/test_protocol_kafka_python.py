"""kwsniff decodes what an independent encoder writes: kafka-python's protocol classes.

For every API and version kafka-python's message classes cover (52 request types,
Kafka 4.3 definitions), the values made up by the test value maker are encoded by
kafka-python -- header included -- and decoded by kwsniff.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest

from kwsniff.kafka.protocol import decode_request, decode_response

protocol_wire = pytest.importorskip("protocol_wire")
kafka_protocol = pytest.importorskip("kafka.protocol")
if not protocol_wire.SHARED.is_dir():
    pytest.skip("../shared/kafka-protocol is not present", allow_module_level=True)

from kafka.protocol.api_message import ApiMessage  # noqa: E402
from kafka.protocol.schemas.fields.codecs import BitField  # noqa: E402


def _classes() -> dict[tuple[int, str], type]:
    found: dict[tuple[int, str], type] = {}
    for info in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or info.name.endswith("generate_stubs"):
            continue
        mod = importlib.import_module(info.name)
        for obj in vars(mod).values():
            if (isinstance(obj, type) and issubclass(obj, ApiMessage) and obj is not ApiMessage
                    and getattr(obj, "_json", None)):
                found[(obj.API_KEY, obj.type)] = obj
    return found


CLASSES = _classes()
CASES = [(key, kind, v) for (key, kind), cls in sorted(CLASSES.items())
         for v in range(cls.valid_versions[0], cls.valid_versions[1] + 1)]


def _convert(field: Any, value: Any) -> Any:
    if value is None:
        return None
    if field.is_struct_array():
        return [_build(field.data_class, field.fields, e) for e in value]
    if field.is_struct():
        return _build(field.data_class, field.fields, value)
    if hasattr(value, "data") and not isinstance(value, (bytes, str)):
        return bytes(value.data)
    if getattr(field, "_type", None) is BitField:  # kafka-python takes a set of bit numbers
        return {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
    return value


def _build(data_class: Any, fields: Any, values: dict[str, Any], **extra: Any) -> Any:
    kwargs = {}
    for f in (fields.values() if isinstance(fields, dict) else fields):
        name = f._name
        if name not in values and getattr(f, "_type", None) is BitField:
            # kafka-python renames some *AuthorizedOperations fields in its JSON patches
            name = next((k for k in values if k.endswith("AuthorizedOperations")), name)
        if name in values:
            kwargs[f.name] = _convert(f, values[name])
    return data_class(**kwargs, **extra)


def test_kafka_python_covers_52_request_types() -> None:
    assert len([k for k in CLASSES if k[1] == "request"]) == 52


@pytest.mark.parametrize("key,kind,version", CASES)
def test_decodes_kafka_python_encoding(key: int, kind: str, version: int) -> None:
    cls = CLASSES[(key, kind)]
    schema = protocol_wire.schema_for(key, kind, version)
    assert schema is not None and schema.origin == "json"
    maker = protocol_wire.ValueMaker(f"kp/{key}/{kind}/{version}", tags=True, unknown_tags=False)
    values = maker.struct(schema.fields, version)
    if key == 18 and kind == "response" and values.get("ErrorCode") == 35:
        values["ErrorCode"] = 0
    msg_obj = _build(cls, cls._struct.fields, values, version=version)
    correlation_id = 7000 + version
    if kind == "request":
        msg_obj.with_header(correlation_id=correlation_id, client_id="kp-client")
    else:
        msg_obj.with_header(correlation_id=correlation_id)
    frame = bytes(msg_obj.encode(header=True))  # version set at construction
    if kind == "request":
        msg = decode_request(frame)
        assert msg.client_id == "kp-client"
    else:
        msg = decode_response(frame, key, version)
    assert msg.problems == [], msg.problems
    assert msg.correlation_id == correlation_id
    assert msg.body_end == len(frame)
    assert _norm(msg.body) == _norm(values)


def _norm(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _norm(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_norm(v) for v in obj]
    if hasattr(obj, "data") and not isinstance(obj, (bytes, str)):
        return ("records", bytes(obj.data))
    return obj


def _old_classes() -> dict[tuple[int, str, int], type]:
    """kafka-python's older hand-written schemas for versions its JSON classes lack."""
    old = importlib.import_module("kafka.protocol.old")
    api = importlib.import_module("kafka.protocol.old.api")
    found: dict[tuple[int, str, int], type] = {}
    for info in pkgutil.walk_packages(old.__path__, "kafka.protocol.old."):
        mod = importlib.import_module(info.name)
        for obj in vars(mod).values():
            if (isinstance(obj, type) and issubclass(obj, (api.Request, api.Response))
                    and isinstance(getattr(obj, "API_VERSION", None), int)):
                kind = "request" if issubclass(obj, api.Request) else "response"
                found[(obj.API_KEY, kind, obj.API_VERSION)] = obj
    return found


OLD = _old_classes()
# kafka-python's old schema is wrong here: Topics[].Partitions is int32, Kafka says []int32
OLD_BROKEN = {(35, "request", 0)}
OLD_CASES = sorted(k for k in OLD if (k[0], k[1]) in CLASSES and k not in OLD_BROKEN
                   and k[2] < CLASSES[(k[0], k[1])].valid_versions[0])


def _tuples(obj: Any) -> Any:
    if isinstance(obj, dict):
        return tuple(_tuples(v) for v in obj.values())
    if isinstance(obj, list):
        return [_tuples(v) for v in obj]
    if hasattr(obj, "data") and not isinstance(obj, (bytes, str)):
        return bytes(obj.data)
    return obj


def test_old_classes_cover_the_versions_kafka_43_dropped() -> None:
    assert len(OLD_CASES) >= 40


@pytest.mark.parametrize("key,kind,version", OLD_CASES)
def test_decodes_kafka_python_old_schemas(key: int, kind: str, version: int) -> None:
    schema = protocol_wire.schema_for(key, kind, version)
    assert schema is not None and not protocol_wire.within(version, schema.flexible)
    values = protocol_wire.ValueMaker(f"old/{key}/{kind}/{version}").struct(schema.fields, version)
    body = bytes(OLD[(key, kind, version)](*_tuples(values)).encode())
    hv = protocol_wire.request_header_version(key, version, False) if kind == "request" else 0
    frame = protocol_wire.header_bytes(kind, key, version, 99, "old", hv) + body
    msg = (decode_request(frame) if kind == "request" else decode_response(frame, key, version))
    assert msg.problems == [], msg.problems
    assert msg.body_end == len(frame)
    assert _norm(msg.body) == _norm(values)
