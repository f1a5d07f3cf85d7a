"""TLS 1.3 flows OpenSSL through Python's ``ssl`` cannot be made to show: KeyUpdate,
HelloRetryRequest, a key log with only the traffic secrets. The records are sealed
here with AES-128-GCM under secrets of the test's choosing (the record protection
itself is checked against RFC 8448 and OpenSSL elsewhere)."""

from __future__ import annotations

import struct

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kwsniff.tls import keyschedule as ks
from kwsniff.tls.handshake import HRR_RANDOM
from kwsniff.tls.keylog import KeyLog
from kwsniff.tls.session import TlsSession

CR = bytes(range(32))
SECRETS = {name: bytes([i + 1]) * 32 for i, name in enumerate(
    ["CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
     "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"])}


def hs_msg(mtype: int, body: bytes) -> bytes:
    return bytes([mtype]) + len(body).to_bytes(3, "big") + body


def ext(etype: int, body: bytes) -> bytes:
    return struct.pack(">HH", etype, len(body)) + body


def client_hello(sni: str = "broker.example") -> bytes:
    name = sni.encode()
    sni_ext = ext(0, struct.pack(">HBH", len(name) + 3, 0, len(name)) + name)
    alpn = ext(16, struct.pack(">H", 6) + b"\x05kafka")
    versions = ext(43, b"\x04\x03\x04\x03\x03")
    exts = sni_ext + alpn + versions
    body = (b"\x03\x03" + CR + b"\x00" + struct.pack(">H", 2) + b"\x13\x01" + b"\x01\x00"
            + struct.pack(">H", len(exts)) + exts)
    return record(22, hs_msg(1, body))


def server_hello(random: bytes = b"\x55" * 32) -> bytes:
    exts = ext(43, b"\x03\x04")
    body = (b"\x03\x03" + random + b"\x00" + b"\x13\x01" + b"\x00"
            + struct.pack(">H", len(exts)) + exts)
    return record(22, hs_msg(2, body))


def record(ctype: int, frag: bytes) -> bytes:
    return struct.pack(">BHH", ctype, 0x0303, len(frag)) + frag


class Sealer:
    def __init__(self, secret: bytes) -> None:
        self.secret = secret
        key, self.iv = ks.traffic_key_iv("sha256", secret, 16)
        self.aead = AESGCM(key)
        self.seq = 0

    def seal(self, inner_type: int, data: bytes) -> bytes:
        inner = data + bytes([inner_type]) + b"\x00" * 3
        n = len(inner) + 16
        nonce = bytes(a ^ b for a, b in zip(self.iv, bytes(4) + self.seq.to_bytes(8, "big")))
        self.seq += 1
        return record(23, self.aead.encrypt(nonce, inner, struct.pack(">BHH", 23, 0x0303, n)))

    def updated(self) -> Sealer:
        return Sealer(ks.next_traffic_secret("sha256", self.secret))


def run(chunks, keylog):
    got = [bytearray(), bytearray()]
    gaps = []
    s = TlsSession(keylog, lambda d, o, data, f, t: got[d].extend(data),
                   lambda d, o, n, f, t, r: gaps.append((d, n, r)))
    for d, data in chunks:
        s.data(d, data, 1, 0.0)
    return s, got, gaps


def keylog(names=tuple(SECRETS)) -> KeyLog:
    kl = KeyLog()
    kl.add_text("\n".join(f"{n} {CR.hex()} {SECRETS[n].hex()}" for n in names))
    return kl


def handshake_chunks(hrr: bool = False):
    s_hs = Sealer(SECRETS["SERVER_HANDSHAKE_TRAFFIC_SECRET"])
    c_hs = Sealer(SECRETS["CLIENT_HANDSHAKE_TRAFFIC_SECRET"])
    chunks = [(0, client_hello())]
    if hrr:
        chunks += [(1, server_hello(HRR_RANDOM)), (0, record(20, b"\x01")), (0, client_hello())]
    chunks += [(1, server_hello() + record(20, b"\x01")
                + s_hs.seal(22, hs_msg(8, b"\x00\x00") + hs_msg(20, b"\xaa" * 32))),
               (0, record(20, b"\x01") + c_hs.seal(22, hs_msg(20, b"\xbb" * 32)))]
    return chunks


def test_key_update_in_both_directions():
    c_ap = Sealer(SECRETS["CLIENT_TRAFFIC_SECRET_0"])
    s_ap = Sealer(SECRETS["SERVER_TRAFFIC_SECRET_0"])
    chunks = handshake_chunks()
    chunks.append((0, c_ap.seal(23, b"request-1")))
    chunks.append((1, s_ap.seal(22, hs_msg(4, b"\x00" * 20)) + s_ap.seal(23, b"response-1")))
    # the client updates its keys and asks the server to do the same
    chunks.append((0, c_ap.seal(22, hs_msg(24, b"\x01"))))
    c_ap = c_ap.updated()
    chunks.append((0, c_ap.seal(23, b"request-2")))
    chunks.append((1, s_ap.seal(22, hs_msg(24, b"\x00"))))
    s_ap = s_ap.updated()
    chunks.append((1, s_ap.seal(23, b"response-2")))
    s, got, gaps = run(chunks, keylog())
    assert not gaps, s.info.problems
    assert bytes(got[0]) == b"request-1request-2"
    assert bytes(got[1]) == b"response-1response-2"
    assert s.info.sni == "broker.example" and s.info.alpn == [] and s.info.version == 0x0304
    assert s.info.undecrypted_records == 0


def test_hello_retry_request_then_the_real_handshake():
    c_ap = Sealer(SECRETS["CLIENT_TRAFFIC_SECRET_0"])
    chunks = handshake_chunks(hrr=True) + [(0, c_ap.seal(23, b"after hrr"))]
    s, got, gaps = run(chunks, keylog())
    assert s.info.hrr and not gaps
    assert bytes(got[0]) == b"after hrr"


def test_traffic_secrets_alone_find_the_application_data():
    c_ap = Sealer(SECRETS["CLIENT_TRAFFIC_SECRET_0"])
    s_ap = Sealer(SECRETS["SERVER_TRAFFIC_SECRET_0"])
    chunks = handshake_chunks() + [(0, c_ap.seal(23, b"req")), (1, s_ap.seal(23, b"resp"))]
    s, got, gaps = run(chunks, keylog(("CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0")))
    assert bytes(got[0]) == b"req" and bytes(got[1]) == b"resp"
    # the encrypted handshake records are reported, not passed on as Kafka bytes
    assert len(gaps) == 2 and s.info.undecrypted_records == 2


def test_client_hello_fields():
    s, _, _ = run([(0, client_hello("kafka-1.internal"))], None)
    assert s.info.sni == "kafka-1.internal" and s.info.client_random == CR
