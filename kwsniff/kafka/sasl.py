"""SASL tokens: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER (and GSSAPI recognised).

Contract:

* :func:`decode_sasl_token` decodes one token (a SaslAuthenticate ``AuthBytes`` field, or
  a raw length-prefixed token sent after SaslHandshake v0, without its length prefix)
  into a dict and never raises. ``mechanism`` is the mechanism negotiated in
  SaslHandshake when known; without it the token's shape decides.
* Secrets (PLAIN passwords, SCRAM client proofs and server signatures, OAUTHBEARER
  tokens' signatures... the whole token) are replaced by :data:`REDACTED` unless
  ``show_secrets`` is true. ``secret_spans`` lists the ``[start, end)`` byte ranges of the
  token that hold secrets (for hex views); :func:`redact_token` masks them.
* Result keys: ``mechanism``, ``message`` (``initial-response``, ``client-first``,
  ``server-first``, ``client-final``, ``server-final``, ``server-error``, ``empty``,
  ``opaque``...), mechanism-specific fields, ``redacted`` (bool), ``secret_spans``, and
  ``problems`` when the token does not parse as expected. :func:`token_user` and
  :func:`token_error` read the user and the error out of a result.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from kwsniff.kafka.nesting import deeper_than

REDACTED = "<redacted>"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


def decode_sasl_token(data: bytes | None, mechanism: str | None = None, *,
                      from_client: bool | None = None, show_secrets: bool = False) -> dict[str, Any]:
    """Decode one SASL token; see the module contract."""
    out: dict[str, Any]
    mech = (mechanism or "").upper() or None
    try:
        out = _decode(bytes(data or b""), mech, from_client, show_secrets)
    except Exception as exc:  # never raise on bad input
        # fail closed: a token that could not be understood may hold a secret anywhere
        size = len(data or b"")
        out = {"mechanism": mech, "message": "undecodable", "problems": [f"{type(exc).__name__}: {exc}"],
               "secret_spans": [[0, size]] if size else []}
    out.setdefault("mechanism", mech)
    out.setdefault("secret_spans", [])
    out["redacted"] = bool(out["secret_spans"]) and not show_secrets
    return out


def token_user(data: dict[str, Any]) -> str | None:
    """The user a decoded token names (PLAIN/SCRAM ``username``, ``user``, OAUTHBEARER
    ``authzid``), if any."""
    for key in ("username", "user", "authzid"):
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def token_error(data: dict[str, Any]) -> str | None:
    """The error a decoded token carries (SCRAM ``e=``, OAUTHBEARER's JSON ``status``);
    ``""`` for an error without a text; None when there is none."""
    error = data.get("error")
    if isinstance(error, dict):          # OAUTHBEARER's JSON error document
        status = error.get("status")
        return status if isinstance(status, str) else ""
    return error if isinstance(error, str) and error else None


def redact_token(data: bytes, spans: list[list[int]] | list[tuple[int, int]]) -> bytes:
    """``data`` with every byte inside ``spans`` replaced by ``*``."""
    buf = bytearray(data)
    for start, end in spans:
        buf[start:end] = b"*" * (end - start)
    return bytes(buf)


def _decode(data: bytes, mech: str | None, from_client: bool | None, show: bool) -> dict[str, Any]:
    if not data:
        return {"message": "empty"}
    if mech == "PLAIN" or (mech is None and _looks_plain(data)):
        if from_client is not False:
            return _plain(data, show)
    if mech == "OAUTHBEARER" or (mech is None and (b"\x01auth=" in data or data == b"\x01"
                                                  or data.startswith(b"{"))):
        if data.startswith(b"{") and from_client is not True and b"\x01auth=" not in data:
            return _oauth_server(data)      # (a client message carries auth=: mask it)
        if data == b"\x01":
            return {"mechanism": "OAUTHBEARER", "message": "client-ack",
                    "note": "client acknowledges the server's error (RFC 7628 kvsep)"}
        if b"\x01" in data:
            return _oauth_client(data, show)
    if mech is None or mech.startswith("SCRAM"):
        scram = _scram(data, show)
        if scram is not None:
            if mech:
                scram["mechanism"] = mech
            return scram
    if mech == "GSSAPI" or (mech is None and data[:1] in (b"\x60", b"\x05", b"\x04")):
        return {"mechanism": "GSSAPI", "message": "opaque", "length": len(data),
                "note": "Kerberos (GSSAPI) token; not decoded"}
    out: dict[str, Any] = {"message": "opaque", "length": len(data)}
    if mech:
        out["problems"] = [f"token does not look like {mech}"]
    return out


# -- PLAIN (RFC 4616): [authzid] NUL authcid NUL passwd ---------------------------------

def _looks_plain(data: bytes) -> bool:
    return data.count(b"\x00") == 2 and not data.endswith(b"\x00\x00")


def _plain(data: bytes, show: bool) -> dict[str, Any]:
    parts = data.split(b"\x00")
    if len(parts) != 3:
        return {"mechanism": "PLAIN", "message": "initial-response", "length": len(data),
                "problems": [f"expected authzid NUL username NUL password, found {len(parts) - 1} NULs"],
                "secret_spans": [[0, len(data)]]}
    authzid, user, password = parts
    pw_start = len(authzid) + len(user) + 2
    return {
        "mechanism": "PLAIN", "message": "initial-response",
        "authzid": authzid.decode("utf-8", "replace"),
        "username": user.decode("utf-8", "replace"),
        "password": password.decode("utf-8", "replace") if show else REDACTED,
        "secret_spans": [[pw_start, len(data)]],
    }


# -- SCRAM (RFC 5802) -------------------------------------------------------------------

def _attrs(raw: bytes, offset: int) -> list[tuple[str, str, int]]:
    """``a=v,b=w`` -> [(name, value, byte position of value)] (values may contain '=')."""
    out = []
    pos = 0
    for item in raw.split(b","):
        name, eq, value = item.partition(b"=")
        out.append((name.decode("utf-8", "replace"), value.decode("utf-8", "replace"),
                    offset + pos + len(name) + len(eq)))
        pos += len(item) + 1
    return out


def _scram(data: bytes, show: bool) -> dict[str, Any] | None:
    mech = "SCRAM"
    if data[:2] in (b"n,", b"y,") or data.startswith(b"p="):
        # client-first: gs2-header (cbind flag, [authzid]) then n=user,r=nonce[,ext...]
        flag, _, rest = data.partition(b",")
        authz, _, bare = rest.partition(b",")
        attrs = _attrs(bare, len(flag) + len(authz) + 2)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            return None
        out: dict[str, Any] = {"mechanism": mech, "message": "client-first",
                               "gs2_header": (flag + b"," + authz + b",").decode("utf-8", "replace"),
                               "username": _scram_name(attrs[0][1]), "nonce": attrs[1][1]}
        if authz.startswith(b"a="):
            out["authzid"] = _scram_name(authz[2:].decode("utf-8", "replace"))
        ext = {n: v for n, v, _ in attrs[2:]}
        if ext:
            out["extensions"] = ext
        return out
    attrs = _attrs(data, 0)
    names = [a[0] for a in attrs]
    if names[:3] == ["r", "s", "i"]:
        out = {"mechanism": mech, "message": "server-first", "nonce": attrs[0][1],
               "salt": attrs[1][1]}
        try:
            out["iterations"] = int(attrs[2][1])
        except ValueError:
            out["problems"] = [f"iteration count {attrs[2][1]!r} is not a number"]
        return out
    if names[:1] == ["c"] and "r" in names and names[-1] == "p":
        return {"mechanism": mech, "message": "client-final",
                "channel_binding": attrs[0][1],
                "channel_binding_decoded": _b64text(attrs[0][1]),
                "nonce": dict((n, v) for n, v, _ in attrs)["r"],
                "proof": attrs[-1][1] if show else REDACTED,
                "secret_spans": [[attrs[-1][2], len(data)]]}
    if names == ["v"]:
        return {"mechanism": mech, "message": "server-final",
                "server_signature": attrs[0][1] if show else REDACTED,
                "secret_spans": [[attrs[0][2], len(data)]]}
    if names[:1] == ["e"]:
        return {"mechanism": mech, "message": "server-final", "error": attrs[0][1]}
    return None


def _scram_name(value: str) -> str:
    return value.replace("=2C", ",").replace("=3D", "=")


def _b64text(value: str) -> str | None:
    try:
        return base64.b64decode(value, validate=True).decode("utf-8", "replace")
    except (ValueError, UnicodeDecodeError):
        return None


# -- OAUTHBEARER (RFC 7628) -------------------------------------------------------------

def _oauth_client(data: bytes, show: bool) -> dict[str, Any]:
    header, sep, rest = data.partition(b"\x01")
    out: dict[str, Any] = {"mechanism": "OAUTHBEARER", "message": "initial-response",
                           "gs2_header": header.decode("utf-8", "replace")}
    for part in header.split(b","):
        if part.startswith(b"a="):
            out["authzid"] = _scram_name(part[2:].decode("utf-8", "replace"))
    pos = len(header) + len(sep)
    ext: dict[str, str] = {}
    spans: list[list[int]] = []
    for item in rest.split(b"\x01"):
        if item:
            k, eq, v = item.partition(b"=")
            if k == b"auth":
                scheme, space, token = v.partition(b" ")
                tok_start = pos + len(k) + len(eq) + len(scheme) + len(space)
                if not space or scheme.lower() != b"bearer":
                    # not "Bearer <token>": the whole value may be the credential
                    scheme, token, tok_start = b"", v, pos + len(k) + len(eq)
                    out["problems"] = ["auth value is not \"Bearer <token>\"; all of it is "
                                       "treated as the credential"]
                out["auth_scheme"] = scheme.decode("utf-8", "replace")
                out["token"] = token.decode("utf-8", "replace") if show else REDACTED
                jwt = _jwt_parts(token)
                if jwt:
                    out.update(jwt)
                spans.append([tok_start, tok_start + len(token)])
            else:
                ext[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
        pos += len(item) + 1
    if ext:
        out["extensions"] = ext
    if "token" not in out:
        out["problems"] = ["no auth=Bearer token in the initial response"]
    out["secret_spans"] = spans
    return out


def _jwt_parts(token: bytes) -> dict[str, Any] | None:
    """Header and claims of a JWT (never its signature): not secret, useful (exp, sub)."""
    pieces = token.split(b".")
    if len(pieces) != 3:
        return None
    out = {}
    for name, piece in (("token_header", pieces[0]), ("token_claims", pieces[1])):
        try:
            raw = base64.urlsafe_b64decode(piece + b"=" * (-len(piece) % 4))
            out[name] = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):   # (deeply nested JSON)
            return None
        if deeper_than(out[name]):
            return None
    return out


def _oauth_server(data: bytes) -> dict[str, Any]:
    try:
        err = json.loads(data)
        if deeper_than(err):
            raise ValueError("nested too deeply")
    except (ValueError, RecursionError):
        return {"mechanism": "OAUTHBEARER", "message": "server-error",
                "error_text": data.decode("utf-8", "replace"),
                "problems": ["server error is not valid JSON"]}
    return {"mechanism": "OAUTHBEARER", "message": "server-error", "error": err}


def decode_token(token: bytes | None, mechanism: str | None = None, from_client: bool | None = None,
                 show_secrets: bool = False) -> dict[str, Any]:
    """Positional-friendly alias of :func:`decode_sasl_token` (the conversation layer's
    entry point for raw tokens after SaslHandshake v0)."""
    return decode_sasl_token(token, mechanism, from_client=from_client, show_secrets=show_secrets)
