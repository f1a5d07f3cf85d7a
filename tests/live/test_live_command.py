"""`kwsniff live` end to end: real captures on loopback, stop conditions, outputs, errors."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from live_helpers import (
    KWSNIFF,
    ROOT,
    FakeBroker,
    free_port,
    have,
    kafka_client,
    kwsniff_env,
    run_kwsniff,
)


class LiveRun:
    """``kwsniff live ...`` in the background, started once it is capturing."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen([*KWSNIFF, "live", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=kwsniff_env(),
                                     cwd=ROOT)
        assert self.proc.stderr is not None
        self.banner = self.proc.stderr.readline()
        if "capturing on" not in self.banner:
            out, err = self.proc.communicate(timeout=30)
            raise AssertionError(f"kwsniff live did not start: {self.banner}{err}")

    def finish(self, sig: int | None = signal.SIGINT, timeout: float = 30
               ) -> tuple[int, str, str]:
        if sig is not None:
            self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, self.banner + err


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _one_line_error(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("kwsniff live: ")
    return lines[0]


# ------------------------------------------------------------------------ errors

def test_interface_is_required() -> None:
    assert "an interface is required" in _one_line_error(run_kwsniff(["live"]))


def test_unknown_interface_lists_available_ones() -> None:
    line = _one_line_error(run_kwsniff(["live", "-i", "kwsnope0"]))
    assert "unknown interface 'kwsnope0'" in line
    assert "lo" in line.split("available:")[1] and "any" in line


@pytest.mark.skipif(not have("setpriv"), reason="setpriv (util-linux) not installed")
def test_no_permission_without_capture_capabilities(capture_ok: None) -> None:
    # The same process as root but with CAP_NET_RAW and CAP_NET_ADMIN removed from its
    # bounding set: what an unprivileged user gets.
    res = run_kwsniff(["live", "-i", "lo"],
                      prefix=["setpriv", "--bounding-set=-net_raw,-net_admin"])
    line = _one_line_error(res)
    assert "no permission to capture on lo" in line
    assert "root" in line and "CAP_NET_RAW" in line and "CAP_NET_ADMIN" in line


def test_no_permission_as_nobody(capture_ok: None, tmp_path: Path) -> None:
    """As user nobody (when nobody can run this interpreter and read the tree)."""
    if not have("setpriv"):
        pytest.skip("setpriv not installed")
    probe = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            *KWSNIFF, "--version"], capture_output=True, text=True,
                           env=kwsniff_env(), cwd=ROOT)
    if probe.returncode != 0:
        pytest.skip(f"user nobody cannot run the interpreter here: {probe.stderr.strip()[:200]}")
    res = run_kwsniff(["live", "-i", "lo"],
                      prefix=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
    assert "no permission to capture on lo" in _one_line_error(res)


def test_libpcap_missing_says_how_to_install() -> None:
    env = kwsniff_env()
    env["KWSNIFF_LIBPCAP"] = "libpcap-not-installed.so.9"
    line = _one_line_error(run_kwsniff(["live", "-i", "lo"], env=env))
    assert "needs libpcap" in line and "apt-get install libpcap0.8" in line


def test_libpcap_hidden_from_the_loader() -> None:
    """The system libpcap replaced by an empty file in a private mount namespace."""
    from kwsniff.capture import libpcap

    lib = libpcap.load()
    real = Path(str(lib._name))
    if not real.is_absolute():
        import ctypes.util
        found = [p for p in Path("/usr/lib").rglob("libpcap.so*") if p.is_file()]
        if not found:
            pytest.skip(f"cannot locate the file of {real} ({ctypes.util.find_library('pcap')})")
        real = found[0]
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if not have("unshare") or probe.returncode != 0:
        pytest.skip("cannot create a mount namespace here")
    targets = " ".join(str(p) for p in real.parent.glob("libpcap.so*") if p.is_file())
    script = (f"for f in {targets}; do mount --bind /dev/null $f || exit 99; done; "
              f"exec {' '.join(KWSNIFF)} live -i lo")
    res = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                         text=True, env=kwsniff_env(), cwd=ROOT, timeout=60)
    if res.returncode == 99:
        pytest.skip("cannot bind-mount over the library here")
    line = _one_line_error(res)
    assert "needs libpcap" in line and "apt-get install libpcap0.8" in line


def test_invalid_capture_filter(capture_ok: None) -> None:
    line = _one_line_error(run_kwsniff(["live", "-i", "lo", "-f", "tcp prot 9092"]))
    assert "invalid capture filter 'tcp prot 9092'" in line


def test_invalid_display_filter_fails_before_capturing() -> None:
    # (display filter errors point at the column on two extra lines, as in decode)
    res = run_kwsniff(["live", "-i", "kwsnope0", "-Y", "api =="])
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith("kwsniff live: bad display filter")


def test_list_interfaces() -> None:
    res = run_kwsniff(["live", "-D"])
    assert res.returncode == 0
    names = [line.split()[1] for line in res.stdout.splitlines()]
    assert "lo" in names and "any" in names


# ----------------------------------------------------------------- stop conditions

def test_duration_on_an_idle_link_prints_the_summary(capture_ok: None) -> None:
    start = time.monotonic()
    res = run_kwsniff(["live", "-i", "lo", "-p", str(free_port()), "--duration", "0.8"])
    assert res.returncode == 0, res.stderr
    assert 0.8 <= time.monotonic() - start < 20
    assert res.stdout == ""
    assert "ended (duration reached): 0 packets seen, 0 dropped by the kernel" in res.stderr
    assert "0 exchanges (0 shown)" in res.stderr and "0 unpaired" in res.stderr


def test_ctrl_c_stops_cleanly_with_summary_and_flushed_outputs(capture_ok: None,
                                                               tmp_path: Path) -> None:
    broker = FakeBroker()
    try:
        run = LiveRun(["-i", "lo", "-p", str(broker.port), "-o", str(tmp_path / "x.jsonl"),
                       "-w", str(tmp_path / "x.pcapng")])
        kafka_client(broker.port, 4)
        time.sleep(0.5)
        rc, out, err = run.finish(signal.SIGINT)
    finally:
        broker.close()
    assert rc == 0, err
    assert "Traceback" not in err
    lines = out.splitlines()
    assert len(lines) == 4 and all("ApiVersions v0" in line for line in lines)
    assert "ended (stopped)" in err and "dropped by the kernel" in err
    assert "4 exchanges (4 shown)" in err and "4 paired, 0 unpaired" in err
    objs = _jsonl(tmp_path / "x.jsonl")
    assert [o["kind"] for o in objs] == ["exchange"] * 4 + ["summary"]
    assert [o["correlation_id"] for o in objs[:4]] == [1, 2, 3, 4]
    assert all(o["status"] == "paired" and o["latency_ms"] >= 0 for o in objs[:4])
    assert objs[-1]["exchanges"] == 4 and objs[-1]["capture"] == "live:lo"
    # the packets written while decoding decode to the same exchanges
    dec = run_kwsniff(["decode", str(tmp_path / "x.pcapng"), "-p", str(broker.port)])
    assert dec.returncode == 0, dec.stderr
    assert len(dec.stdout.splitlines()) == 4
    seen = int(err.split(" packets seen")[0].rsplit(" ", 1)[1])
    assert f", {seen} packets" in dec.stderr


def test_count_stops_after_n_exchanges(capture_ok: None) -> None:
    broker = FakeBroker()
    try:
        run = LiveRun(["-i", "lo", "-p", str(broker.port), "-c", "3"])
        kafka_client(broker.port, 6, pause=0.05)
        rc, out, err = run.finish(sig=None, timeout=30)
    finally:
        broker.close()
    assert rc == 0, err
    assert len(out.splitlines()) == 3
    assert "ended (exchange count reached)" in err


def test_unanswered_after_timeout_while_still_capturing(capture_ok: None,
                                                        tmp_path: Path) -> None:
    broker = FakeBroker(answer=False)
    out_file = tmp_path / "u.jsonl"
    try:
        run = LiveRun(["-i", "lo", "-p", str(broker.port), "--timeout", "0.5",
                       "-o", str(out_file)])
        import socket
        from live_helpers import api_versions_request

        with socket.create_connection(("127.0.0.1", broker.port)) as conn:
            conn.sendall(api_versions_request(42, "kws-silent"))
            deadline = time.monotonic() + 10
            objs: list[dict] = []
            while time.monotonic() < deadline:
                objs = _jsonl(out_file) if out_file.exists() else []
                if objs:
                    break
                time.sleep(0.1)
            # reported while the connection is still open and the capture still running
            assert run.proc.poll() is None
            assert objs and objs[0]["status"] == "unanswered"
            assert objs[0]["correlation_id"] == 42 and objs[0]["client_id"] == "kws-silent"
        rc, out, err = run.finish()
    finally:
        broker.close()
    assert rc == 0, err
    assert "no response" in out
    assert "1 unpaired (1 unanswered, 0 orphan responses)" in err


def test_any_interface_with_verbose_and_hex(capture_ok: None) -> None:
    broker = FakeBroker()
    try:
        run = LiveRun(["-i", "any", "-p", str(broker.port), "-V", "-x", "-c", "1"])
        assert "Linux cooked v2" in run.banner
        kafka_client(broker.port, 1)
        rc, out, err = run.finish(sig=None)
    finally:
        broker.close()
    assert rc == 0, err
    assert "ApiVersions" in out and "kws-fake-client" in out
    assert "request frame" in out and "response frame" in out and "0000  " in out


def test_display_filter_and_quiet_jsonl_to_stdout(capture_ok: None) -> None:
    broker = FakeBroker()
    try:
        run = LiveRun(["-i", "lo", "-p", str(broker.port), "-q", "-o", "-",
                       "-Y", "correlation_id >= 3"])
        kafka_client(broker.port, 4)
        time.sleep(0.4)
        rc, out, err = run.finish()
    finally:
        broker.close()
    assert rc == 0, err
    objs = [json.loads(line) for line in out.splitlines()]
    assert [o["correlation_id"] for o in objs if o["kind"] == "exchange"] == [3, 4]
    assert objs[-1]["kind"] == "summary"


# ------------------------------------------------------------ real Kafka traffic

@pytest.mark.slow
def test_real_kafka_producer_and_consumer_group(capture_ok: None, tmp_path: Path) -> None:
    """librdkafka's mock cluster on loopback: produce, consume in a group, commit."""
    pytest.importorskip("confluent_kafka")
    helper = subprocess.Popen([str(Path(KWSNIFF[0])), str(Path(__file__).with_name(
        "kafka_traffic.py")), "--messages", "20"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True, env=kwsniff_env(), cwd=ROOT)
    assert helper.stdin is not None and helper.stdout is not None
    try:
        port = json.loads(helper.stdout.readline())["port"]
        jsonl = tmp_path / "kafka.jsonl"
        pcapng = tmp_path / "kafka.pcapng"
        run = LiveRun(["-i", "lo", "-p", str(port), "-o", str(jsonl), "--records",
                       "-w", str(pcapng), "-t", "e"])
        helper.stdin.write("go\n")
        helper.stdin.flush()
        result = json.loads(helper.stdout.readline())
        helper.wait(timeout=60)
        time.sleep(0.5)
        rc, out, err = run.finish(signal.SIGINT)
    finally:
        helper.kill()
    assert result.get("errors") == [], result
    assert sorted(result["consumed"]) == sorted(result["produced"])
    assert rc == 0, err

    objs = _jsonl(jsonl)
    exchanges = [o for o in objs if o["kind"] == "exchange"]
    records = [o for o in objs if o["kind"] == "record"]
    by_api: dict[str, list[dict]] = {}
    for o in exchanges:
        by_api.setdefault(o["api_name"], []).append(o)

    # the produced messages: every value in a Produce request, and read back by Fetch
    produced = {r["value"]["text"] for r in records
                if r["api_name"] == "Produce" and r["side"] == "request"}
    fetched = {r["value"]["text"] for r in records
               if r["api_name"] == "Fetch" and r["side"] == "response"}
    assert produced == set(result["produced"])
    assert fetched == set(result["produced"])
    assert all(o["status"] == "paired" for o in by_api["Produce"])

    # the consumer group traffic
    for api in ("FindCoordinator", "JoinGroup", "SyncGroup", "OffsetFetch", "OffsetCommit"):
        assert api in by_api, f"no {api} in {sorted(by_api)}"
    group_apis = {o["api_name"] for o in exchanges if "kws-live-group" in o["groups"]}
    assert {"JoinGroup", "SyncGroup", "OffsetCommit"} <= group_apis
    commits = by_api["OffsetCommit"]
    assert all(o["status"] == "paired" and o["error_codes"] in ([], [0]) for o in commits)

    # the latencies: measured on every paired exchange; the group join waits for the
    # mock coordinator's initial rebalance delay (3 s by default)
    paired = [o for o in exchanges if o["status"] == "paired"]
    assert paired and all(o["latency_ms"] is not None and o["latency_ms"] >= 0 for o in paired)
    assert max(o["latency_ms"] for o in by_api["JoinGroup"]) > 1000
    assert any(" ms " in line for line in out.splitlines() if "Produce" in line)
    # (latency in one unit style, milliseconds: the join's takes four digits or more)
    assert any("JoinGroup" in line and re.search(r" \d{4,}\.\d\d ms", line)
               for line in out.splitlines())

    # the summary and the run counters
    assert "ended (stopped)" in err and " 0 dropped by the kernel" in err
    assert f"{len(exchanges)} exchanges ({len(exchanges)} shown)" in err
    assert objs[-1]["kind"] == "summary" and objs[-1]["exchanges"] == len(exchanges)
    assert len(out.splitlines()) == len(exchanges)

    # the pcapng written meanwhile holds the same conversation
    dec = run_kwsniff(["export", str(pcapng), "-p", str(port), "-o", "-", "--no-summary"])
    assert dec.returncode == 0, dec.stderr
    again = [json.loads(line) for line in dec.stdout.splitlines()]
    key = ("stream", "correlation_id", "api_name", "status")
    assert sorted(tuple(o[k] for k in key) for o in again) == \
        sorted(tuple(o[k] for k in key) for o in exchanges)
