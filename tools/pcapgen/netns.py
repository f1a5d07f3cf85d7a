"""A private network namespace per scenario, with Ethernet-like loopback.

Every scenario runs in its own network namespace (``unshare --net``), so its capture
holds only its own traffic and the host's loopback is never touched. Inside it:

* loopback gets MTU 1500 and ``gso_max_segs 1`` so TCP segments look like those on an
  Ethernet link (no 64 KiB GSO super-packets);
* fixed broker ports come from narrowing the namespace's ephemeral port range while a
  broker binds port 0 (librdkafka's mock cluster cannot be told a port);
* an optional token-bucket rate limit slows transfers down (used to start a capture in
  the middle of a message).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

ENV_MARK = "KWSNIFF_PCAPGEN_NETNS"
LOOPBACK_MTU = 1500
_PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


class NetnsError(RuntimeError):
    """The private network namespace could not be set up."""


def inside_private_netns() -> bool:
    return os.environ.get(ENV_MARK) == "1"


def why_no_netns() -> str | None:
    """None when ``unshare --net`` can be used, else the reason why not."""
    if os.geteuid() != 0:
        return "capturing needs root (tcpdump on a private loopback via unshare --net)"
    for tool in ("unshare", "ip", "tc", "tcpdump"):
        if shutil.which(tool) is None:
            return f"required tool not found: {tool}"
    probe = subprocess.run(["unshare", "--net", "--", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"unshare --net failed: {probe.stderr.strip()}"
    return None


def run_in_netns(argv: Sequence[str], env: dict[str, str] | None = None) -> int:
    """Run ``python argv...`` in a new network namespace; return its exit code."""
    child_env = dict(os.environ if env is None else env)
    child_env[ENV_MARK] = "1"
    cmd = ["unshare", "--net", "--", sys.executable, *argv]
    return subprocess.run(cmd, env=child_env).returncode


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


def setup_loopback(mtu: int = LOOPBACK_MTU) -> None:
    """Bring the namespace's loopback up, Ethernet-sized, without GSO."""
    if not inside_private_netns():
        raise NetnsError("refusing to reconfigure loopback outside a private namespace")
    _ip("link", "set", "lo", "up")
    _ip("link", "set", "lo", "mtu", str(mtu))
    _ip("link", "set", "dev", "lo", "gso_max_segs", "1")


@contextmanager
def pinned_ephemeral_port(port: int) -> Iterator[None]:
    """While active, ``bind(port 0)`` in this namespace gets exactly ``port``."""
    if not inside_private_netns():
        raise NetnsError("refusing to change the port range outside a private namespace")
    old = _PORT_RANGE.read_text().split()
    _PORT_RANGE.write_text(f"{port} {port}\n")
    try:
        yield
    finally:
        _PORT_RANGE.write_text(f"{old[0]} {old[1]}\n")


def set_rate_limit(rate: str, burst: str = "16kb", limit: str = "4mb") -> None:
    """Token-bucket rate limit on the namespace's loopback (e.g. ``rate="2mbit"``)."""
    if not inside_private_netns():
        raise NetnsError("refusing to shape traffic outside a private namespace")
    proc = subprocess.run(["tc", "qdisc", "replace", "dev", "lo", "root", "tbf", "rate", rate,
                           "burst", burst, "limit", limit], capture_output=True, text=True)
    if proc.returncode != 0:
        raise NetnsError(f"tc tbf: {proc.stderr.strip()}")


def clear_rate_limit() -> None:
    subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], capture_output=True)
