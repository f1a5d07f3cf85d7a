"""Helpers of the live-capture tests: capture permission, free ports, TCP traffic, CLI runs."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KWSNIFF = [sys.executable, "-m", "kwsniff"]


def capture_allowed() -> str | None:
    """None when this process may capture on lo, else why not."""
    from kwsniff.capture.live import open_live
    from kwsniff.errors import CaptureError

    try:
        with open_live("lo", bpf_filter="tcp port 1"):
            return None
    except CaptureError as err:
        return str(err)


def free_port() -> int:
    """A TCP port nobody listens on now (the kernel picks it; distinct per test)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EchoServer:
    """A loopback TCP server that echoes what it receives (or stays silent)."""

    def __init__(self, port: int = 0, *, echo: bool = True) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(8)
        self.port = int(self.sock.getsockname()[1])
        self.echo = echo
        self.received = bytearray()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        while True:
            try:
                data = conn.recv(1 << 16)
            except OSError:
                return
            if not data:
                conn.close()
                return
            self.received += data
            if self.echo:
                conn.sendall(data)

    def close(self) -> None:
        self.sock.close()
        for c in self._conns:
            try:
                c.close()
            except OSError:
                pass


def send_and_receive(port: int, payload: bytes) -> bytes:
    """Connect to 127.0.0.1:port, send ``payload``, read as much back, close."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.sendall(payload)
        got = bytearray()
        while len(got) < len(payload):
            chunk = c.recv(1 << 16)
            if not chunk:
                break
            got += chunk
    return bytes(got)


def kwsniff_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("KWSNIFF_LIBPCAP", None)
    return env


def run_kwsniff(args: list[str], *, prefix: list[str] | None = None, timeout: float = 60,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(prefix or []), *KWSNIFF, *args], capture_output=True, text=True,
                          timeout=timeout, env=env or kwsniff_env(), cwd=ROOT)


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


def ethernet_probe(dev: str, server_ip: str, port: int) -> None:
    """Run inside a network namespace: capture on ``dev`` while talking to the server.

    Prints one JSON object: the link type, the MAC addresses seen and the TCP payloads
    of each direction (hex), for the test to check.
    """
    import json
    import struct
    import threading
    import time

    from kwsniff.capture.live import open_live

    with open_live(dev, ports=[port]) as src:
        with socket.create_connection((server_ip, port), timeout=5) as c:
            c.sendall(b"over ethernet")
            reply = c.recv(100)
        threading.Timer(0.5, src.stop).start()
        packets = list(src)
        linktype = src.linktype
    macs: set[str] = set()
    to_server = bytearray()
    from_server = bytearray()
    for _frame, _ts, _lt, data, _orig in packets:
        macs.add(data[0:6].hex())
        macs.add(data[6:12].hex())
        if struct.unpack_from(">H", data, 12)[0] != 0x0800:
            continue
        ip = data[14:]
        ihl = (ip[0] & 15) * 4
        tcp = ip[ihl:struct.unpack_from(">H", ip, 2)[0]]
        body = tcp[(tcp[12] >> 4) * 4:]
        (to_server if struct.unpack_from(">H", tcp, 2)[0] == port else from_server).extend(body)
    print(json.dumps({"linktype": linktype, "macs": sorted(macs), "reply": reply.hex(),
                      "to_server": to_server.hex(), "from_server": from_server.hex(),
                      "packets": len(packets), "t": time.time()}))


def tcp_packet(src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int, flags: str,
               payload: bytes = b"") -> bytes:
    """An Ethernet/IPv4/TCP packet (checksums left 0: kwsniff does not verify them)."""
    import struct

    bits = {"F": 1, "S": 2, "R": 4, "P": 8, "A": 16}
    tcp = struct.pack(">HHIIBBHHH", src[1], dst[1], seq, ack, 5 << 4,
                      sum(bits[c] for c in flags), 65535, 0, 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0x4000, 64, 6, 0,
                     socket.inet_aton(src[0]), socket.inet_aton(dst[0])) + tcp
    return bytes(6) + bytes(6) + b"\x08\x00" + ip


def api_versions_request(correlation_id: int, client_id: str = "kws-test") -> bytes:
    """A size-prefixed ApiVersions v0 request."""
    import struct

    cid = client_id.encode()
    body = struct.pack(">hhih", 18, 0, correlation_id, len(cid)) + cid
    return struct.pack(">i", len(body)) + body


def api_versions_response(correlation_id: int) -> bytes:
    """A size-prefixed ApiVersions v0 response listing one API (Produce 0-9)."""
    import struct

    body = struct.pack(">ihi", correlation_id, 0, 1) + struct.pack(">hhh", 0, 0, 9)
    return struct.pack(">i", len(body)) + body


class FakeBroker(EchoServer):
    """Answers every Kafka request frame with an ApiVersions v0 response (same corr id)."""

    def __init__(self, port: int = 0, *, answer: bool = True) -> None:
        self.answer = answer
        super().__init__(port, echo=False)

    def _handle(self, conn: socket.socket) -> None:
        import struct

        buf = bytearray()
        while True:
            try:
                data = conn.recv(1 << 16)
            except OSError:
                return
            if not data:
                conn.close()
                return
            buf += data
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                size = struct.unpack_from(">i", buf)[0]
                corr = struct.unpack_from(">i", buf, 8)[0]
                del buf[:4 + size]
                if self.answer:
                    conn.sendall(api_versions_response(corr))


def kafka_client(port: int, requests: int, *, wait_answers: bool = True,
                 pause: float = 0.0) -> None:
    """Send ``requests`` ApiVersions requests over one connection (reading each answer)."""
    import struct
    import time

    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        for corr in range(1, requests + 1):
            c.sendall(api_versions_request(corr, "kws-fake-client"))
            if wait_answers:
                head = b""
                while len(head) < 4:
                    head += c.recv(4 - len(head))
                size = struct.unpack(">i", head)[0]
                got = 0
                while got < size:
                    got += len(c.recv(size - got))
            if pause:
                time.sleep(pause)
