"""What a scenario works with: its manifest, its capture, its client request logs.

A scenario function receives a :class:`ScenarioContext`, starts its broker, wraps the
client activity in :meth:`ScenarioContext.capture` (or ``start_capture`` /
``stop_capture`` for a capture that starts mid-stream) and records facts in
``ctx.manifest``. :meth:`ScenarioContext.finish` adds the request logs and capture
counters, validates the manifest, and writes ``<name>.pcap`` + ``<name>.json``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from . import manifest as manifest_mod
from .capture import CaptureStats, Tcpdump, wait_connections_closed
from .netns import LOOPBACK_MTU
from .reqlog import PythonClientRequestLog, parse_librdkafka_log

MAX_CAPTURE_BYTES = 1024 * 1024


class ScenarioFailed(RuntimeError):
    """The scenario did not do what it must (the capture would be misleading)."""


def _tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (out.stdout + out.stderr).strip().splitlines()
    return " / ".join(line.strip() for line in text[:2]) if text else "unknown"


class ScenarioContext:
    def __init__(self, name: str, description: str, work_dir: Path) -> None:
        self.name = name
        self.work_dir = work_dir
        self.capture_file = f"{name}.pcap"
        self.manifest = manifest_mod.Manifest(name, self.capture_file, description)
        self.pcap_tmp = work_dir / self.capture_file
        self.client_log_path = work_dir / "client-stderr.log"
        self.pylog = PythonClientRequestLog().install()
        self.node_ports: dict[str, int] = {}
        self.rate_limit: str | None = None
        self._tcpdump: Tcpdump | None = None
        self._ports: list[int] = []
        self._stats: CaptureStats | None = None
        self._mid_stream = False
        # callables(doc) run by finish() once the request logs are in the manifest
        self.post_processors: list[Callable[[dict[str, Any]], None]] = []

    # -- clients -------------------------------------------------------------------------
    def rdkafka_conf(self, bootstrap: str, client_id: str, **conf: Any) -> dict[str, Any]:
        """librdkafka config with protocol debug logging (the request log source)."""
        base: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": client_id,
                                "debug": "protocol"}
        base.update(conf)
        return base

    def request_marker(self) -> tuple[int, int]:
        """Position in the request logs now: (librdkafka log bytes, python log entries).

        Requests logged between two markers were sent in between (librdkafka writes its
        "Sent" line before the response can arrive)."""
        try:
            size = self.client_log_path.stat().st_size
        except OSError:
            size = 0
        return size, len(self.pylog.requests)

    # -- capture -------------------------------------------------------------------------
    def start_capture(self, ports: Iterable[int], *, mid_stream: bool = False) -> None:
        if self._tcpdump is not None:
            raise ScenarioFailed("capture already started")
        self._ports = sorted(set(ports))
        self._mid_stream = mid_stream
        self._tcpdump = Tcpdump(self.pcap_tmp, self._ports)
        self._tcpdump.start()

    def stop_capture(self) -> None:
        """Wait for every connection on the capture's ports to close, then stop."""
        if self._tcpdump is None:
            raise ScenarioFailed("capture not started")
        try:
            wait_connections_closed(self._ports)
        finally:
            self._stats = self._tcpdump.stop()

    @property
    def capture_started_at(self) -> float:
        return self._tcpdump.started_at if self._tcpdump else 0.0

    @contextmanager
    def capture(self, ports: Iterable[int]) -> Iterator[None]:
        self.start_capture(ports)
        try:
            yield
        except BaseException:
            if self._tcpdump is not None and self._stats is None:
                try:
                    self._tcpdump.stop()
                except Exception:
                    pass
            raise
        self.stop_capture()

    # -- output --------------------------------------------------------------------------
    def _requests(self) -> list[dict[str, Any]]:
        text = ""
        if self.client_log_path.exists():
            text = self.client_log_path.read_text(errors="replace")
        reqs = parse_librdkafka_log(text, self.node_ports) + self.pylog.requests
        if self.pylog.errors:
            raise ScenarioFailed("; ".join(self.pylog.errors))
        assert self._stats is not None
        for r in reqs:
            # librdkafka log timestamps are truncated to milliseconds
            slack = 0.001 if r["source"] == "librdkafka-debug-log" else 0.0
            r["in_capture"] = (self._stats.started_at - slack <= r["ts"]
                               <= self._stats.stopped_at)
        reqs.sort(key=lambda r: (r["ts"], r.get("_log_offset", 0), r.get("_seq", 0)))
        return reqs

    def finish(self, out_dir: Path) -> dict[str, Any]:
        if self._stats is None:
            raise ScenarioFailed("the scenario never stopped its capture")
        self.pylog.uninstall()
        size = self.pcap_tmp.stat().st_size
        if size >= MAX_CAPTURE_BYTES:
            raise ScenarioFailed(f"{self.capture_file} is {size} bytes (limit 1 MiB)")
        doc = self.manifest.to_dict()
        doc["generated_at"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        doc["environment"] = {
            "python": platform.python_version(),
            "kernel": platform.release(),
            "tcpdump": _tool_version(["tcpdump", "--version"]),
        }
        st = self._stats
        doc["capture"] = {
            "tool": "tcpdump --immediate-mode",
            "interface": "lo (private network namespace)",
            "linktype": "EN10MB",
            "snaplen": 262144,
            "mtu": LOOPBACK_MTU,
            "filter": self._tcpdump.filter if self._tcpdump else "",
            "ports": self._ports,
            "packets_captured": st.captured,
            "packets_received_by_filter": st.received_by_filter,
            "packets_dropped_by_kernel": st.dropped_by_kernel,
            "packets_dropped_by_interface": st.dropped_by_interface,
            "file_size": size,
            "started_at": round(st.started_at, 6),
            "stopped_at": round(st.stopped_at, 6),
            "starts_mid_stream": self._mid_stream,
            "rate_limit": self.rate_limit,
        }
        doc["requests"] = self._requests()
        if not any(r["in_capture"] for r in doc["requests"]):
            raise ScenarioFailed("no client request was logged during the capture")
        for post in self.post_processors:
            post(doc)
        for r in doc["requests"]:
            for key in [k for k in r if k.startswith("_")]:
                del r[key]
        manifest_mod.validate(doc)
        out_dir.mkdir(parents=True, exist_ok=True)
        pcap_out = out_dir / self.capture_file
        json_out = out_dir / f"{self.name}.json"
        shutil.copyfile(self.pcap_tmp, str(pcap_out) + ".tmp")
        os.replace(str(pcap_out) + ".tmp", pcap_out)
        tmp = str(json_out) + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(doc, fh, indent=1, sort_keys=False)
            fh.write("\n")
        os.replace(tmp, json_out)
        print(f"{self.name}: {pcap_out} ({size} bytes, {st.captured} packets, "
              f"{st.dropped_by_kernel} dropped), {len(doc['requests'])} requests logged",
              file=sys.stdout, flush=True)
        return doc
