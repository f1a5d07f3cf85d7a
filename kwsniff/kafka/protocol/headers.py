"""Which request/response header version a Kafka message uses.

Rules (Kafka's ``ApiKeys.requestHeaderVersion`` / ``responseHeaderVersion``):

* request header v2 for flexible request versions, v1 otherwise; ControlledShutdown
  (key 7) v0 uses request header v0 (no client id);
* response header v1 for flexible response versions, v0 otherwise; ApiVersions
  (key 18) responses always use response header v0, so that a client can read the
  answer whatever version it asked for;
* an ApiVersions response whose error code is 35 (UNSUPPORTED_VERSION) carries a v0
  body, whatever version the request had (the broker could not parse it) -- see
  :func:`apiversions_body_version`.

Unknown API keys get header v1 (requests) / v0 (responses): the fields every header
version shares still decode and nothing past them is guessed.
"""

from __future__ import annotations

from kwsniff.kafka.protocol.schema import REQUEST, RESPONSE, is_flexible

CONTROLLED_SHUTDOWN = 7
API_VERSIONS = 18
UNSUPPORTED_VERSION = 35


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if is_flexible(api_key, api_version, REQUEST) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, api_version, RESPONSE) else 0


def apiversions_body_version(api_version: int, error_code: int | None) -> int:
    """Body version of an ApiVersions response: v0 when the broker said UNSUPPORTED_VERSION."""
    if error_code == UNSUPPORTED_VERSION:
        return 0
    return api_version
