"""Kafka protocol: the generated schema table and the table-driven decoder.

Public API (see docs/architecture.md):

* :func:`decode_request`, :func:`decode_response` -> :class:`~kwsniff.kafka.model.KafkaMessage`
* :func:`decode_struct` for non-API schemas (consumer protocol, coordinator records,
  KRaft metadata records, control records); :func:`metadata_record_schema` and
  :func:`coordinator_record_schemas` map record type ids to schema names
* :func:`field_spans` / :func:`struct_spans` (byte ranges, on demand),
  :func:`field_info` / :func:`struct_field_info` (type, about, nullable, tag, default, enum)
* :func:`api_name`, :func:`error_name`, :func:`enum_label`,
  :func:`request_header_version`, :func:`response_header_version`
"""

from __future__ import annotations

from kwsniff.kafka.protocol.api_keys import api_key_by_name, api_name
from kwsniff.kafka.protocol.decoder import (
    Span,
    decode_request,
    decode_response,
    decode_struct,
    field_spans,
    struct_spans,
)
from kwsniff.kafka.protocol.enums import ENUMS, enum_label
from kwsniff.kafka.protocol.error_codes import ERRORS, error_description, error_name
from kwsniff.kafka.protocol.headers import request_header_version, response_header_version
from kwsniff.kafka.protocol.schema import (
    FieldInfo,
    api_keys,
    coordinator_record_schemas,
    field_info,
    fields_at,
    flexible_from,
    metadata_record_schema,
    struct_field_info,
    struct_names,
    struct_versions,
    version_range,
)

__all__ = [
    "ENUMS", "ERRORS", "FieldInfo", "Span", "api_key_by_name", "api_keys", "api_name",
    "coordinator_record_schemas", "decode_request", "decode_response", "decode_struct",
    "enum_label", "error_description", "error_name", "field_info", "field_spans",
    "fields_at", "flexible_from", "metadata_record_schema", "request_header_version",
    "response_header_version", "struct_field_info", "struct_names", "struct_spans",
    "struct_versions", "version_range",
]
