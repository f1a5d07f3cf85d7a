"""tcpdump on the namespace's loopback, and waiting for TCP connections to close.

:class:`Tcpdump` starts tcpdump with ``--immediate-mode`` and a large kernel buffer,
waits until it is listening, and on :meth:`Tcpdump.stop` parses its closing counters;
a capture that lost packets ("dropped by kernel" > 0) raises :class:`CaptureLoss`.
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

SNAPLEN = 262144
BUFFER_KIB = 65536  # tcpdump -B: kernel capture buffer


class CaptureError(RuntimeError):
    """tcpdump failed to start or stop."""


class CaptureLoss(CaptureError):
    """tcpdump reported lost packets."""


@dataclass(slots=True)
class CaptureStats:
    captured: int
    received_by_filter: int
    dropped_by_kernel: int
    dropped_by_interface: int
    started_at: float
    stopped_at: float


def port_filter(ports: Iterable[int]) -> str:
    return "tcp and (" + " or ".join(f"port {p}" for p in sorted(set(ports))) + ")"


class Tcpdump:
    """One tcpdump process writing ``path``; stop it only after the clients closed."""

    def __init__(self, path: Path, ports: Iterable[int], interface: str = "lo") -> None:
        self.path = path
        self.interface = interface
        self.filter = port_filter(ports)
        self._proc: subprocess.Popen[str] | None = None
        self._lines: list[str] = []
        self._listening = threading.Event()
        self._reader: threading.Thread | None = None
        self.started_at = 0.0

    def start(self, timeout: float = 10.0) -> None:
        cmd = ["tcpdump", "-i", self.interface, "--immediate-mode", "-s", str(SNAPLEN),
               "-B", str(BUFFER_KIB), "-U", "-n", "-w", str(self.path), self.filter]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True)
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        if not self._listening.wait(timeout):
            self._proc.kill()
            raise CaptureError("tcpdump did not start: " + " | ".join(self._lines))
        self.started_at = time.time()

    def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            self._lines.append(line.rstrip("\n"))
            if "listening on" in line:
                self._listening.set()

    def stop(self, timeout: float = 10.0) -> CaptureStats:
        """SIGINT tcpdump, wait, return its counters; raise on any lost packet."""
        if self._proc is None:
            raise CaptureError("tcpdump was not started")
        stopped_at = time.time()
        self._proc.send_signal(signal.SIGINT)
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            self._proc.kill()
            raise CaptureError("tcpdump did not stop on SIGINT") from exc
        if self._reader is not None:
            self._reader.join(timeout)
        counters: dict[str, int] = {}
        for line in self._lines:
            m = re.match(r"^(\d+) packets? (.+)$", line)
            if m:
                counters[m.group(2)] = int(m.group(1))
        if "captured" not in counters:
            raise CaptureError("tcpdump printed no counters: " + " | ".join(self._lines))
        stats = CaptureStats(
            captured=counters["captured"],
            received_by_filter=counters.get("received by filter", -1),
            dropped_by_kernel=counters.get("dropped by kernel", 0),
            dropped_by_interface=counters.get("dropped by interface", 0),
            started_at=self.started_at, stopped_at=stopped_at)
        if stats.dropped_by_kernel or stats.dropped_by_interface:
            raise CaptureLoss(f"tcpdump lost packets: {stats}")
        return stats


_TCP_LISTEN = "0A"
_TCP_DONE = {"06", "07"}  # TIME_WAIT, CLOSE: nothing more will be sent


def open_connections(ports: Iterable[int]) -> list[str]:
    """Sockets on ``ports`` (either end) that are neither listening nor closed."""
    wanted = set(ports)
    found: list[str] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            lport = int(local.rsplit(":", 1)[1], 16)
            rport = int(remote.rsplit(":", 1)[1], 16)
            if state == _TCP_LISTEN or state in _TCP_DONE:
                continue
            if lport in wanted or rport in wanted:
                found.append(f"{lport}->{rport} state {state}")
    return found


def wait_connections_closed(ports: Iterable[int], timeout: float = 20.0,
                            settle: float = 0.5) -> None:
    """Block until no connection on ``ports`` is open, then ``settle`` seconds more."""
    ports = list(ports)
    deadline = time.monotonic() + timeout
    while True:
        still = open_connections(ports)
        if not still:
            break
        if time.monotonic() > deadline:
            raise CaptureError(f"connections still open after {timeout}s: {still}")
        time.sleep(0.05)
    time.sleep(settle)


def wait_listening(port: int, timeout: float = 15.0) -> None:
    """Block until something listens on ``port`` (without connecting to it)."""
    deadline = time.monotonic() + timeout
    hexport = f"{port:04X}"
    while time.monotonic() < deadline:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                for line in Path(table).read_text().splitlines()[1:]:
                    fields = line.split()
                    if fields[3] == _TCP_LISTEN and fields[1].endswith(":" + hexport):
                        return
            except OSError:
                continue
        time.sleep(0.05)
    raise CaptureError(f"nothing listens on port {port} after {timeout}s")
