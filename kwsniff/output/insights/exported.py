"""Exchanges read back from the JSON export, in the shape the insights collector reads.

Contract: :func:`exchange_from_export` turns one exported exchange (a ``kind:
"exchange"`` object of :mod:`kwsniff.output.jsonl`, or a row with the same field
names, its ``request``/``response`` as objects or as their JSON text) into an object
with the attributes :class:`kwsniff.output.insights.InsightsCollector` reads from an
engine exchange: ``api_key, protocol, stream, client (ip, port), client_id,
correlation_id, index, ts`` and ``request``/``response`` messages with ``body``,
``ts_first``, ``ts_last`` (and no deferred body). So ``kwsniff analyze`` runs the very
collector of ``kwsniff stats --insights`` over exports: one source for the logic.

Times come from the export: a request's first byte is ``ts`` (the exchange time),
its last ``request_end_ts``; a response's last byte is ``response_ts``; a response's
first byte is ``ts`` for an orphan response and otherwise not exported (the
collector reads it only for orphan responses; ``response_ts`` stands in). A message is
present unless the status says it is absent (``orphan_response``: no request;
``unanswered``, ``no_response_expected``: no response), even when its body could not
be decoded (then ``body`` is None, as in the engine). Record sets are the export's
summaries; the collector reads their ``batches`` headers
(:func:`kwsniff.output.insights.bodies.batches`). Malformed values read as None.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

NO_REQUEST = frozenset({"orphan_response"})
NO_RESPONSE = frozenset({"unanswered", "no_response_expected"})


class ExportedMessage:
    __slots__ = ("body", "deferred", "ts_first", "ts_last")

    def __init__(self, body: Any, ts_first: float | None, ts_last: float | None) -> None:
        self.body = body
        self.ts_first = ts_first
        self.ts_last = ts_last
        self.deferred = None


class ExportedExchange:
    __slots__ = (
        "api_key",
        "client",
        "client_id",
        "correlation_id",
        "index",
        "protocol",
        "request",
        "response",
        "stream",
        "ts",
    )

    def __init__(self, **fields: Any) -> None:
        for name in self.__slots__:
            setattr(self, name, fields.get(name))


def _body(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _address(value: Any) -> tuple[str, int | None]:
    """``"ip:port"`` / ``"[ip6]:port"`` as ``(ip, port)``."""
    if not isinstance(value, str):
        return ("?", None)
    host, sep, port = value.rpartition(":")
    if not sep:
        return (value, None)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return (host, int(port) if port.isdigit() else None)


def exchange_from_export(obj: Mapping[str, Any]) -> ExportedExchange:
    """See the module contract."""
    get = obj.get
    status = get("status")
    ts = _number(get("ts"))
    response_ts = _number(get("response_ts"))
    request = None
    if status not in NO_REQUEST:
        end = _number(get("request_end_ts")) if "request_end_ts" in obj else None
        request = ExportedMessage(_body(get("request")), ts, end if end is not None else ts)
    response = None
    if status not in NO_RESPONSE:
        first = ts if request is None else response_ts
        response = ExportedMessage(_body(get("response")), first, response_ts)
    client_id = get("client_id")
    return ExportedExchange(
        api_key=_int(get("api_key")), protocol=get("protocol"), stream=_int(get("stream")),
        client=_address(get("client")),
        client_id=client_id if isinstance(client_id, str) else None,
        correlation_id=_int(get("correlation_id")), index=_int(get("index")), ts=ts,
        request=request, response=response)
