"""What a benchmark scenario runs in: a capture on its broker ports, and its facts.

:class:`CaptureSession` starts tcpdump (``tools/pcapgen/capture.Tcpdump``: immediate
mode, large kernel buffer, raises on any dropped packet), waits for every connection on
the ports to close before stopping it, and keeps the tcpdump counters for the facts file.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable

from pcapgen import capture as _pcapgen_capture
from pcapgen.capture import CaptureStats, Tcpdump, wait_connections_closed

#: tcpdump -B for benchmark captures (KiB): the sample captures' 64 MiB is too small
#: for ~150 MB written in seconds on a busy machine; the kernel buffer absorbs bursts.
BENCH_BUFFER_KIB = 1 << 20


class ScenarioError(RuntimeError):
    """The clients did not do what the scenario requires (the capture would mislead)."""


class CaptureSession:
    """One tcpdump run writing ``path``; use as a context manager around the clients."""

    def __init__(self, path: Path, ports: Iterable[int]) -> None:
        self.path = path
        self.ports = sorted(set(ports))
        self.stats: CaptureStats | None = None
        self._tcpdump = Tcpdump(path, self.ports)
        self.started = 0.0

    def __enter__(self) -> "CaptureSession":
        saved = _pcapgen_capture.BUFFER_KIB
        _pcapgen_capture.BUFFER_KIB = BENCH_BUFFER_KIB
        try:
            self._tcpdump.start()
        finally:
            _pcapgen_capture.BUFFER_KIB = saved
        self.started = time.monotonic()
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is not None:
            try:
                self._tcpdump.stop()
            except Exception:  # the original error matters more
                pass
            return
        wait_connections_closed(self.ports, timeout=60)
        self.stats = self._tcpdump.stop(timeout=60)

    def facts(self) -> dict[str, Any]:
        """tcpdump's counters (only after a clean exit)."""
        if self.stats is None:
            raise ScenarioError("the capture was not stopped cleanly")
        st = self.stats
        return {"tcpdump_captured": st.captured,
                "tcpdump_received_by_filter": st.received_by_filter,
                "tcpdump_dropped": st.dropped_by_kernel + st.dropped_by_interface,
                "duration_s": round(st.stopped_at - st.started_at, 3)}
