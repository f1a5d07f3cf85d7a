"""Real TLS byte streams made in memory by Python's ``ssl`` (OpenSSL): a client and a
server ``SSLObject`` over ``MemoryBIO`` pairs, with the key log OpenSSL writes.

``converse(tmp_path, version, cipher, messages)`` runs a handshake and then sends the
``messages`` (``(direction, bytes)``; 0 = client to server) and returns the two
ciphertext streams as lists of chunks ``(direction, bytes)`` in send order, and the key
log path.
"""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def make_cert(dir_: Path, cn: str = "kafka.test") -> tuple[Path, Path]:
    """A self-signed ECDSA certificate and its key (PEM files) for ``cn``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kwsniff tests")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(cn)]), critical=False)
            .sign(key, hashes.SHA256()))
    cpath, kpath = dir_ / "cert.pem", dir_ / "key.pem"
    cpath.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    kpath.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                        serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
    return cpath, kpath


def contexts(tmp: Path, version: str, cipher: str | None, keylog: Path):
    cert, key = make_cert(tmp)
    tv = ssl.TLSVersion.TLSv1_3 if version == "1.3" else ssl.TLSVersion.TLSv1_2
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(cert, key)
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cctx.check_hostname = False
    cctx.verify_mode = ssl.CERT_NONE
    cctx.keylog_filename = str(keylog)
    for c in (sctx, cctx):
        c.minimum_version = c.maximum_version = tv
        if cipher and version == "1.2":
            c.set_ciphers(cipher)
    if cipher and version == "1.3":
        # Python has no TLS 1.3 suite setter: OpenSSL's default offers all three;
        # the server picks by its preference, so restrict through the client's order
        pass
    return cctx, sctx


def converse(tmp: Path, version: str, cipher: str | None, messages, sni: str = "kafka.test"):
    keylog = tmp / "keys.log"
    cctx, sctx = contexts(tmp, version, cipher, keylog)
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = cctx.wrap_bio(c_in, c_out, server_side=False, server_hostname=sni)
    server = sctx.wrap_bio(s_in, s_out, server_side=True)
    chunks: list[tuple[int, bytes]] = []

    def pump() -> None:
        moved = True
        while moved:
            moved = False
            data = c_out.read()
            if data:
                chunks.append((0, data))
                s_in.write(data)
                moved = True
            data = s_out.read()
            if data:
                chunks.append((1, data))
                c_in.write(data)
                moved = True

    done = [False, False]
    for _ in range(20):
        for i, obj in enumerate((client, server)):
            if not done[i]:
                try:
                    obj.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
        pump()
        if all(done):
            break
    for d, msg in messages:
        (client if d == 0 else server).write(msg)
        pump()
        peer = server if d == 0 else client
        got = b""
        while len(got) < len(msg):
            try:
                got += peer.read(1 << 20)
            except ssl.SSLWantReadError:
                pump()
        assert got == msg
        pump()
    return chunks, keylog, client.version(), client.cipher()[0]
