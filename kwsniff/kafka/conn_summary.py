"""Per-connection facts gathered while decoding (for ``stats``, the TUI and reports).

Contract: a :class:`ConnectionSummary` is owned and updated by its conversation; readers
treat it as read-only.  Every collection in it is bounded (client ids, problems).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
    bytes_from_client: int = 0                    # TCP payload bytes
    bytes_from_broker: int = 0
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
            used = self.versions_used.setdefault(api_key, [])
            if api_version not in used:
                used.append(api_version)

    def note_errors(self, body: dict[str, Any] | None) -> None:
        """Count the non-zero ``ErrorCode`` fields of a decoded response body."""
        if not body:
            return
        codes: list[int] = []
        _collect_errors(body, codes, 0, [0])
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
