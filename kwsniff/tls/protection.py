"""Record protection, one direction: decrypt TLS 1.2 / 1.3 records.

``RecordCipher.open(ctype, version, fragment) -> (inner_type, plaintext)`` or raises
:class:`Undecryptable`; the sequence number advances per record (also on failure: the
record was sent, so the next one has the next number). Primitives (AES-GCM,
ChaCha20-Poly1305, AES-CBC, HMAC) come from ``cryptography`` and :mod:`hmac`.
"""

from __future__ import annotations

import hmac
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from kwsniff.tls import keyschedule
from kwsniff.tls.suites import Suite

_HDR = struct.Struct(">BHH")
_SEQ = struct.Struct(">Q")


class Undecryptable(Exception):
    """A record that does not decrypt or authenticate with the keys at hand."""


def _aead(suite: Suite, key: bytes):
    return AESGCM(key) if suite.kind == "gcm" else ChaCha20Poly1305(key)


def _xor_nonce(iv: bytes, seq: int) -> bytes:
    pad = bytes(len(iv) - 8) + _SEQ.pack(seq)
    return bytes(a ^ b for a, b in zip(iv, pad))


class Tls13Cipher:
    """TLS 1.3 AEAD record protection under one traffic secret (RFC 8446 section 5.2)."""

    def __init__(self, suite: Suite, secret: bytes) -> None:
        self.suite = suite
        self.secret = secret
        key, self.iv = keyschedule.traffic_key_iv(suite.prf, secret, suite.key_len, 12)
        self.aead = _aead(suite, key)
        self.seq = 0

    def open(self, ctype: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        seq = self.seq
        self.seq += 1
        if ctype != 23:
            raise Undecryptable(f"unexpected outer content type {ctype}")
        aad = _HDR.pack(ctype, version, len(fragment))
        try:
            inner = self.aead.decrypt(_xor_nonce(self.iv, seq), bytes(fragment), aad)
        except (InvalidTag, ValueError) as err:
            raise Undecryptable("authentication failed") from err
        end = len(inner)
        while end and inner[end - 1] == 0:      # strip zero padding
            end -= 1
        if not end:
            raise Undecryptable("record without content type")
        return inner[end - 1], inner[:end - 1]

    def updated(self) -> Tls13Cipher:
        """The cipher after a KeyUpdate from this direction's sender."""
        return Tls13Cipher(self.suite, keyschedule.next_traffic_secret(self.suite.prf, self.secret))


class Tls12Cipher:
    """TLS 1.2 record protection from the key block (RFC 5246 section 6.3, RFC 5288,
    RFC 7905; CBC with MAC-then-encrypt, or encrypt-then-MAC of RFC 7366)."""

    def __init__(self, suite: Suite, mac_key: bytes, key: bytes, iv: bytes,
                 etm: bool = False) -> None:
        self.suite = suite
        self.mac_key = mac_key
        self.key = key
        self.iv = iv
        self.etm = etm
        self.aead = _aead(suite, key) if suite.kind != "cbc" else None
        self.seq = 0

    def open(self, ctype: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        seq = self.seq
        self.seq += 1
        kind = self.suite.kind
        frag = bytes(fragment)
        try:
            if kind == "gcm":
                if len(frag) < 24:
                    raise Undecryptable("record shorter than nonce and tag")
                nonce = self.iv + frag[:8]
                body = frag[8:]
                aad = _SEQ.pack(seq) + _HDR.pack(ctype, version, len(body) - 16)
                return ctype, self.aead.decrypt(nonce, body, aad)
            if kind == "chacha":
                if len(frag) < 16:
                    raise Undecryptable("record shorter than the tag")
                aad = _SEQ.pack(seq) + _HDR.pack(ctype, version, len(frag) - 16)
                return ctype, self.aead.decrypt(_xor_nonce(self.iv, seq), frag, aad)
        except (InvalidTag, ValueError) as err:
            raise Undecryptable("authentication failed") from err
        return ctype, self._open_cbc(seq, ctype, version, frag)

    def _open_cbc(self, seq: int, ctype: int, version: int, frag: bytes) -> bytes:
        mlen = self.suite.mac_len
        mac_name = self.suite.mac
        if self.etm:
            if len(frag) < 16 + mlen:
                raise Undecryptable("record too short")
            body, tag = frag[:-mlen], frag[-mlen:]
            want = keyschedule.hmac_digest(mac_name, self.mac_key, _SEQ.pack(seq)
                                           + _HDR.pack(ctype, version, len(body)) + body)
            if not hmac.compare_digest(want, tag):
                raise Undecryptable("MAC check failed")
            plain = self._cbc_decrypt(body)
            return plain
        plain = self._cbc_decrypt(frag)
        if len(plain) < mlen:
            raise Undecryptable("record too short for its MAC")
        data, tag = plain[:-mlen], plain[-mlen:]
        want = keyschedule.hmac_digest(mac_name, self.mac_key, _SEQ.pack(seq)
                                       + _HDR.pack(ctype, version, len(data)) + data)
        if not hmac.compare_digest(want, tag):
            raise Undecryptable("MAC check failed")
        return data

    def _cbc_decrypt(self, body: bytes) -> bytes:
        if len(body) < 32 or len(body) % 16:
            raise Undecryptable("CBC record length is not whole blocks")
        iv, ct = body[:16], body[16:]
        dec = Cipher(algorithms.AES(self.key), modes.CBC(iv)).decryptor()
        plain = dec.update(ct) + dec.finalize()
        pad = plain[-1]
        if pad + 1 > len(plain) or any(b != pad for b in plain[-pad - 1:]):
            raise Undecryptable("bad CBC padding")
        return plain[:-pad - 1]


def tls12_ciphers(suite: Suite, master: bytes, client_random: bytes, server_random: bytes,
                  etm: bool = False) -> tuple[Tls12Cipher, Tls12Cipher]:
    """(client-write, server-write) ciphers of a TLS 1.2 session from its master secret."""
    mac_len = suite.mac_len if suite.kind == "cbc" else 0
    iv_len = suite.fixed_iv
    n = 2 * (mac_len + suite.key_len + iv_len)
    kb = keyschedule.key_block12(suite.prf, master, client_random, server_random, n)
    p = 0
    parts = []
    for size in (mac_len, mac_len, suite.key_len, suite.key_len, iv_len, iv_len):
        parts.append(kb[p:p + size])
        p += size
    cmac, smac, ckey, skey, civ, siv = parts
    return (Tls12Cipher(suite, cmac, ckey, civ, etm), Tls12Cipher(suite, smac, skey, siv, etm))
