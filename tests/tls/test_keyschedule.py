"""The TLS 1.3 key schedule and record protection against the RFC 8448 section 3
trace (simple 1-RTT handshake, TLS_AES_128_GCM_SHA256), the TLS 1.2 PRF against an
independent HMAC computation."""

from __future__ import annotations

import hashlib
import hmac

from kwsniff.tls import keyschedule as ks
from kwsniff.tls.protection import Tls13Cipher
from kwsniff.tls.suites import SUITES

H = bytes.fromhex

# RFC 8448 section 3 values
HANDSHAKE_SECRET = H("1dc826e93606aa6fdc0aadc12f741b01046aa6b99f691ed221a9f0ca043fbeac")
HELLO_HASH = H("860c06edc07858ee8e78f0e7428c58edd6b43f2ca3e6e95f02ed063cf0e1cad8")
C_HS = H("b3eddb126e067f35a780b3abf45e2d8f3b1a950738f52e9600746a0e27a55a21")
S_HS = H("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38")
S_HS_KEY, S_HS_IV = H("3fce516009c21727d0f2e4e86ee403bc"), H("5d313eb2671276ee13000b30")
C_HS_KEY, C_HS_IV = H("dbfaa693d1762c5b666af5d950258d01"), H("5bd3c71b836e0b76bb73265f")
S_FINISHED_KEY = H("008d3b66f816ea559f96b537e885c31fc068bf492c652f01f288a1d8cdc19fc8")
MASTER = H("18df06843d13a08bf2a449844c5f8a478001bc4d4c627984d5a41da8d0402919")
FINISHED_HASH = H("9608102a0f1ccc6db6250b7b7e417b1a000eaada3daae4777a7686c9ff83df13")
C_AP = H("9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5")
S_AP = H("a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643")
S_AP_KEY, S_AP_IV = H("9f02283b6c9c07efc26bb9f2ac92e356"), H("cf782b88dd83549aadf1e984")
EARLY = H("33ad0a1c607ec03b09e6cd9893680ce210adf300aa1f2660e1b22e10f170f92a")
DERIVED = H("6f2615a108c702c5678f54fc9dbab69716c076189c48250cebeac3576c3611ba")
ECDHE = H("8bd4054fb55b9d63fdfbacf9f04b9f0d35e6d63f537563efd46272900f89492d")
# {client} send handshake record: the client Finished under the client handshake keys
CLIENT_FINISHED = H("1400002 0a8ec436d677634ae525ac1fcebe11a039ec17694fac6e98527b642f2edd5ce61"
                    .replace(" ", ""))
CLIENT_FINISHED_RECORD = H(
    "1703030035 75ec4dc238cce60b298044a71e219c56cc77b0517fe9b93c7a4bfc44d87f38f80338ac98"
    "fc46deb384bd1caeacab6867d726c40546".replace(" ", ""))


def test_early_and_handshake_secrets():
    early = ks.hkdf_extract("sha256", b"", bytes(32))
    assert early == EARLY
    derived = ks.derive_secret("sha256", early, b"derived", b"")
    assert derived == DERIVED
    assert ks.hkdf_extract("sha256", derived, ECDHE) == HANDSHAKE_SECRET


def test_traffic_secrets_from_transcript_hash():
    lbl = ks.hkdf_expand_label
    assert lbl("sha256", HANDSHAKE_SECRET, b"c hs traffic", HELLO_HASH, 32) == C_HS
    assert lbl("sha256", HANDSHAKE_SECRET, b"s hs traffic", HELLO_HASH, 32) == S_HS
    assert lbl("sha256", MASTER, b"c ap traffic", FINISHED_HASH, 32) == C_AP
    assert lbl("sha256", MASTER, b"s ap traffic", FINISHED_HASH, 32) == S_AP
    assert lbl("sha256", S_HS, b"finished", b"", 32) == S_FINISHED_KEY


def test_keys_and_ivs():
    assert ks.traffic_key_iv("sha256", S_HS, 16) == (S_HS_KEY, S_HS_IV)
    assert ks.traffic_key_iv("sha256", C_HS, 16) == (C_HS_KEY, C_HS_IV)
    assert ks.traffic_key_iv("sha256", S_AP, 16) == (S_AP_KEY, S_AP_IV)


def test_client_finished_record_decrypts():
    c = Tls13Cipher(SUITES[0x1301], C_HS)
    rec = CLIENT_FINISHED_RECORD
    inner, plain = c.open(rec[0], int.from_bytes(rec[1:3], "big"), rec[5:])
    assert inner == 22
    assert plain == CLIENT_FINISHED
    assert c.seq == 1


def test_key_update_changes_secret():
    nxt = ks.next_traffic_secret("sha256", C_AP)
    assert nxt == ks.hkdf_expand_label("sha256", C_AP, b"traffic upd", b"", 32)
    assert nxt != C_AP and len(nxt) == 32


def test_prf12_matches_rfc5246_definition():
    secret, seed = b"s" * 48, b"label" + b"r" * 64
    a1 = hmac.new(secret, seed, hashlib.sha256).digest()
    a2 = hmac.new(secret, a1, hashlib.sha256).digest()
    want = (hmac.new(secret, a1 + seed, hashlib.sha256).digest()
            + hmac.new(secret, a2 + seed, hashlib.sha256).digest())[:40]
    assert ks.prf12("sha256", secret, b"label", b"r" * 64, 40) == want
    assert len(ks.prf12("sha384", secret, b"x", b"y", 100)) == 100
