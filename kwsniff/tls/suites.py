"""Cipher suites kwsniff can decrypt, and the names of the others.

A :class:`Suite` says how records are protected: ``kind`` is ``"gcm"``, ``"chacha"``
or ``"cbc"``; ``prf`` is the hash of the key schedule (TLS 1.2 PRF or TLS 1.3 HKDF);
``mac`` the HMAC hash of CBC suites; ``key_len``, ``fixed_iv`` (TLS 1.2 implicit IV /
salt bytes, 12 for TLS 1.3), ``mac_len``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Suite:
    code: int
    name: str
    kind: str          # gcm, chacha, cbc
    key_len: int
    fixed_iv: int
    prf: str           # sha256 / sha384
    mac: str = ""      # cbc only
    mac_len: int = 0
    tls13: bool = False


def _s(code, name, kind, key_len, fixed_iv, prf, mac="", mac_len=0, tls13=False):
    return code, Suite(code, name, kind, key_len, fixed_iv, prf, mac, mac_len, tls13)


SUITES: dict[int, Suite] = dict([
    # TLS 1.3
    _s(0x1301, "TLS_AES_128_GCM_SHA256", "gcm", 16, 12, "sha256", tls13=True),
    _s(0x1302, "TLS_AES_256_GCM_SHA384", "gcm", 32, 12, "sha384", tls13=True),
    _s(0x1303, "TLS_CHACHA20_POLY1305_SHA256", "chacha", 32, 12, "sha256", tls13=True),
    # TLS 1.2 AEAD
    _s(0xC02F, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, 4, "sha256"),
    _s(0xC030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, 4, "sha384"),
    _s(0xC02B, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "gcm", 16, 4, "sha256"),
    _s(0xC02C, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "gcm", 32, 4, "sha384"),
    _s(0x009C, "TLS_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, 4, "sha256"),
    _s(0x009D, "TLS_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, 4, "sha384"),
    _s(0x009E, "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, 4, "sha256"),
    _s(0x009F, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, 4, "sha384"),
    _s(0xCCA8, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, 12, "sha256"),
    _s(0xCCA9, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, 12, "sha256"),
    _s(0xCCAA, "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, 12, "sha256"),
    # TLS 1.2 CBC + HMAC (TLS 1.1+ explicit IV per record)
    _s(0xC013, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "cbc", 16, 0, "sha256", "sha1", 20),
    _s(0xC014, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "cbc", 32, 0, "sha256", "sha1", 20),
    _s(0xC009, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "cbc", 16, 0, "sha256", "sha1", 20),
    _s(0xC00A, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "cbc", 32, 0, "sha256", "sha1", 20),
    _s(0xC027, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "cbc", 16, 0, "sha256", "sha256", 32),
    _s(0xC028, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", "cbc", 32, 0, "sha384", "sha384", 48),
    _s(0xC023, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "cbc", 16, 0, "sha256", "sha256", 32),
    _s(0xC024, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", "cbc", 32, 0, "sha384", "sha384", 48),
    _s(0x002F, "TLS_RSA_WITH_AES_128_CBC_SHA", "cbc", 16, 0, "sha256", "sha1", 20),
    _s(0x0035, "TLS_RSA_WITH_AES_256_CBC_SHA", "cbc", 32, 0, "sha256", "sha1", 20),
    _s(0x003C, "TLS_RSA_WITH_AES_128_CBC_SHA256", "cbc", 16, 0, "sha256", "sha256", 32),
    _s(0x003D, "TLS_RSA_WITH_AES_256_CBC_SHA256", "cbc", 32, 0, "sha256", "sha256", 32),
])

VERSIONS = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2",
            0x0304: "TLS 1.3"}


def suite_name(code: int | None) -> str | None:
    if code is None:
        return None
    s = SUITES.get(code)
    return s.name if s is not None else f"0x{code:04X}"


def version_name(code: int | None) -> str | None:
    if code is None:
        return None
    return VERSIONS.get(code, f"0x{code:04X}")
