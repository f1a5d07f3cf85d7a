"""Handshake message parsing: ClientHello, ServerHello (and HelloRetryRequest),
Certificate subjects, KeyUpdate, plus a per-direction reassembler of handshake
messages (they span records and records hold several).

Parsers never raise on bad bytes: they return what they could read (``None`` fields
for what they could not) and set ``problem``.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field

CLIENT_HELLO, SERVER_HELLO, NEW_SESSION_TICKET, CERTIFICATE = 1, 2, 4, 11
FINISHED, KEY_UPDATE = 20, 24

#: ServerHello.random of a HelloRetryRequest (RFC 8446 section 4.1.3)
HRR_RANDOM = hashlib.sha256(b"HelloRetryRequest").digest()

EXT_SNI, EXT_ALPN, EXT_ETM, EXT_SUPPORTED_VERSIONS = 0, 16, 22, 43


class _Reader:
    __slots__ = ("b", "p", "end")

    def __init__(self, b: bytes, p: int = 0, end: int | None = None) -> None:
        self.b = b
        self.p = p
        self.end = len(b) if end is None else end

    def take(self, n: int) -> bytes:
        if self.p + n > self.end:
            raise ValueError("truncated")
        v = self.b[self.p:self.p + n]
        self.p += n
        return v

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return struct.unpack(">H", self.take(2))[0]

    def u24(self) -> int:
        return int.from_bytes(self.take(3), "big")

    def vec(self, width: int) -> bytes:
        n = int.from_bytes(self.take(width), "big")
        return self.take(n)


@dataclass(slots=True)
class Hello:
    """What a ClientHello or ServerHello says."""

    legacy_version: int | None = None
    random: bytes = b""
    session_id: bytes = b""
    suites: list[int] = field(default_factory=list)     # ClientHello: offered
    suite: int | None = None                            # ServerHello: chosen
    sni: str | None = None
    alpn: list[str] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)   # supported_versions (offered/chosen)
    etm: bool = False                                   # encrypt_then_mac extension
    problem: str | None = None

    @property
    def version(self) -> int | None:
        """The negotiated (ServerHello) or highest offered version."""
        if self.versions:
            return max(self.versions)
        return self.legacy_version

    @property
    def is_hrr(self) -> bool:
        return self.random == HRR_RANDOM


def _extensions(r: _Reader, h: Hello, server: bool) -> None:
    if r.p >= r.end:
        return
    ext = _Reader(r.b, 0, 0)
    data = r.vec(2)
    ext = _Reader(data)
    while ext.p < ext.end:
        etype = ext.u16()
        body = _Reader(ext.vec(2))
        if etype == EXT_SNI and not server and body.end:
            lst = _Reader(body.vec(2))
            while lst.p < lst.end:
                kind = lst.u8()
                name = lst.vec(2)
                if kind == 0:
                    h.sni = name.decode("ascii", "replace")
                    break
        elif etype == EXT_ALPN and body.end:
            lst = _Reader(body.vec(2))
            while lst.p < lst.end:
                h.alpn.append(lst.vec(1).decode("ascii", "replace"))
        elif etype == EXT_SUPPORTED_VERSIONS:
            if server:
                h.versions = [body.u16()]
            else:
                lst = _Reader(body.vec(1))
                while lst.p + 1 < lst.end:
                    v = lst.u16()
                    if (v & 0x0F0F) != 0x0A0A:          # skip GREASE values
                        h.versions.append(v)
        elif etype == EXT_ETM:
            h.etm = True


def parse_hello(body: bytes, server: bool) -> Hello:
    """Parse a ClientHello (``server=False``) or ServerHello body (after the 4-byte
    handshake header)."""
    h = Hello()
    r = _Reader(body)
    try:
        h.legacy_version = r.u16()
        h.random = r.take(32)
        h.session_id = r.vec(1)
        if server:
            h.suite = r.u16()
            r.u8()
        else:
            cs = _Reader(r.vec(2))
            while cs.p + 1 < cs.end:
                h.suites.append(cs.u16())
            r.vec(1)
        _extensions(r, h, server)
    except (ValueError, struct.error, IndexError):
        h.problem = f"truncated or malformed {'Server' if server else 'Client'}Hello"
    return h


def certificate_subjects(body: bytes, tls13: bool) -> list[str]:
    """Subjects of the certificates of a Certificate message body (leaf first)."""
    out: list[str] = []
    try:
        r = _Reader(body)
        if tls13:
            r.vec(1)                            # certificate_request_context
        lst = _Reader(r.vec(3))
        while lst.p < lst.end:
            der = lst.vec(3)
            if tls13:
                lst.vec(2)                      # per-certificate extensions
            subj = der_subject(der)
            if subj is not None:
                out.append(subj)
    except (ValueError, IndexError):
        pass
    return out


# --------------------------------------------------------------------------- DER
_OID_NAMES = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST",
              "2.5.4.10": "O", "2.5.4.11": "OU", "1.2.840.113549.1.9.1": "emailAddress"}


def _der(b: bytes, p: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the DER element at ``p``."""
    tag = b[p]
    n = b[p + 1]
    p += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4:
            raise ValueError("DER length")
        n = int.from_bytes(b[p:p + k], "big")
        p += k
    if p + n > len(b):
        raise ValueError("DER truncated")
    return tag, p, p + n


def _oid(b: bytes) -> str:
    parts = [b[0] // 40, b[0] % 40]
    v = 0
    for x in b[1:]:
        v = (v << 7) | (x & 0x7F)
        if not x & 0x80:
            parts.append(v)
            v = 0
    return ".".join(map(str, parts))


def der_subject(der: bytes) -> str | None:
    """The subject of an X.509 certificate as ``CN=...,O=...`` (None when unreadable)."""
    try:
        _, p, _ = _der(der, 0)                  # Certificate
        _, p, tbs_end = _der(der, p)            # tbsCertificate
        fields = []
        while p < tbs_end and len(fields) < 6:
            tag, s, e = _der(der, p)
            fields.append((tag, s, e))
            p = e
        if fields and fields[0][0] == 0xA0:     # [0] version
            fields = fields[1:]
        tag, s, e = fields[4]                   # serial, sigalg, issuer, validity, subject
        if tag != 0x30:
            return None
        names = []
        while s < e:
            _, rs, re_ = _der(der, s)           # SET of
            q = rs
            while q < re_:
                _, as_, ae = _der(der, q)       # SEQUENCE { OID, value }
                _, os_, oe = _der(der, as_)
                _, vs, ve = _der(der, oe)
                key = _oid(der[os_:oe])
                names.append(f"{_OID_NAMES.get(key, key)}="
                             f"{der[vs:ve].decode('utf-8', 'replace')}")
                q = ae
            s = re_
        return ",".join(names)
    except (ValueError, IndexError):
        return None


class HandshakeReader:
    """Handshake messages out of a direction's handshake-type record payloads.
    ``feed(data)`` returns complete ``(msg_type, body)`` messages; a message larger
    than ``limit`` is skipped (counted in ``oversized``), memory stays bounded."""

    def __init__(self, limit: int = 1 << 20) -> None:
        self.buf = bytearray()
        self.limit = limit
        self.skip = 0
        self.oversized = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        if self.skip:
            n = min(self.skip, len(data))
            self.skip -= n
            data = data[n:]
        self.buf += data
        out = []
        buf = self.buf
        p = 0
        while len(buf) - p >= 4:
            n = int.from_bytes(buf[p + 1:p + 4], "big")
            if n > self.limit:
                self.oversized += 1
                have = len(buf) - p - 4
                self.skip = max(0, n - have)
                p = len(buf)
                break
            if len(buf) - p - 4 < n:
                break
            out.append((buf[p], bytes(buf[p + 4:p + 4 + n])))
            p += 4 + n
        del buf[:p]
        return out

    def reset(self) -> None:
        self.buf = bytearray()
        self.skip = 0
