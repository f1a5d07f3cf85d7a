"""The manifest written next to every capture: what the clients really did.

Everything here is recorded on the client side (delivery reports, consumed
messages, admin results, the clients' own request logs), never decoded from the
capture. The format is documented in ``pcaps/README.md`` and checked against
``manifest_schema.json``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Sequence

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("manifest_schema.json")

# Values up to this size are written out (utf8 or base64); larger ones as sha256 + length.
INLINE_LIMIT = 4096


def encode_bytes(data: bytes | str | None) -> dict[str, Any] | None:
    """Encode a key, value or header value for JSON.

    ``None`` stays ``None`` (a null key/value); otherwise one of
    ``{"length", "utf8"}``, ``{"length", "base64"}`` or, above :data:`INLINE_LIMIT`
    bytes, ``{"length", "sha256"}``.
    """
    if data is None:
        return None
    if isinstance(data, str):
        data = data.encode()
    if len(data) > INLINE_LIMIT:
        return {"length": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"length": len(data), "base64": base64.b64encode(data).decode("ascii")}
    return {"length": len(data), "utf8": text}


def decode_bytes(enc: dict[str, Any] | None) -> bytes | None:
    """Inverse of :func:`encode_bytes` (``None`` for a digest-only value)."""
    if enc is None:
        return None
    if "utf8" in enc:
        return enc["utf8"].encode("utf-8")
    if "base64" in enc:
        return base64.b64decode(enc["base64"])
    return None


def encode_headers(headers: Iterable[tuple[str, bytes | str | None]] | None
                   ) -> list[dict[str, Any]]:
    return [{"key": k, "value": encode_bytes(v)} for k, v in (headers or [])]


class Manifest:
    """Accumulates one scenario's facts; :meth:`to_dict` gives the JSON document."""

    def __init__(self, scenario: str, capture_file: str, description: str) -> None:
        self.data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "scenario": scenario,
            "capture_file": capture_file,
            "description": description,
            "generated_by": "tools/make_pcaps.py",
            "generated_at": None,
            "environment": {},
            "capture": {},
            "brokers": [],
            "clients": [],
            "topics": [],
            "produced": [],
            "consumed": [],
            "groups": [],
            "transactions": [],
            "admin_operations": [],
            "requests": [],
            "setup": {"description": "", "produced": []},
            "notes": [],
        }

    # -- who -------------------------------------------------------------------------
    def add_broker(self, *, software: str, version: str, node_id: int, host: str,
                   port: int) -> None:
        self.data["brokers"].append({"software": software, "version": version,
                                     "node_id": node_id, "host": host, "port": port})

    def add_client(self, *, client_id: str, library: str, library_version: str,
                   role: str, api_version: str | None = None,
                   config: dict[str, Any] | None = None, **extra: Any) -> None:
        entry = {"client_id": client_id, "library": library,
                 "library_version": library_version, "role": role,
                 "forced_api_version": api_version, "config": config or {}}
        entry.update(extra)
        self.data["clients"].append(entry)

    def add_topic(self, name: str, partitions: int, created_by: str,
                  **extra: Any) -> None:
        entry = {"name": name, "partitions": partitions, "created_by": created_by}
        entry.update(extra)
        self.data["topics"].append(entry)

    # -- data ------------------------------------------------------------------------
    def produced(self, *, client_id: str, topic: str, partition: int | None,
                 offset: int | None, key: bytes | str | None, value: bytes | str | None,
                 headers: Sequence[tuple[str, bytes | str | None]] | None = None,
                 codec: str = "none", acks: int | None = None, error: str | None = None,
                 timestamp: int | None = None, setup: bool = False,
                 **extra: Any) -> dict[str, Any]:
        """One message handed to a producer, with its delivery result.

        ``offset`` is the offset the broker acknowledged (``None`` when unknown, e.g.
        acks=0 or a failed delivery); ``error`` the delivery error name, if any. The
        returned entry may be completed later (delivery reports arrive asynchronously).
        """
        entry = {"client_id": client_id, "topic": topic, "partition": partition,
                 "offset": offset, "key": encode_bytes(key), "value": encode_bytes(value),
                 "headers": encode_headers(headers), "codec": codec, "acks": acks,
                 "timestamp": timestamp, "error": error}
        entry.update(extra)
        (self.data["setup"]["produced"] if setup else self.data["produced"]).append(entry)
        return entry

    def consumed(self, *, client_id: str, topic: str, partition: int, offset: int,
                 key: bytes | str | None, value: bytes | str | None,
                 headers: Sequence[tuple[str, bytes | str | None]] | None = None,
                 timestamp: int | None = None, **extra: Any) -> None:
        entry = {"client_id": client_id, "topic": topic, "partition": partition,
                 "offset": offset, "key": encode_bytes(key), "value": encode_bytes(value),
                 "headers": encode_headers(headers), "timestamp": timestamp}
        entry.update(extra)
        self.data["consumed"].append(entry)

    def add_group(self, group_id: str, members: list[str],
                  committed: list[dict[str, Any]], **extra: Any) -> None:
        entry = {"group_id": group_id, "members": members, "committed": committed}
        entry.update(extra)
        self.data["groups"].append(entry)

    def add_transaction(self, transactional_id: str, outcome: str, messages: int,
                        **extra: Any) -> None:
        entry = {"transactional_id": transactional_id, "outcome": outcome,
                 "messages": messages}
        entry.update(extra)
        self.data["transactions"].append(entry)

    def admin(self, *, client_id: str, operation: str, api: str | None,
              arguments: Any, result: Any, sent: bool = True) -> None:
        """An admin call; ``sent`` is False when the client refused it locally."""
        self.data["admin_operations"].append({
            "client_id": client_id, "operation": operation, "api": api,
            "arguments": arguments, "result": result, "sent": sent})

    def authentication(self, *, client_id: str, mechanism: str, username: str,
                       outcome: str, handshake: str) -> None:
        """One SASL attempt: the mechanism and user the client tried, how it went (the
        client's own words) and which handshake it used."""
        self.data.setdefault("authentications", []).append({
            "client_id": client_id, "mechanism": mechanism, "username": username,
            "outcome": outcome, "handshake": handshake})

    def note(self, text: str) -> None:
        self.data["notes"].append(text)

    def to_dict(self) -> dict[str, Any]:
        return self.data


def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def validate(doc: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` when ``doc`` breaks the manifest schema."""
    import jsonschema

    jsonschema.validate(doc, load_schema())
