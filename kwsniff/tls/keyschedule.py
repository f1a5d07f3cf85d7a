"""TLS key schedules: the TLS 1.2 PRF (RFC 5246 section 5) and TLS 1.3
HKDF-Expand-Label / Derive-Secret (RFC 8446 section 7.1), with the key and IV
derivations the record layer needs. Only HMAC comes from ``cryptography``'s
neighbour, :mod:`hmac` of the standard library."""

from __future__ import annotations

import hashlib
import hmac
import struct

#: TLS hash names -> hashlib constructors
HASHES = {"sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha1": hashlib.sha1}


def hmac_digest(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, HASHES[hash_name]).digest()


def p_hash(hash_name: str, secret: bytes, seed: bytes, length: int) -> bytes:
    """P_hash of RFC 5246 section 5: HMAC chained on A(i), ``length`` bytes."""
    out = bytearray()
    a = seed
    while len(out) < length:
        a = hmac_digest(hash_name, secret, a)
        out += hmac_digest(hash_name, secret, a + seed)
    return bytes(out[:length])


def prf12(hash_name: str, secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    """The TLS 1.2 PRF: ``P_<hash>(secret, label + seed)``."""
    return p_hash(hash_name, secret, label + seed, length)


def hkdf_extract(hash_name: str, salt: bytes, ikm: bytes) -> bytes:
    """HKDF-Extract (RFC 5869): HMAC(salt, ikm); an empty salt is HashLen zeros."""
    if not salt:
        salt = bytes(HASHES[hash_name]().digest_size)
    return hmac_digest(hash_name, salt, ikm)


def hkdf_expand(hash_name: str, prk: bytes, info: bytes, length: int) -> bytes:
    """HKDF-Expand (RFC 5869)."""
    out = bytearray()
    t = b""
    i = 1
    while len(out) < length:
        t = hmac_digest(hash_name, prk, t + info + bytes((i,)))
        out += t
        i += 1
    return bytes(out[:length])


def hkdf_expand_label(hash_name: str, secret: bytes, label: bytes, context: bytes,
                      length: int) -> bytes:
    """HKDF-Expand-Label of RFC 8446 section 7.1 (label without the ``tls13 `` prefix)."""
    full = b"tls13 " + label
    info = struct.pack(">H", length) + bytes((len(full),)) + full + bytes((len(context),)) + context
    return hkdf_expand(hash_name, secret, info, length)


def derive_secret(hash_name: str, secret: bytes, label: bytes, transcript: bytes) -> bytes:
    """Derive-Secret: HKDF-Expand-Label(secret, label, Hash(transcript), HashLen)."""
    h = HASHES[hash_name](transcript).digest()
    return hkdf_expand_label(hash_name, secret, label, h, len(h))


def traffic_key_iv(hash_name: str, secret: bytes, key_len: int, iv_len: int = 12
                   ) -> tuple[bytes, bytes]:
    """TLS 1.3 record protection key and IV from a traffic secret."""
    return (hkdf_expand_label(hash_name, secret, b"key", b"", key_len),
            hkdf_expand_label(hash_name, secret, b"iv", b"", iv_len))


def next_traffic_secret(hash_name: str, secret: bytes) -> bytes:
    """The secret after a KeyUpdate: HKDF-Expand-Label(secret, "traffic upd", "", HashLen)."""
    return hkdf_expand_label(hash_name, secret, b"traffic upd", b"", len(secret))


def key_block12(hash_name: str, master: bytes, client_random: bytes, server_random: bytes,
                length: int) -> bytes:
    """The TLS 1.2 key block: PRF(master, "key expansion", server_random + client_random)."""
    return prf12(hash_name, master, b"key expansion", server_random + client_random, length)
