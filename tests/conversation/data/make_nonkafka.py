"""Regenerate ``nonkafka.pcap``: real non-Kafka TCP traffic on loopback for detection tests.

Needs root (tcpdump on ``lo``), ``openssl``, ``redis-server``/``redis-cli`` and PostgreSQL
(``/usr/lib/postgresql/*/bin``, run as the ``postgres`` user).  Services listen on
unusual ports so that the capture filter sees nothing else:

* 18080 HTTP/1.0 (python ``http.server``, requests with urllib: GET, POST with a binary
  body, a 404),
* 18443 TLS 1.2/1.3 (python ``ssl`` with a self-signed certificate made by ``openssl``),
* 16379 Redis (``redis-server``; ``redis-cli`` PING/SET/GET/LRANGE and a binary value),
* 15432 PostgreSQL (``initdb`` + ``postgres``; ``psql`` with sslmode=prefer, queries).

Usage: ``python tests/conversation/data/make_nonkafka.py [OUT.pcap]``.
"""

from __future__ import annotations

import glob
import http.server
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HTTP, TLS, REDIS, PG = 18080, 18443, 16379, 15432


def _wait_port(port: int, timeout: float = 20.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"port {port} did not open")


def http_traffic(tmp: Path) -> None:
    (tmp / "index.html").write_text("<html><body>hello</body></html>\n")
    (tmp / "blob.bin").write_bytes(bytes(range(256)) * 64)
    handler = lambda *a, **kw: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp), **kw)  # noqa: E731
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", HTTP), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    for path in ("/index.html", "/blob.bin", "/missing"):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{HTTP}{path}", timeout=5).read()
        except urllib.error.HTTPError:
            pass
    try:
        urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{HTTP}/index.html", data=b"\x00\x00\x00\x10" + bytes(60),
            method="POST"), timeout=5).read()
    except urllib.error.HTTPError:
        pass
    srv.shutdown()


def tls_traffic(tmp: Path) -> None:
    key, crt = tmp / "k.pem", tmp / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(crt), "-days", "2", "-subj", "/CN=localhost"], check=True,
                   capture_output=True)
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(crt, key)
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", TLS))
    lsock.listen(5)

    def serve() -> None:
        for _ in range(2):
            conn, _ = lsock.accept()
            with sctx.wrap_socket(conn, server_side=True) as s:
                data = s.recv(65536)
                s.sendall(b"echo:" + data)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        cctx.check_hostname = False
        cctx.verify_mode = ssl.CERT_NONE
        cctx.minimum_version = cctx.maximum_version = version
        with socket.create_connection(("127.0.0.1", TLS)) as raw, \
                cctx.wrap_socket(raw, server_hostname="localhost") as s:
            # bytes that would look like a Kafka request if they were not encrypted
            s.sendall(b"\x00\x00\x00\x14\x00\x12\x00\x03\x00\x00\x00\x01\x00\x03cli\x00\x00\x00\x00\x00")
            s.recv(65536)
    t.join(5)
    lsock.close()


def redis_traffic(tmp: Path) -> None:
    proc = subprocess.Popen(["redis-server", "--port", str(REDIS), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", str(tmp)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(REDIS)
        cli = ["redis-cli", "-h", "127.0.0.1", "-p", str(REDIS)]
        for args in (["PING"], ["SET", "k1", "v1"], ["GET", "k1"], ["RPUSH", "l", "a", "b", "c"],
                     ["LRANGE", "l", "0", "-1"], ["INCR", "n"], ["DEL", "k1"]):
            subprocess.run(cli + args, check=True, capture_output=True)
        subprocess.run(cli + ["-x", "SET", "bin"], input=b"\x00\x00\x00\x0c\x00\x03\x00\x01" + bytes(32),
                       check=True, capture_output=True)
        subprocess.run(cli + ["GET", "bin"], check=True, capture_output=True)
    finally:
        proc.terminate()
        proc.wait(10)


def pg_traffic(tmp: Path) -> None:
    bindir = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
    data, sock = tmp / "pgdata", tmp / "pgsock"
    for d in (data, sock):
        d.mkdir()
        shutil.chown(d, "postgres", "postgres")
    os.chmod(tmp, 0o755)
    run_as = ["runuser", "-u", "postgres", "--"]
    subprocess.run(run_as + [f"{bindir}/initdb", "-D", str(data), "-A", "trust", "-U", "postgres"],
                   check=True, capture_output=True)
    proc = subprocess.Popen(run_as + [f"{bindir}/postgres", "-D", str(data), "-p", str(PG),
                                      "-k", str(sock), "-c", "listen_addresses=127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(PG)
        time.sleep(1.0)
        for sql in ("select 1", "create table t(a int, b bytea)",
                    "insert into t values (1, '\\x0000001000030001'::bytea)", "select * from t"):
            subprocess.run(["psql", f"host=127.0.0.1 port={PG} user=postgres dbname=postgres "
                            "sslmode=prefer", "-c", sql], check=True, capture_output=True)
    finally:
        proc.terminate()
        proc.wait(20)


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("nonkafka.pcap")
    flt = " or ".join(f"tcp port {p}" for p in (HTTP, TLS, REDIS, PG))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        dump = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "-s", "0", "-w", str(out), flt],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
        try:
            http_traffic(tmp)
            tls_traffic(tmp)
            redis_traffic(tmp)
            pg_traffic(tmp)
            time.sleep(1.0)
        finally:
            dump.terminate()
            dump.wait(10)
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
