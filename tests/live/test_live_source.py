"""The live packet source on real interfaces: tuples, filters, stopping, counters, errors."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kwsniff.capture import libpcap
from kwsniff.capture.live import (
    LINKTYPE_ETHERNET,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LiveSource,
    build_filter,
    list_interfaces,
    open_live,
)
from kwsniff.errors import CaptureError
from live_helpers import ROOT, EchoServer, free_port, have, kwsniff_env, send_and_receive


def _collect(source: LiveSource, until: float) -> list[tuple]:
    """All packets until ``until`` (monotonic) — stops the source from a timer thread."""
    timer = threading.Timer(max(0.0, until - time.monotonic()), source.stop)
    timer.start()
    try:
        return list(source)
    finally:
        timer.cancel()


def _tcp_payloads(packets: list[tuple], linktype: int, dport: int | None = None) -> bytes:
    """Concatenated TCP payloads of IPv4 packets (to ``dport`` only, if given)."""
    out = bytearray()
    link_len = {LINKTYPE_ETHERNET: 14, LINKTYPE_LINUX_SLL: 16, LINKTYPE_LINUX_SLL2: 20}[linktype]
    for _frame, _ts, _lt, data, _orig in packets:
        ip = data[link_len:]
        if not ip or ip[0] >> 4 != 4:
            continue
        ihl = (ip[0] & 15) * 4
        total = struct.unpack_from(">H", ip, 2)[0]
        tcp = ip[ihl:total]
        if dport is not None and struct.unpack_from(">H", tcp, 2)[0] != dport:
            continue
        out += tcp[(tcp[12] >> 4) * 4:]
    return bytes(out)


def _tcp_stream(packets: list[tuple], dport: int) -> bytes:
    """The bytes sent to ``dport``, placed by sequence number (retransmissions and
    capture reordering between CPUs do not matter)."""
    segments: list[tuple[int, bytes]] = []
    for _frame, _ts, _lt, data, _orig in packets:
        ip = data[14:]
        ihl = (ip[0] & 15) * 4
        tcp = ip[ihl:struct.unpack_from(">H", ip, 2)[0]]
        if struct.unpack_from(">H", tcp, 2)[0] != dport:
            continue
        seq = struct.unpack_from(">I", tcp, 4)[0]
        body = tcp[(tcp[12] >> 4) * 4:]
        if tcp[13] & 0x02:                     # SYN: data starts at seq + 1
            segments.append((seq + 1, b""))
        elif body:
            segments.append((seq, body))
    start = min(seq for seq, _ in segments)
    out = bytearray()
    for seq, body in sorted(segments):
        off = seq - start
        out[off:off + len(body)] = body
    return bytes(out)


# --------------------------------------------------------------------------- filters

def test_build_filter_from_ports_and_custom() -> None:
    assert build_filter([9092]) == "tcp port 9092"
    assert build_filter([9093, 9092, 9093]) == "tcp portrange 9092-9093"
    assert build_filter([9095, 9092, 9093, 9094, 19092]) == \
        "tcp portrange 9092-9095 or tcp port 19092"
    assert build_filter([9092], "  host 127.0.0.1  ") == "host 127.0.0.1"
    assert build_filter([], None) == ""
    with pytest.raises(CaptureError, match="invalid port 70000"):
        build_filter([70000])


# ------------------------------------------------------------------- real captures

def test_loopback_packets_are_file_style_tuples(capture_ok: None, echo_server: EchoServer
                                                ) -> None:
    before = time.time()
    with open_live("lo", ports=[echo_server.port]) as src:
        assert src.linktype == LINKTYPE_ETHERNET
        assert src.filter == f"tcp port {echo_server.port}"
        payload = b"kafka-live-source-check " * 10
        assert send_and_receive(echo_server.port, payload) == payload
        packets = _collect(src, time.monotonic() + 0.6)
        stats = src.stats()
    assert len(packets) >= 8           # handshake, data both ways, acks, FINs
    assert [p[0] for p in packets] == list(range(1, len(packets) + 1))
    for frame, ts, linktype, data, orig_len in packets:
        assert isinstance(frame, int) and isinstance(ts, float)
        assert before - 1 <= ts <= time.time() + 1
        assert linktype == LINKTYPE_ETHERNET
        assert isinstance(data, bytes) and orig_len == len(data)
    assert [p[1] for p in packets] == sorted(p[1] for p in packets)
    assert _tcp_payloads(packets, LINKTYPE_ETHERNET).count(payload) == 2   # there and back
    assert stats.packets == len(packets)
    assert stats.dropped == 0
    assert src.stop_reason == "stopped"


def test_filter_keeps_other_ports_out(capture_ok: None) -> None:
    wanted, other = EchoServer(), EchoServer()
    try:
        with open_live("lo", ports=[wanted.port]) as src:
            send_and_receive(other.port, b"not for us")
            send_and_receive(wanted.port, b"for us")
            packets = _collect(src, time.monotonic() + 0.5)
        payloads = _tcp_payloads(packets, LINKTYPE_ETHERNET)
        assert b"for us" in payloads and b"not for us" not in payloads
    finally:
        wanted.close()
        other.close()


def test_custom_bpf_filter_replaces_ports(capture_ok: None, echo_server: EchoServer) -> None:
    with open_live("lo", ports=[1], bpf_filter=f"tcp dst port {echo_server.port}") as src:
        send_and_receive(echo_server.port, b"one way only")
        packets = _collect(src, time.monotonic() + 0.5)
    assert packets
    for p in packets:
        ip = p[3][14:]
        ihl = (ip[0] & 15) * 4
        assert struct.unpack_from(">H", ip, ihl + 2)[0] == echo_server.port


def test_big_segments_arrive_whole(capture_ok: None, echo_server: EchoServer) -> None:
    payload = os.urandom(1_000_000)
    with open_live("lo", ports=[echo_server.port]) as src:
        send_and_receive(echo_server.port, payload)
        packets = _collect(src, time.monotonic() + 0.8)
        assert src.stats().dropped == 0
    assert max(p[4] for p in packets) > 1500          # loopback segments are large
    assert all(p[4] == len(p[3]) for p in packets)
    assert _tcp_stream(packets, echo_server.port) == payload


def test_snaplen_truncation(capture_ok: None, echo_server: EchoServer) -> None:
    payload = os.urandom(300_000)
    with open_live("lo", ports=[echo_server.port], snaplen=120) as src:
        assert src.snaplen == 120
        send_and_receive(echo_server.port, payload)
        packets = _collect(src, time.monotonic() + 0.6)
    assert max(p[4] for p in packets) > 1500          # loopback segments are large
    assert all(len(p[3]) <= 120 for p in packets)
    assert any(p[4] > len(p[3]) for p in packets)     # orig_len > captured: truncated


def test_any_interface_uses_linux_cooked_capture(capture_ok: None,
                                                 echo_server: EchoServer) -> None:
    with open_live("any", ports=[echo_server.port]) as v2:
        assert v2.linktype == LINKTYPE_LINUX_SLL2        # as tcpdump -i any
        send_and_receive(echo_server.port, b"cooked v2")
        packets = _collect(v2, time.monotonic() + 0.5)
    assert packets and all(p[2] == LINKTYPE_LINUX_SLL2 for p in packets)
    assert struct.unpack_from(">H", packets[0][3], 0)[0] == 0x0800   # SLL2 protocol: IPv4
    assert b"cooked v2" in _tcp_payloads(packets, LINKTYPE_LINUX_SLL2)

    with open_live("any", ports=[echo_server.port], datalink=LINKTYPE_LINUX_SLL) as v1:
        assert v1.linktype == LINKTYPE_LINUX_SLL
        send_and_receive(echo_server.port, b"cooked v1")
        packets = _collect(v1, time.monotonic() + 0.5)
    assert packets and all(p[2] == LINKTYPE_LINUX_SLL for p in packets)
    assert struct.unpack_from(">H", packets[0][3], 14)[0] == 0x0800   # SLL protocol: IPv4
    assert b"cooked v1" in _tcp_payloads(packets, LINKTYPE_LINUX_SLL)


def test_duration_ends_iteration_on_an_idle_link(capture_ok: None) -> None:
    start = time.monotonic()
    with open_live("lo", ports=[free_port()], duration=0.4) as src:
        batches = list(src.batches(tick=0.1))
    elapsed = time.monotonic() - start
    assert 0.35 <= elapsed < 2.0
    assert src.stop_reason == "duration"
    assert batches and all(b == [] for b in batches)   # idle ticks let callers act


def test_stop_from_another_thread_is_prompt(capture_ok: None) -> None:
    with open_live("lo", ports=[free_port()]) as src:
        threading.Timer(0.3, src.stop).start()
        start = time.monotonic()
        assert list(src) == []
        assert time.monotonic() - start < 1.5
        assert src.stop_reason == "stopped"


def test_packets_captured_before_stop_are_still_delivered(capture_ok: None) -> None:
    import socket

    port = free_port()
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", port))
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        with open_live("lo", bpf_filter=f"udp dst port {port}") as src:
            for i in range(2000):
                tx.sendto(i.to_bytes(4, "big"), ("127.0.0.1", port))
            src.stop()                 # at once: most packets are still in the kernel
            packets = list(src)
    finally:
        sink.close()
        tx.close()
    assert len(packets) == 2000
    assert src.stats().packets == 2000 and src.stop_reason == "stopped"


def test_close_is_idempotent_and_keeps_last_counters(capture_ok: None,
                                                     echo_server: EchoServer) -> None:
    src = open_live("lo", ports=[echo_server.port])
    send_and_receive(echo_server.port, b"x")
    packets = _collect(src, time.monotonic() + 0.4)
    src.close()
    src.close()
    assert src.stats().packets == len(packets) > 0
    assert list(src) == [] and src.poll(0.01) == []


def test_high_rate_burst_is_counted_without_loss(capture_ok: None) -> None:
    """50k UDP datagrams in a burst: all delivered, none dropped (64 MiB buffer)."""
    import socket

    port = free_port()
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", port))
    sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    n = 50_000
    try:
        with open_live("lo", bpf_filter=f"udp dst port {port}") as src:
            for i in range(n):
                tx.sendto(i.to_bytes(4, "big"), ("127.0.0.1", port))
            packets = _collect(src, time.monotonic() + 1.0)
            stats = src.stats()
    finally:
        sink.close()
        tx.close()
    assert stats.dropped == 0
    assert len(packets) == n
    seqs = [int.from_bytes(p[3][-4:], "big") for p in packets]
    assert seqs == list(range(n))


# --------------------------------------------------------------------- Ethernet via veth

@pytest.fixture
def veth_namespaces() -> Iterator[tuple[str, str, str]]:
    """Two private network namespaces joined by a veth pair (traffic never leaves them).

    Yields (client namespace, its Ethernet device, server address in the other one).
    """
    if not have("ip"):
        pytest.skip("iproute2 not installed")
    tag = f"{os.getpid() % 100000}"
    ns_a, ns_b, dev_a, dev_b = f"kwsla{tag}", f"kwslb{tag}", f"kwsa{tag}", f"kwsb{tag}"
    steps = [["ip", "netns", "add", ns_a], ["ip", "netns", "add", ns_b],
             ["ip", "link", "add", dev_a, "netns", ns_a, "type", "veth",
              "peer", "name", dev_b, "netns", ns_b],
             ["ip", "-n", ns_a, "addr", "add", "198.51.100.1/30", "dev", dev_a],
             ["ip", "-n", ns_b, "addr", "add", "198.51.100.2/30", "dev", dev_b],
             ["ip", "-n", ns_a, "link", "set", dev_a, "up"],
             ["ip", "-n", ns_b, "link", "set", dev_b, "up"]]
    try:
        for cmd in steps:
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                pytest.skip(f"cannot build a veth test network: {res.stderr.strip()}")
        yield ns_a, dev_a, ns_b
    finally:
        subprocess.run(["ip", "netns", "del", ns_a], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns_b], capture_output=True)


def test_ethernet_interface(capture_ok: None, veth_namespaces: tuple[str, str, str]) -> None:
    ns_a, dev_a, ns_b = veth_namespaces
    port = 19092
    server = subprocess.Popen(
        ["ip", "netns", "exec", ns_b, sys.executable, "-c",
         "import socket\n"
         "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
         f"s.bind(('198.51.100.2', {port})); s.listen(1); print('up', flush=True)\n"
         "c,_=s.accept(); d=c.recv(100); c.sendall(d.upper()); c.close()\n"],
        stdout=subprocess.PIPE, text=True)
    env = kwsniff_env()
    env["PYTHONPATH"] = str(Path(__file__).parent) + os.pathsep + env["PYTHONPATH"]
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "up"
        res = subprocess.run(
            ["ip", "netns", "exec", ns_a, sys.executable, "-c",
             f"import live_helpers; live_helpers.ethernet_probe({dev_a!r}, '198.51.100.2', {port})"],
            capture_output=True, text=True, env=env, timeout=30)
        server.wait(timeout=5)
    finally:
        server.kill()
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["linktype"] == LINKTYPE_ETHERNET
    assert bytes.fromhex(got["reply"]) == b"OVER ETHERNET"
    assert bytes.fromhex(got["to_server"]) == b"over ethernet"
    assert bytes.fromhex(got["from_server"]) == b"OVER ETHERNET"
    assert "000000000000" not in got["macs"] and len(got["macs"]) >= 2   # real MACs, not lo's


# -------------------------------------------------------------------------- errors

def test_unknown_interface_lists_the_available_ones() -> None:
    with pytest.raises(CaptureError) as info:
        open_live("kwsnope0")
    msg = str(info.value)
    assert "unknown interface 'kwsnope0'" in msg and "lo" in msg and "\n" not in msg


def test_invalid_capture_filter(capture_ok: None) -> None:
    with pytest.raises(CaptureError, match="invalid capture filter 'tcp port'"):
        open_live("lo", bpf_filter="tcp port")


def test_invalid_settings() -> None:
    with pytest.raises(CaptureError, match="snap length"):
        open_live("lo", snaplen=0)
    with pytest.raises(CaptureError, match="buffer size"):
        open_live("lo", buffer_mib=0)
    with pytest.raises(CaptureError, match="duration"):
        open_live("lo", duration=-1)


def test_list_interfaces_includes_loopback_and_any() -> None:
    devices = {d.name: d for d in list_interfaces()}
    assert devices["lo"].loopback and "any" in devices
    assert libpcap.version().startswith("libpcap version")


_OPEN_LO = ("from kwsniff.capture.live import open_live\n"
            "from kwsniff.errors import CaptureError\n"
            "try:\n    open_live('lo')\nexcept CaptureError as e:\n    print(e)\n")


@pytest.mark.skipif(not have("setpriv"), reason="setpriv (util-linux) not installed")
def test_no_permission_says_what_is_needed(capture_ok: None) -> None:
    """Root without CAP_NET_RAW/CAP_NET_ADMIN (bounding set dropped) cannot capture."""
    res = subprocess.run(["setpriv", "--bounding-set=-net_raw,-net_admin", sys.executable,
                          "-c", _OPEN_LO], capture_output=True, text=True, env=kwsniff_env(),
                         cwd=ROOT, timeout=30)
    assert res.returncode == 0, res.stderr
    assert "no permission to capture on lo" in res.stdout
    assert "root" in res.stdout and "CAP_NET_RAW" in res.stdout and "CAP_NET_ADMIN" in res.stdout


def test_libpcap_missing_says_how_to_install() -> None:
    env = kwsniff_env()
    env["KWSNIFF_LIBPCAP"] = "libpcap-not-installed.so.9"
    res = subprocess.run([sys.executable, "-c", _OPEN_LO], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=30)
    assert res.returncode == 0, res.stderr
    assert "needs libpcap" in res.stdout and "apt-get install libpcap0.8" in res.stdout
