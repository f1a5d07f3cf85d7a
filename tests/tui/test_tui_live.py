"""Live mode: exchanges captured on loopback stream into the list without moving the
selection; pause freezes the list. Needs the right to capture on lo (root)."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from kwsniff.engine import EngineOptions
from kwsniff.tui.app import KwsniffApp


def _capture_error() -> str | None:
    from kwsniff.capture.live import open_live
    from kwsniff.errors import CaptureError

    try:
        with open_live("lo", bpf_filter="tcp port 1"):
            return None
    except CaptureError as err:
        return str(err)


def _api_versions_request(corr: int) -> bytes:
    client = b"kws-tui-live"
    body = struct.pack(">hhih", 18, 0, corr, len(client)) + client
    return struct.pack(">i", len(body)) + body


def _api_versions_response(corr: int) -> bytes:
    body = struct.pack(">ihi", corr, 0, 1) + struct.pack(">hhh", 3, 0, 9)
    return struct.pack(">i", len(body)) + body


class Broker:
    """A loopback server answering every request frame with ApiVersions v0."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                    size = struct.unpack_from(">i", buf)[0]
                    corr = struct.unpack_from(">i", buf, 8)[0]
                    buf = buf[4 + size:]
                    conn.sendall(_api_versions_response(corr))

    def close(self) -> None:
        self.sock.close()


def _client(port: int, first: int, count: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        for corr in range(first, first + count):
            c.sendall(_api_versions_request(corr))
            want = 4 + 14
            got = b""
            while len(got) < want:
                got += c.recv(want - len(got))


async def _wait(pilot: Pilot[Any], check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        app = pilot.app
        assert time.monotonic() < deadline, \
            f"timed out: {app.store.count} stored, {app.exchanges.count} shown, " \
            f"status {app.status_text()!r}"
        await pilot.pause(0.05)


def test_live_exchanges_stream_in_without_stealing_the_selection() -> None:
    why = _capture_error()
    if why is not None:
        pytest.skip(f"cannot capture on lo: {why}")
    broker = Broker()
    options = EngineOptions(ports=(broker.port,), timeout=5.0)
    app = KwsniffApp(interface="lo", ports=(broker.port,), options=options)

    async def body(pilot: Pilot[Any]) -> None:
        await _wait(pilot, lambda: app.loader.capturing)
        assert "live: lo" in app.sub_title
        await asyncio.to_thread(_client, broker.port, 1, 5)
        table = app.exchanges
        await _wait(pilot, lambda: table.count == 5)
        assert "capturing" in app.status_text()
        table.focus()
        await pilot.press("down", "down")
        selected = table.row_at(table.cursor)
        await _wait(pilot, lambda: app.tree_root is not None
                    and app.tree_root.label == "Exchange 3")
        await asyncio.to_thread(_client, broker.port, 10, 5)
        await _wait(pilot, lambda: table.count == 10)
        assert table.row_at(table.cursor) == selected
        assert app.tree_root.label == "Exchange 3"
        await pilot.press("p")
        await asyncio.to_thread(_client, broker.port, 20, 3)
        await _wait(pilot, lambda: app.store.count == 13, timeout=8)
        await pilot.pause(0.5)
        assert table.count == 10 and "PAUSED (3 new" in app.status_text()
        await pilot.press("p")
        await _wait(pilot, lambda: table.count == 13)
        assert table.row_at(table.cursor) == selected
        digests = [app.store.digest_text(r) for r in range(13)]
        assert all(d.endswith("→ 1 API") for d in digests)

    async def main() -> None:
        async with app.run_test(size=(140, 44)) as pilot:
            await body(pilot)

    try:
        asyncio.run(main())
    finally:
        broker.close()
    assert not app.loader.error
