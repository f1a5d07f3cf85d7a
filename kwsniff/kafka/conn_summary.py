"""Per-connection facts gathered while decoding (for ``stats``, the TUI and reports).

Contract: a :class:`ConnectionSummary` is owned and updated by its conversation; readers
treat it as read-only.  Every collection in it is bounded (client ids, problems).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kwsniff.kafka.protocol import schema as _schema

MAX_CLIENT_IDS = 16
MAX_PROBLEMS = 50


@dataclass(slots=True)
class ConnectionSummary:
    stream: int                                   # TCP connection index (tcp.stream)
    client: tuple[str, int] | None = None
    broker: tuple[str, int] | None = None
    protocol: str = "undecided"                   # kafka, kafka-0.7, tls, other, undecided
    detected_by: str = ""                         # why it is (not) Kafka
    client_side_by: str = ""                      # syn, port, content
    first_ts: float = 0.0
    last_ts: float = 0.0
    # bytes of Kafka frames, size prefixes included (skipped bytes are not counted)
    bytes_from_client: int = 0
    bytes_from_broker: int = 0
    # captured bytes of the frames kept (the two above plus bytes captured after a hole
    # inside a frame): with skipped_bytes and the framers' holes, every stream byte
    frame_bytes: int = 0
    stream_bytes: int = 0     # (at close) both directions' bytes from the first seen to the end
    # holes before a late-learned connection's first decoded byte (bytes not delivered
    # while it was judged not Kafka): stream_bytes = frame_bytes + skipped_bytes +
    # gap_bytes + this
    not_kafka_bytes: int = 0
    client_ids: list[str | None] = field(default_factory=list)
    api_versions: dict[int, tuple[int, int]] = field(default_factory=dict)  # from ApiVersions
    api_versions_frame: int | None = None         # frame of that ApiVersions response
    requests: dict[int, int] = field(default_factory=dict)        # api key -> count
    versions_used: dict[int, list[int]] = field(default_factory=dict)  # api key -> versions
    statuses: dict[str, int] = field(default_factory=dict)
    error_responses: int = 0                      # responses with a non-zero error code
    errors: dict[int, int] = field(default_factory=dict)          # error code -> count
    sasl_mechanism: str | None = None
    skipped_bytes: int = 0
    gaps: int = 0
    gap_bytes: int = 0
    resyncs: int = 0
    problems: list[str] = field(default_factory=list)
    problems_dropped: int = 0
    tls: Any = None                               # kwsniff.tls.TlsInfo of a TLS connection

    def add_problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)
        else:
            self.problems_dropped += 1

    def note_client_id(self, client_id: str | None) -> None:
        ids = self.client_ids
        if client_id not in ids and len(ids) < MAX_CLIENT_IDS:
            ids.append(client_id)

    def note_request(self, api_key: int | None, api_version: int | None) -> None:
        if api_key is None:
            return
        self.requests[api_key] = self.requests.get(api_key, 0) + 1
        if api_version is not None:
            used = self.versions_used.get(api_key)
            if used is None:
                self.versions_used[api_key] = [api_version]
            elif api_version not in used:
                used.append(api_version)

    def note_errors(self, body: dict[str, Any] | None, api_key: int | None = None,
                    version: int | None = None) -> None:
        """Count the non-zero ``ErrorCode`` fields of a decoded response body (only the
        paths where the schema of ``api_key``/``version`` has error codes, when given)."""
        if not body:
            return
        codes: list[int] = []
        plan = error_plan(api_key, version) if api_key is not None and version is not None else None
        if plan is None:
            _collect_errors(body, codes, 0, [0])
        else:
            _collect_planned(body, plan, codes)
        if codes:
            self.error_responses += 1
            for c in codes:
                self.errors[c] = self.errors.get(c, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "stream": self.stream, "client": self.client, "broker": self.broker,
            "protocol": self.protocol, "detected_by": self.detected_by,
            "client_side_by": self.client_side_by, "first_ts": self.first_ts,
            "last_ts": self.last_ts, "bytes_from_client": self.bytes_from_client,
            "bytes_from_broker": self.bytes_from_broker, "client_ids": list(self.client_ids),
            "api_versions": dict(self.api_versions), "requests": dict(self.requests),
            "versions_used": {k: list(v) for k, v in self.versions_used.items()},
            "statuses": dict(self.statuses), "error_responses": self.error_responses,
            "errors": dict(self.errors), "sasl_mechanism": self.sasl_mechanism,
            "skipped_bytes": self.skipped_bytes, "gaps": self.gaps, "gap_bytes": self.gap_bytes,
            "resyncs": self.resyncs, "problems": list(self.problems),
            "problems_dropped": self.problems_dropped,
        }


_WALK_LIMIT = 5000


def _collect_errors(node: dict[str, Any], out: list[int], depth: int, seen: list[int]) -> None:
    seen[0] += 1
    if seen[0] > _WALK_LIMIT or depth > 5:
        return
    code = node.get("ErrorCode")
    if isinstance(code, int) and code != 0:
        out.append(code)
    for v in node.values():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            for item in v:
                if isinstance(item, dict):
                    _collect_errors(item, out, depth + 1, seen)
        elif isinstance(v, dict):
            _collect_errors(v, out, depth + 1, seen)


Plan = tuple  # (has ErrorCode here, ((field, sub plan), ...))


@lru_cache(maxsize=2048)
def error_plan(api_key: int, version: int) -> Plan | None:
    """Where a response of this version can hold ``ErrorCode`` fields (None: unknown)."""
    seg = _schema.message_schema(api_key, _schema.RESPONSE, version)
    if seg is None:
        return None
    return _plan(seg[4], version, 0) or (False, ())


def _plan(fields: Any, version: int, depth: int) -> Plan | None:
    if depth > 6:
        return None
    here = False
    subs = []
    for row in fields or ():
        if not _schema.in_range(version, row[_schema.F_VERSIONS]):
            continue
        if row[_schema.F_NAME] == "ErrorCode":
            here = True
        elif row[_schema.F_CHILDREN]:
            sub = _plan(row[_schema.F_CHILDREN], version, depth + 1)
            if sub is not None:
                subs.append((row[_schema.F_NAME], sub))
    if not here and not subs:
        return None
    return (here, tuple(subs))


def _collect_planned(node: dict[str, Any], plan: Plan, out: list[int]) -> None:
    here, subs = plan
    if here:
        code = node.get("ErrorCode")
        if code and isinstance(code, int):
            out.append(code)
    for name, sub in subs:
        v = node.get(name)
        if isinstance(v, list):
            for item in v:
                if isinstance(item, dict):
                    _collect_planned(item, sub, out)
        elif isinstance(v, dict):
            _collect_planned(v, sub, out)
