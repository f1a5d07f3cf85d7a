"""Embedded data: SASL tokens (PLAIN, SCRAM, OAUTHBEARER, GSSAPI, unknown), the
consumer protocol (subscriptions, assignments), coordinator records of internal topics
and KRaft metadata records.

Input: ``[mode][split: uint16][bytes]``. Invariants: nothing raises; no internal error;
SASL secret spans lie inside the token and, unless secrets are shown, no secret of
six or more bytes appears in the decoded output and an OAUTHBEARER credential is
always masked.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Iterable

from fuzz import checks
from fuzz import seeds as _seeds
from kwsniff.kafka import embedded, internal_topics, sasl
from kwsniff.kafka.records import Records
from kwsniff.output.jsonl import json_default

MAX_LEN = 4096
MECHANISMS = (None, "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", "X")
COORDINATORS = ("group", "transaction", "share")


def _jwt() -> bytes:
    part = base64.urlsafe_b64encode(json.dumps({"sub": "alice", "exp": 1}).encode()).rstrip(b"=")
    return b"eyJhbGciOiJub25lIn0." + part + b".c2lnbmF0dXJl"


def seeds() -> Iterable[bytes]:
    deep = base64.urlsafe_b64encode(b"[" * 1400 + b"]" * 1400).rstrip(b"=")
    tokens = [b"\x00alice\x00s3cr3t-password", b"n,,n=alice,r=abcdefgh",
              b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0." + deep + b".c2ln\x01\x01",
              b"c=biws,r=abcdefghXYZ,p=cHJvb2ZwYXNzd29yZA==",
              b"r=abcdefghXYZ,s=c2FsdA==,i=4096", b"n,,\x01auth=Bearer " + _jwt() + b"\x01\x01"]
    for m in range(len(MECHANISMS)):
        for t in tokens:
            yield bytes([m]) + struct.pack(">H", 0) + t
    for data in _seeds.record_sets(2048):
        for r in Records(data).iter_records():
            if r.key:
                yield bytes([16]) + struct.pack(">H", len(r.key)) + bytes(r.key) + \
                    bytes(r.value or b"")


def _values(obj: object) -> Iterable[str]:
    """The JSON texts of every scalar value inside ``obj`` (not of its key names)."""
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _values(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _values(v)
    else:
        yield json.dumps(obj, default=json_default)


def _no_leak(token: bytes, out: dict, where: str) -> None:
    spans = out.get("secret_spans") or []
    # Only values are searched: key names are fixed words ("password") that a short
    # secret may be part of. Problem texts are fixed sentences: they may name a scheme
    # such as "Bearer".
    text = "\n".join(_values({k: v for k, v in out.items() if k != "problems"}))
    for span in spans:
        s, e = span
        checks.require(0 <= s <= e <= len(token), f"{where}: secret span {span} outside the "
                                                  f"{len(token)}-byte token")
        secret = token[s:e]
        if len(secret) < 6 or token.count(secret) > 1:
            continue
        try:
            shown = secret.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if shown.isprintable() and json.dumps(shown)[1:-1] in text:
            raise checks.Violation(f"{where}: secret bytes {secret!r} appear in the decoded "
                                   "token although secrets are hidden")


def _bearer_masked(token: bytes, out: dict, where: str) -> None:
    """An OAUTHBEARER client credential (``auth=Bearer <token>``, else the whole auth
    value) is always masked, every byte of it where it stands in the token (looked up
    by position: searching for its bytes cannot tell a credential made of ``*`` or one
    that overlaps its key, such as ``auth=====``)."""
    if out.get("mechanism") != "OAUTHBEARER" or b"\x01auth=" not in token:
        return
    red = sasl.redact_token(token, out.get("secret_spans") or [])
    at = token.index(b"\x01") + 1
    for item in token.split(b"\x01")[1:]:
        if item.startswith(b"auth="):
            scheme, space, cred = item[5:].partition(b" ")
            cred_at = at + 5 + len(scheme) + len(space)
            if not space or scheme.lower() != b"bearer":
                cred, cred_at = item[5:], at + 5
            checks.require(red[cred_at:cred_at + len(cred)] == b"*" * len(cred),
                           f"{where}: bearer credential {cred[:20]!r} at {cred_at} left "
                           "unmasked")
        at += len(item) + 1


def one_input(data: bytes) -> None:
    if len(data) < 3:
        return
    mode = data[0]
    split = struct.unpack_from(">H", data, 1)[0]
    body = data[3:]
    if mode < 16:
        mech = MECHANISMS[mode % len(MECHANISMS)]
        for from_client in (True, False, None):
            out = sasl.decode_sasl_token(body, mech, from_client=from_client)
            checks.check_problems(out.get("problems") or (), "sasl")
            _no_leak(body, out, f"SASL {mech}")
            if from_client is not False:
                _bearer_masked(body, out, f"SASL {mech}")
            red = sasl.redact_token(body, out.get("secret_spans") or [])
            checks.require(len(red) == len(body), "redaction changed the token's length")
        shown = embedded.decode_raw_sasl_token(body, mech, show_secrets=True)
        json.dumps(shown, default=json_default)
        return
    key, value = body[:split], body[split:]
    if mode < 32:
        for coordinator in COORDINATORS:
            k, v = internal_topics.decode_coordinator_record(coordinator, key, value or None)
            for part in (k, v):
                if part is not None:
                    checks.check_problems(part.get("problems") or (), coordinator)
                    json.dumps(part, default=json_default)
        return
    for out in (embedded.decode_subscription(body), embedded.decode_assignment(body),
                internal_topics.decode_metadata_value(body)):
        checks.check_problems(out.get("problems") or (), "embedded")
        json.dumps(out, default=json_default)
