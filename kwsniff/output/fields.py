"""The documented exchange fields used by display filters, statistics and the TUI.

Contract:

* :data:`FIELDS` maps a field name to its :class:`FieldSpec`: type, whether it is
  multi-valued, a one-line description, and ``get(facts)`` returning the value for an
  :class:`~kwsniff.output.facts.ExchangeFacts` (a scalar or None; a list for
  multi-valued fields, empty when absent).
* Types: ``"int"``, ``"number"`` (float), ``"string"``, ``"name"`` (string compared
  case-insensitively: api, status), ``"error"`` (error codes, compared by number or by
  name), ``"address"`` (``"ip:port"``, compared with or without the port).
* :func:`field_help` lists ``(name, type, description)`` for ``--help``-style listings and
  completion; ``docs/display-filters.md`` documents the same list. Plugins add fields
  named ``"<plugin>.<field>"`` through :mod:`kwsniff.output.extra_fields`; they are
  listed after the built-in ones.
* Run-state fields (``run_state=True``: ``e2e_latency_ms``, ``e2e_latency_min_ms``,
  ``consumer_group``) are not functions of one exchange: a display filter naming one
  binds their ``get`` to the values a streaming insights pass over the whole run gives
  each exchange (:mod:`kwsniff.output.insights.annotate`); that pass runs only for such
  filters. Their ``get`` here is the value when the pass gave none (absent latency;
  ``consumer_group``: the body group ids, as ``group``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kwsniff.kafka.model import STATUSES
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.names import api_label, api_names, error_names
from kwsniff.output.sasl_auth import sasl_error, sasl_mechanism, sasl_user


def format_address(addr: tuple[str, int] | None) -> str:
    """``"ip:port"``; IPv6 addresses in brackets (``"[::1]:9092"``)."""
    if not addr:
        return ""
    ip, port = addr[0], addr[1]
    if ":" in ip:
        return f"[{ip}]:{port}"
    return f"{ip}:{port}"


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One filterable field of an exchange."""

    name: str
    type: str
    multi: bool
    description: str
    get: Callable[[ExchangeFacts], Any]
    choices: Callable[[], list[str]] | None = None   # known values, for completion
    run_state: bool = False     # value from the run's insights pass (module contract)

    @property
    def numeric(self) -> bool:
        return self.type in ("int", "number")


def _api(f: ExchangeFacts) -> str | None:
    ex = f.exchange
    return api_label(ex.api_key, ex.protocol) if ex.api_key is not None else None


def _frames(f: ExchangeFacts) -> list[int]:
    out: dict[int, None] = {}
    for msg in (f.exchange.request, f.exchange.response):
        if msg is not None:
            out[msg.frame_first] = None
            out[msg.frame_last] = None
    return list(out)


def _records(f: ExchangeFacts) -> int | None:
    return f.record_count if f.has_records else None


def _acks(f: ExchangeFacts) -> int | None:
    req = f.exchange.request
    if req is None or req.api_key != 0 or not isinstance(req.body, dict):
        return None
    acks = req.body.get("Acks", req.body.get("RequiredAcks"))
    return acks if type(acks) is int else None


def _bytes(f: ExchangeFacts) -> int:
    return f.total_bytes


#: body fields holding a group generation (or KIP-848 member epoch), per API key, for the
#: request and the response: (api key, request fields, response fields)
_GENERATION_FIELDS: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {
    8: (("GenerationIdOrMemberEpoch", "GenerationId"), ()),       # OffsetCommit
    11: ((), ("GenerationId",)),                                   # JoinGroup
    12: (("GenerationId",), ()),                                   # Heartbeat
    14: (("GenerationId",), ()),                                   # SyncGroup
    28: (("GenerationId",), ()),                                   # TxnOffsetCommit v3+
    68: (("MemberEpoch",), ("MemberEpoch",)),                      # ConsumerGroupHeartbeat
}


def _generations(f: ExchangeFacts) -> list[int]:
    """Group generations (member epochs) the exchange's bodies carry, -1 excluded."""
    ex = f.exchange
    fields = _GENERATION_FIELDS.get(ex.api_key) if ex.protocol == "kafka" else None
    if fields is None:
        return []
    out: list[int] = []
    for msg, names in ((ex.request, fields[0]), (ex.response, fields[1])):
        body = msg.body if msg is not None and names else None
        if not isinstance(body, dict):
            continue
        for name in names:
            v = body.get(name)
            if isinstance(v, int) and not isinstance(v, bool):
                if v >= 0 and v not in out:
                    out.append(v)
                break
    return out


def _absent(f: ExchangeFacts) -> None:
    return None


def _ports(f: ExchangeFacts) -> list[int]:
    ex = f.exchange
    return [end[1] for end in (ex.client, ex.broker) if end is not None]


def _addresses(f: ExchangeFacts) -> list[str]:
    ex = f.exchange
    return [format_address(end) for end in (ex.client, ex.broker) if end is not None]


def _statuses() -> list[str]:
    return list(STATUSES)


_SPECS = [
    FieldSpec("api", "name", False,
              "API name, e.g. \"Produce\" (case-insensitive; a number compares the API key)",
              _api, api_names),
    FieldSpec("api_key", "int", False, "API key number, e.g. 0 for Produce",
              lambda f: f.exchange.api_key),
    FieldSpec("version", "int", False, "API version of the request",
              lambda f: f.exchange.api_version),
    FieldSpec("correlation_id", "int", False, "correlation id (absent for the 0.7 protocol)",
              lambda f: f.exchange.correlation_id),
    FieldSpec("client_id", "string", False, "client id from the request header",
              lambda f: f.exchange.client_id),
    FieldSpec("status", "name", False,
              "paired, no_response_expected, unanswered or orphan_response",
              lambda f: f.exchange.status, _statuses),
    FieldSpec("client", "address", False,
              "client address \"ip:port\" (compare with \"ip\" alone to ignore the port)",
              lambda f: format_address(f.exchange.client)),
    FieldSpec("broker", "address", False,
              "broker address \"ip:port\" (compare with \"ip\" alone to ignore the port)",
              lambda f: format_address(f.exchange.broker)),
    FieldSpec("client_port", "int", False, "client TCP port",
              lambda f: f.exchange.client[1] if f.exchange.client else None),
    FieldSpec("broker_port", "int", False, "broker TCP port",
              lambda f: f.exchange.broker[1] if f.exchange.broker else None),
    FieldSpec("port", "int", True, "either TCP port, the client's or the broker's",
              _ports),
    FieldSpec("address", "address", True,
              "either address \"ip:port\", the client's or the broker's (compare with "
              "\"ip\" alone to ignore the port)", _addresses),
    FieldSpec("stream", "int", False, "TCP connection index (like tshark's tcp.stream)",
              lambda f: f.exchange.stream),
    FieldSpec("exchange", "int", False, "exchange number (1-based, capture order)",
              lambda f: f.exchange.index),
    FieldSpec("frame", "int", True,
              "capture frames where the request and response start and end",
              _frames),
    FieldSpec("protocol", "string", False, "kafka, kafka-0.7 or kafka-sasl (raw SASL tokens)",
              lambda f: f.exchange.protocol),
    FieldSpec("ts", "number", False,
              "exchange time, epoch seconds: the request's first frame (the response's "
              "for an orphan response)",
              lambda f: f.exchange.ts),
    FieldSpec("latency_ms", "number", False, "request -> response time in milliseconds",
              lambda f: f.exchange.latency_ms),
    FieldSpec("topic", "string", True, "topic names touched by request or response",
              lambda f: f.topics),
    FieldSpec("topic_id", "string", True, "topic ids (UUID text) in request or response",
              lambda f: f.topic_ids),
    FieldSpec("partition", "int", True, "partition indexes in request or response",
              lambda f: f.partitions),
    FieldSpec("group", "string", True,
              "group ids in the bodies (GroupId, FindCoordinator keys; a Fetch has none: "
              "see consumer_group)",
              lambda f: f.groups),
    FieldSpec("consumer_group", "string", True,
              "group of the exchange: a Fetch's group learnt from its connection's (else its "
              "client's) group requests, else the GroupId the bodies carry (whole-run pass)",
              lambda f: f.groups, run_state=True),
    FieldSpec("generation", "int", True,
              "group generation: JoinGroup response, Heartbeat/SyncGroup/OffsetCommit/"
              "TxnOffsetCommit request GenerationId, ConsumerGroupHeartbeat MemberEpoch "
              "(-1 excluded)", _generations),
    FieldSpec("member", "string", True, "group member ids",
              lambda f: f.members),
    FieldSpec("transactional_id", "string", True, "transactional ids",
              lambda f: f.transactional_ids),
    FieldSpec("producer_id", "int", True, "producer ids (-1 excluded)",
              lambda f: f.producer_ids),
    FieldSpec("error", "error", True,
              "non-zero error codes in the response; compare with a name "
              "(\"NOT_LEADER_OR_FOLLOWER\", case-insensitive) or a number",
              lambda f: f.error_codes, error_names),
    FieldSpec("acks", "int", False, "Produce request acks (0, 1 or -1)", _acks),
    FieldSpec("e2e_latency_ms", "number", False,
              "Fetch: largest end-to-end latency (Produce request first byte -> this Fetch "
              "response last byte, ms) of the batches produced in the capture it delivers "
              "first to its group (whole-run pass)", _absent, run_state=True),
    FieldSpec("e2e_latency_min_ms", "number", False,
              "Fetch: smallest such latency of the batches it delivers first to its group "
              "(whole-run pass)", _absent, run_state=True),
    FieldSpec("records", "int", False,
              "records carried by request and response (absent when no record sets)",
              _records),
    FieldSpec("sasl_mechanism", "string", False,
              "SASL mechanism of a SaslHandshake, SaslAuthenticate or raw SASL token exchange",
              sasl_mechanism),
    FieldSpec("sasl_user", "string", False,
              "user name in a SASL token (PLAIN, SCRAM client-first, OAUTHBEARER authzid)",
              sasl_user),
    FieldSpec("sasl_error", "string", False,
              "error inside a SASL token, e.g. SCRAM \"unknown-user\", "
              "\"invalid-proof\" (the Kafka error code may be 0)",
              sasl_error),
    FieldSpec("bytes", "int", False, "request + response size on the wire, with size prefixes",
              _bytes),
    FieldSpec("request_bytes", "int", False, "request size on the wire",
              lambda f: f.request_bytes),
    FieldSpec("response_bytes", "int", False, "response size on the wire",
              lambda f: f.response_bytes),
    FieldSpec("problem", "string", True, "decode problems of the exchange (text)",
              lambda f: f.exchange.all_problems()),
    FieldSpec("tls", "string", False,
              "TLS version when the exchange came over TLS decrypted with --tls-keylog "
              "(\"tls\" alone: any decrypted exchange)",
              lambda f: f.exchange.tls.version_name if f.exchange.tls is not None else None),
    FieldSpec("tls.version", "string", False, "TLS version, e.g. \"TLS 1.3\"",
              lambda f: f.exchange.tls.version_name if f.exchange.tls is not None else None),
    FieldSpec("tls.suite", "string", False,
              "TLS cipher suite, e.g. \"TLS_AES_128_GCM_SHA256\"",
              lambda f: f.exchange.tls.suite_name if f.exchange.tls is not None else None),
    FieldSpec("tls.sni", "string", False, "server name the TLS client asked for (SNI)",
              lambda f: f.exchange.tls.sni if f.exchange.tls is not None else None),
]

#: All filter fields by name, in documentation order.
FIELDS: dict[str, FieldSpec] = {spec.name: spec for spec in _SPECS}


#: Wireshark/tshark field names accepted in display filters for the kwsniff field they
#: mean (an exchange is a request and its response, so the names of one packet's
#: direction have no alias: see :data:`WIRESHARK_HINTS`).
WIRESHARK_ALIASES: dict[str, str] = {
    "kafka.api_key": "api_key",
    "kafka.request_key": "api_key",
    "kafka.api_version": "version",
    "kafka.request_version": "version",
    "kafka.correlation_id": "correlation_id",
    "kafka.client_id": "client_id",
    "kafka.topic_name": "topic",
    "kafka.partition_id": "partition",
    "kafka.error": "error",
    "kafka.group_id": "group",
    "kafka.member_id": "member",
    "kafka.transactional_id": "transactional_id",
    "kafka.producer_id": "producer_id",
    "kafka.required_acks": "acks",
    "tcp.port": "port",
    "tcp.stream": "stream",
    "ip.addr": "address",
    "ipv6.addr": "address",
    "frame.number": "frame",
    "frame.time_epoch": "ts",
}

#: Wireshark names of one direction of a packet, answered with the kwsniff fields to use
WIRESHARK_HINTS: dict[str, str] = {
    "tcp.srcport": "client_port or broker_port",
    "tcp.dstport": "client_port or broker_port",
    "ip.src": "client or broker",
    "ip.dst": "client or broker",
    "ipv6.src": "client or broker",
    "ipv6.dst": "client or broker",
}


def canonical_field(name: str) -> str | None:
    """The field ``name`` (case-insensitive) means — itself or the field a Wireshark
    alias names — or None when it is neither."""
    low = name.lower()
    if low in FIELDS:
        return low
    return WIRESHARK_ALIASES.get(low)


def alias_help() -> list[tuple[str, str, str]]:
    """``(wireshark name, type, "same as FIELD")`` of every alias, in table order."""
    rows = []
    for alias, name in WIRESHARK_ALIASES.items():
        spec = FIELDS[name]
        rows.append((alias, spec.type + ("[]" if spec.multi else ""), f"same as {name}"))
    return rows


def run_state_fields() -> frozenset[str]:
    """Names of the run-state fields (module contract)."""
    return frozenset(s.name for s in FIELDS.values() if s.run_state)


def field_help() -> list[tuple[str, str, str]]:
    """``(name, type, description)`` of every field, in documentation order."""
    return [(s.name, s.type + ("[]" if s.multi else ""), s.description)
            for s in FIELDS.values()]
