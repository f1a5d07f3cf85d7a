"""decode -j N: byte-identical to one process, workers' failures reported, clean exits."""

from __future__ import annotations

import gzip
import io
import struct
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kwsniff.cli import main
from kwsniff.commands import parallel, parallel_pipe
from kwsniff.output.summary import SummaryFormatter

from cli_run import run_cli, time_limit

ROOT = Path(__file__).resolve().parents[2]
PCAPS = sorted((ROOT / "pcaps").glob("*.pcap"))
TANSU = ROOT / "pcaps" / "tansu-admin.pcap"
GROUP = ROOT / "pcaps" / "rdkafka-consumer-group.pcap"
pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not PCAPS,
                                reason="needs fork and the captures in pcaps/")


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Blocks of 1 and 3 exchanges interleave the workers on small captures; a test
    that hangs fails after a minute instead of blocking the suite."""
    monkeypatch.setattr(parallel, "BLOCK", 1)
    with time_limit(60, "decode -j hangs"):
        yield


_run = run_cli


def _same(capsys: pytest.CaptureFixture[str], argv: list[str], jobs: int) -> str:
    one = _run(capsys, ["decode", "-j", "1", *argv])
    many = _run(capsys, ["decode", "-j", str(jobs), *argv])
    assert many == one
    return one[1]


@pytest.mark.parametrize("pcap", PCAPS, ids=lambda p: p.name)
def test_identical_every_capture(capsys: pytest.CaptureFixture[str], pcap: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _same(capsys, [str(pcap)], 2)
    monkeypatch.setattr(parallel_pipe, "pipeline_wanted", lambda *a: False)   # (without it)
    _same(capsys, [str(pcap)], 2)
    _same(capsys, ["-V", str(pcap)], 2)
    _same(capsys, ["-V", "-x", str(pcap)], 3)


@pytest.mark.parametrize("argv", [
    ["-Y", "kafka.nosuch == 1"],
    ["-Y", "kafka.api_key == 1"],
    ["-Y", "api_key == 1"],
    ["-Y", 'topic == "admin-orders"'],
    ["-Y", "topic_id"],
    ["-Y", "api == Metadata or error", "-V"],
    ["--color", "always"],
    ["--color", "always", "-V", "--offsets"],
    ["-t", "ad"],
    ["-t", "e", "-x", "--full-values", "-V"],
], ids=lambda a: " ".join(a))
@pytest.mark.parametrize("pcap", [TANSU, GROUP], ids=lambda p: p.name)
def test_identical_options(capsys: pytest.CaptureFixture[str], pcap: Path,
                           argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    if argv[:2] == ["-Y", "kafka.nosuch == 1"]:
        code, _, err = _run(capsys, ["decode", "-j", "2", *argv, str(pcap)])
        assert code == 2 and "bad display filter" in err    # no such field: same error
        return
    _same(capsys, [*argv, str(pcap)], 2)
    monkeypatch.setattr(parallel, "BLOCK", 3)
    _same(capsys, [*argv, str(pcap)], 3)


def test_topic_names_learnt_as_in_one_process() -> None:
    """Every worker's output-layer topic-name map ends up equal (content and order) to
    the one-process map, though it walks the facts of few exchanges it does not own."""
    from kwsniff.capture import open_capture
    from kwsniff.engine import Engine, EngineOptions
    from kwsniff.kafka.decoding import complete
    from kwsniff.output.pipeline import Selection

    def names(worker: int | None, jobs: int = 3, lean: bool = False) -> list[tuple[str, str]]:
        selection = Selection(lean=lean)
        with open_capture(str(TANSU)) as source:
            engine = Engine(EngineOptions(defer_bodies=worker is not None))
            exchanges = engine.run(source)
            if worker is not None:      # as a worker does
                exchanges = parallel._owned(
                    exchanges, worker, jobs, selection.names, lambda: None, [],
                    lambda ex: complete(ex, engine.ctx.annotate_ctx))
            for _ in selection(exchanges):
                pass
        return list(selection.names._names.items())

    expected = names(None)
    assert expected      # the capture teaches names (DeleteTopics, Metadata v12, ...)
    for worker in range(3):
        assert names(worker) == expected
        assert names(worker, lean=True) == expected     # (decode -V workers)
    assert names(None, lean=True) == expected


def test_teaching_schemas() -> None:
    from kwsniff.kafka.model import KafkaMessage
    from kwsniff.output.facts import teaches
    body: dict = {}
    assert teaches(KafkaMessage("response", b"", 3, 12, body=body))   # Metadata
    assert teaches(KafkaMessage("request", b"", 1, 13, body=body))    # Fetch ids
    assert not teaches(KafkaMessage("request", b"", 1, 12, body=body))
    assert not teaches(KafkaMessage("request", b"", 0, 8, body=body))  # Produce
    assert not teaches(KafkaMessage("response", b"", 3, 12, body=None))
    assert teaches(KafkaMessage("response", b"", 9999, 0, body=body))  # unknown


def test_jobs_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kwsniff.cli import build_parser

    def jobs(*argv: str) -> int:
        args = build_parser("decode").parse_args(["decode", *argv])
        return parallel.decoding_jobs(args, heavy=args.verbose or args.hex)

    # (auto counts idle CPUs: all of them here, one in test_jobs_auto_on_a_busy_machine)
    monkeypatch.setattr(parallel, "_idle_cpus", lambda: float(parallel._usable_cpus()))
    small = str(TANSU)
    assert jobs(small) == 1                      # auto: small file
    assert jobs("-j", "3", small) == 3
    assert jobs("-j", "3", "-c", "5", small) == 1
    assert jobs("-j", "3", "-") == 1
    assert jobs("-j", "3", str(tmp_path / "missing.pcap")) == 1
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert jobs("-j", "3", str(fifo)) == 1       # a pipe cannot be read by every worker
    packed = tmp_path / "t.pcap.gz"
    packed.write_bytes(gzip.compress(TANSU.read_bytes()))
    monkeypatch.setattr(parallel, "AUTO_MIN_BYTES", 0)
    assert jobs("-V", str(packed)) == 1          # auto: compressed
    assert jobs("-j", "2", str(packed)) == 2
    auto = min(parallel._usable_cpus(), parallel.AUTO_MAX_JOBS)
    assert jobs("-V", small) == auto and jobs("-x", small) == auto
    assert jobs(small) == 1                      # auto: summary lines of a small file
    monkeypatch.setattr(parallel, "SUMMARY_MIN_BYTES", 0)
    summary_jobs = min(parallel._usable_cpus(), parallel.SUMMARY_MAX_JOBS)
    assert jobs(small) == summary_jobs           # whatever its packets' sizes
    assert jobs(str(packed)) == 1                # auto: compressed
    assert jobs("-j", "2", small) == 2           # an explicit -j is obeyed
    monkeypatch.setattr(parallel, "SUMMARY_MIN_BYTES", TANSU.stat().st_size + 1)
    assert jobs(small) == 1
    assert jobs("-V", small) == auto


def test_jobs_auto_on_a_busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    from kwsniff.cli import build_parser

    def jobs(*argv: str) -> int:
        args = build_parser("decode").parse_args(["decode", *argv])
        return parallel.decoding_jobs(args, heavy=args.verbose or args.hex)

    monkeypatch.setattr(parallel, "AUTO_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "SUMMARY_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "_usable_cpus", lambda: 4)
    idle = {"cpus": 0.9}
    monkeypatch.setattr(parallel, "_idle_cpus", lambda: idle["cpus"])
    assert jobs("-V", str(TANSU)) == 1           # one core free at most: one process
    assert jobs(str(TANSU)) == 1
    assert jobs("-j", "3", "-V", str(TANSU)) == 3   # an explicit -j is obeyed
    idle["cpus"] = 2.6
    assert jobs("-V", str(TANSU)) == 3
    assert jobs(str(TANSU)) == 2
    idle["cpus"] = 4.0
    assert jobs("-V", str(TANSU)) == parallel.AUTO_MAX_JOBS


def test_idle_cpus_is_bounded() -> None:
    n = parallel._idle_cpus(0.02)
    assert 0.0 <= n <= parallel._usable_cpus()


def test_compressed_captures_are_recognised(tmp_path: Path) -> None:
    packed = tmp_path / "t.pcap.gz"
    packed.write_bytes(gzip.compress(TANSU.read_bytes()))
    assert parallel._compressed(str(TANSU)) is False
    assert parallel._compressed(str(packed)) is True
    assert parallel._compressed(str(tmp_path / "missing.pcap")) is True


@pytest.mark.parametrize("how", ["exception", "signal"])
def test_crashing_worker_is_reported(capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    parent = os.getpid()

    class Crashing(SummaryFormatter):   # (an extension type when compiled: subclass it)
        def format(self, exchange, facts=None):  # noqa: ANN001, ANN202
            if os.getpid() != parent and exchange.index == 5:
                if how == "signal":
                    os.kill(os.getpid(), signal.SIGKILL)
                raise RuntimeError("boom")
            return super().format(exchange, facts)

    monkeypatch.setattr(parallel, "SummaryFormatter", Crashing)
    monkeypatch.setattr(parallel_pipe, "pipeline_wanted", lambda *a: False)   # (not piped)
    code, out, err = _run(capsys, ["decode", "-j", "2", str(GROUP)])
    why = "RuntimeError: boom" if how == "exception" else "killed by signal SIGKILL"
    assert code == 70
    # exchange 5 belongs to worker 1 of 2 with blocks of one exchange
    assert err == f"kwsniff decode: internal error: decoding worker 1 failed: {why}\n"
    if how == "exception":   # what was rendered before the failure is shown
        assert len(out.splitlines()) == 4


def _kwsniff(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_broken_pipe_into_head() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = f"{sys.executable} -m kwsniff decode -j 2 -V -x {GROUP} | head -1; " \
          "echo ${PIPESTATUS[0]} >&2"
    done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env,
                          timeout=60, cwd=ROOT)
    assert done.stdout.count("\n") == 1
    assert done.stderr == "0\n"


def test_ctrl_c_ends_workers() -> None:
    # Workers sleep on every exchange; Ctrl-C (SIGINT to the process group) must end
    # the run at once, without a traceback.
    code = (
        "import sys, time\n"
        "from kwsniff.output.summary import SummaryFormatter\n"
        "from kwsniff.commands import parallel, parallel_pipe\n"
        "class Slow(SummaryFormatter):\n"
        "    def format(self, ex, facts=None):\n"
        "        time.sleep(0.2)\n"
        "        return super().format(ex, facts)\n"
        "parallel.SummaryFormatter = parallel_pipe.SummaryFormatter = Slow\n"
        "from kwsniff.cli import main\n"
        f"sys.exit(main(['decode', '-j', '2', {str(GROUP)!r}]))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(_kwsniff(code), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, start_new_session=True)
    time.sleep(1.5)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert b"Traceback" not in err
    with pytest.raises(ProcessLookupError):     # the workers are gone too
        os.killpg(proc.pid, 0)


FLAKY_PLUGIN = '''
API = None

def register(api):
    global API
    API = api
    api.payload_decoder(decode, topics="*", parts=("key", "value"))
    api.exchange_field("parity", parity, type="int", digest=True)
    api.digest(3, request=metadata)

def decode(data, where):
    if len(data) % 3 == 0:
        raise ValueError(f"{len(data)} bytes")
    return {"n": len(data)} if len(data) % 3 == 1 else None

def parity(ex):
    if ex.index % 4 == 0:
        raise RuntimeError(f"exchange {ex.index}")
    if ex.index % 5 == 0:
        API.report(f"notice {ex.index % 3}")
    return ex.index % 2

def metadata(body, version, facts):
    if len(body.get("Topics") or ()) != 1:
        raise KeyError("topics")
    return "one topic"
'''


@pytest.mark.parametrize("argv", [[], ["-V"], ["-Y", "flaky.parity == 1"]],
                         ids=lambda a: " ".join(a) or "summary")
@pytest.mark.parametrize("pcap", [GROUP, ROOT / "pcaps" / "plugins-avro-protobuf-json.pcap"],
                         ids=lambda p: p.name)
def test_plugin_reports_identical(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                  pcap: Path, argv: list[str]) -> None:
    """Hook failures (first one shown, the rest counted), plugin notices (each shown
    once) and the end-of-run failure counts come out as in one process."""
    (tmp_path / "flaky.py").write_text(FLAKY_PLUGIN)
    _same(capsys, ["--plugins", str(tmp_path), *argv, str(pcap)], 3)
    code, _, err = _run(capsys, ["decode", "-j", "3", "--plugins", str(tmp_path), *argv,
                                 str(pcap)])
    assert "plugin flaky: field flaky.parity failed (exchange 4): RuntimeError" in err
    assert "kwsniff: plugin flaky: notice " in err
    assert "plugin flaky: field flaky.parity failed" in err and "times in all" in err


VENDOR_PLUGIN = '''
def register(api):
    api.vendor_api(1000, "AcmeEcho", request=request, response=response)

def request(reader, version):
    raise ValueError("cannot decode requests")

def response(reader, version):
    return {"Topics": [{"TopicId": "6f1c2a3e-1111-4a5b-8c9d-0123456789ab",
                        "Name": "alpha"}]}
'''


def _vendor_capture(path: Path, pairs: int) -> None:
    """One TCP connection to port 9092 carrying ``pairs`` AcmeEcho (API 1000) exchanges."""
    from scapy.all import IP, TCP, Ether, wrpcap

    seq = {True: 100, False: 900}
    packets = []

    def send(from_client: bool, flags: str, data: bytes = b"") -> None:
        ports = (40000, 9092) if from_client else (9092, 40000)
        hosts = ("10.0.0.1", "10.0.0.2") if from_client else ("10.0.0.2", "10.0.0.1")
        p = Ether() / IP(src=hosts[0], dst=hosts[1]) / TCP(
            sport=ports[0], dport=ports[1], flags=flags, seq=seq[from_client],
            ack=seq[not from_client]) / data
        p.time = 1_700_000_000 + len(packets) / 1000
        packets.append(p)
        seq[from_client] += len(data) + (1 if set(flags) & {"S", "F"} else 0)

    send(True, "S")
    send(False, "SA")
    send(True, "A")
    for corr in range(pairs):
        req = struct.pack(">hhi", 1000, 0, corr) + struct.pack(">h", 4) + b"acme" + b"ping"
        send(True, "PA", struct.pack(">i", len(req)) + req)
        resp = struct.pack(">i", corr) + b"pong"
        send(False, "PA", struct.pack(">i", len(resp)) + resp)
    send(True, "FA")
    send(False, "FA")
    wrpcap(str(path), packets)


def test_engine_side_plugin_failures_counted_once(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    """A vendor API decoder fails while the engine decodes (in every worker): reported
    and counted once, as in one process."""
    pytest.importorskip("scapy")
    (tmp_path / "acme.py").write_text(VENDOR_PLUGIN)
    cap = tmp_path / "vendor.pcap"
    _vendor_capture(cap, 12)
    for argv in ([], ["-V"]):
        _same(capsys, ["--plugins", str(tmp_path), *argv, str(cap)], 3)
    code, out, err = _run(capsys, ["decode", "-j", "3", "--plugins", str(tmp_path), str(cap)])
    assert code == 0 and len(out.splitlines()) == 12
    assert "AcmeEcho request decoder failed 12 times in all" in err
    assert err.count("cannot decode requests") == 1


def test_unknown_schemas_teach_topic_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bodies of APIs the schema table does not know are walked for names too: a
    worker that does not own the vendor exchange still learns its topic id."""
    from kwsniff.kafka.model import PAIRED, Exchange, KafkaMessage
    from kwsniff.output.pipeline import Selection

    tid = "6f1c2a3e-1111-4a5b-8c9d-0123456789ab"

    def exchanges() -> list[Exchange]:
        out = []
        for i, (key, version, body) in enumerate([
                (1000, 0, {"Topics": [{"TopicId": tid, "Name": "alpha"}]}),   # vendor
                (0, 8, {"TopicData": [{"Name": "gamma"}]}),                    # Produce
                (1, 13, {"Topics": [{"TopicId": tid}]})], start=1):           # Fetch ids
            req = KafkaMessage("request", b"", key, version, i, "c", body=body)
            out.append(Exchange(i, 0, ("10.0.0.1", 40000), ("10.0.0.2", 9092), PAIRED, req))
        return out

    for worker in range(3):
        selection = Selection()
        shown = list(selection(parallel._owned(exchanges(), worker, 3, selection.names,
                                               lambda: None, [], lambda ex: None)))
        assert selection.names.get(tid) == "alpha"
        assert [facts.topics for _, facts in shown] == \
            [[["alpha"], ["gamma"], ["alpha"]][worker]]


@pytest.mark.parametrize("argv", [[], ["--records"], ["--records", "-Y", "topic_id"],
                                  ["--no-summary", "-Y", "api == Metadata"]],
                         ids=lambda a: " ".join(a) or "plain")
@pytest.mark.parametrize("pcap", [TANSU, ROOT / "pcaps" / "rdkafka-produce-codecs.pcap"],
                         ids=lambda p: p.name)
def test_export_identical(capsys: pytest.CaptureFixture[str], pcap: Path,
                          argv: list[str]) -> None:
    one = _run(capsys, ["export", "-j", "1", "-o", "-", *argv, str(pcap)])
    assert one[0] == 0 and one[1]
    assert _run(capsys, ["export", "-j", "3", "-o", "-", *argv, str(pcap)]) == one


def test_export_to_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    files = [tmp_path / "one.jsonl", tmp_path / "three.jsonl"]
    runs = [_run(capsys, ["export", "-j", str(j), "-o", str(f), "--records", str(GROUP)])
            for j, f in zip((1, 3), files)]
    assert runs[0] == runs[1] and runs[0][0] == 0
    assert files[0].read_bytes() == files[1].read_bytes()


def test_blocks_sent_in_parts(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Big blocks go in several records, the parent reads in small chunks and reads
    ahead little (bounded memory): the same output and reports."""
    monkeypatch.setattr(parallel, "BLOCK", 8)
    monkeypatch.setattr(parallel, "PART_CHARS", 300)
    monkeypatch.setattr(parallel, "READ_CHUNK", 64)
    monkeypatch.setattr(parallel, "READ_AHEAD", 256)
    (tmp_path / "flaky.py").write_text(FLAKY_PLUGIN)
    _same(capsys, ["--plugins", str(tmp_path), "-V", "-x", str(GROUP)], 2)
    _same(capsys, ["--plugins", str(tmp_path), "-Y", "flaky.parity == 1", str(GROUP)], 3)


# ---------------------------------------------------------------- the parent's writer

def _wrapper(encoding: str = "utf-8", errors: str = "strict",
             line_buffering: bool = False) -> tuple[io.TextIOWrapper, io.BytesIO]:
    raw = io.BytesIO()
    return io.TextIOWrapper(raw, encoding=encoding, errors=errors, newline="\n",
                            line_buffering=line_buffering), raw


def test_parent_writes_utf8_bytes_straight_and_in_order() -> None:
    from kwsniff.commands.parallel import _text_writer
    stream, raw = _wrapper()
    stream.write("head\n")
    put = _text_writer(stream.write)
    parts = ["plain ✓\n", "한국어 (0xED)\n", "after\n", "\ud800".encode("utf-8", "surrogatepass")]
    for part in parts[:3]:
        put(part.encode("utf-8"))
    with pytest.raises(UnicodeEncodeError):      # as one process: strict stdout
        put(parts[3])
    stream.flush()
    assert raw.getvalue().decode("utf-8") == "head\nplain ✓\n한국어 (0xED)\nafter\n"


@pytest.mark.parametrize("kind", ["latin-1", "line-buffered", "string"])
def test_parent_decodes_for_other_streams(kind: str) -> None:
    from kwsniff.commands.parallel import _text_writer
    if kind == "string":
        out = io.StringIO()
        put = _text_writer(out.write)
        put("é ✓\n".encode("utf-8"))
        assert out.getvalue() == "é ✓\n"
        return
    stream, raw = _wrapper("latin-1", "replace") if kind == "latin-1" else \
        _wrapper(line_buffering=True)
    put = _text_writer(stream.write)
    put("é ✓\n".encode("utf-8"))
    stream.flush()
    assert raw.getvalue() == "é ✓\n".encode(stream.encoding, "replace")
