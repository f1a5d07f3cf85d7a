"""decode -j 2 summary lines as a pipeline (kwsniff/commands/parallel_pipe.py): one worker
runs the engine and ships exchanges to the other, which renders them. Byte-identical to
one process on every committed capture, whatever the block size and share; used only
where it may be; failures of either worker reported like the other mode's."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kwsniff.capture import open_capture
from kwsniff.commands import parallel, parallel_pipe
from kwsniff.engine import Engine, EngineOptions
from kwsniff.output.skim import SummaryLane

from cli_run import run_cli, time_limit

ROOT = Path(__file__).resolve().parents[2]
PCAPS = sorted((ROOT / "pcaps").glob("*.pcap"))
GROUP = ROOT / "pcaps" / "rdkafka-consumer-group.pcap"
CODECS = ROOT / "pcaps" / "rdkafka-produce-codecs.pcap"
pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not PCAPS,
                                reason="needs fork and the captures in pcaps/")
#: the pipeline renders through the summary lane, which needs the C accelerator (without
#: it, -j 2 runs the other mode: the output must be the same all the same)
LANE = SummaryLane.available()


@pytest.fixture(autouse=True)
def _bounded() -> Iterator[None]:
    """A test that hangs fails after a minute instead of blocking the suite."""
    with time_limit(60, "decode -j 2 hangs"):
        yield


_run = run_cli


def _marker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A file the render worker creates when it runs (it is a forked process)."""
    mark = tmp_path / "render-worker-ran"
    real = parallel_pipe.render_work

    def render(*args: Any) -> Any:
        mark.touch()
        return real(*args)

    monkeypatch.setattr(parallel_pipe, "render_work", render)
    return mark


@pytest.mark.parametrize("block,share", [(1, 2), (1, 5), (3, 1000), (32, 8), (2, 1)])
@pytest.mark.parametrize("pcap", PCAPS, ids=lambda p: p.name)
def test_identical_every_capture(capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                 pcap: Path, block: int, share: int) -> None:
    monkeypatch.setattr(parallel, "BLOCK", block)
    monkeypatch.setattr(parallel_pipe, "SHARE", share)
    mark = _marker(monkeypatch, tmp_path)
    one = _run(capsys, ["decode", "-j", "1", str(pcap)])
    two = _run(capsys, ["decode", "-j", "2", str(pcap)])
    assert two == one
    assert mark.exists() == LANE


@pytest.mark.parametrize("argv", [["-t", "ad"], ["--color", "always"], ["-t", "e"]],
                         ids=lambda a: " ".join(a))
def test_identical_options(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                           tmp_path: Path, argv: list[str]) -> None:
    monkeypatch.setattr(parallel, "BLOCK", 2)
    mark = _marker(monkeypatch, tmp_path)
    for pcap in (GROUP, CODECS):
        assert _run(capsys, ["decode", "-j", "2", *argv, str(pcap)]) == \
            _run(capsys, ["decode", "-j", "1", *argv, str(pcap)])
    assert mark.exists() == LANE


def test_forgotten_streams_are_sent_again(capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "BLOCK", 1)
    monkeypatch.setattr(parallel_pipe, "MAX_STREAMS", 2)
    for pcap in (GROUP, CODECS):
        assert _run(capsys, ["decode", "-j", "2", str(pcap)]) == \
            _run(capsys, ["decode", "-j", "1", str(pcap)])


@pytest.mark.parametrize("argv,env,used", [
    (["-j", "2"], None, True),
    (["-j", "2"], "0", False),                   # KWSNIFF_PIPELINE=0
    (["-j", "3"], None, False),
    (["-j", "2", "-V"], None, False),
    (["-j", "2", "-x"], None, False),
    (["-j", "2", "-Y", "api == Fetch"], None, False),
])
def test_used_only_where_it_may_be(capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                   argv: list[str], env: str | None, used: bool) -> None:
    if env is not None:
        monkeypatch.setenv("KWSNIFF_PIPELINE", env)
    mark = _marker(monkeypatch, tmp_path)
    code, out, _ = _run(capsys, ["decode", *argv, str(GROUP)])
    assert code == 0 and out
    assert mark.exists() == (used and LANE)


def test_not_with_plugin_hooks(capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plugin = tmp_path / "plugins" / "hooked.py"
    plugin.parent.mkdir()
    plugin.write_text("def register(api):\n"
                      "    api.digest(0, request=lambda body, version, facts: 'hooked')\n")
    mark = _marker(monkeypatch, tmp_path)
    code, out, _ = _run(capsys, ["decode", "-j", "2", "--plugins", str(plugin.parent),
                                 str(CODECS)])
    assert code == 0 and "hooked" in out
    assert not mark.exists()


def test_shippable_exchanges() -> None:
    engine = Engine(EngineOptions(defer_bodies=True))
    with open_capture(str(CODECS)) as source:
        exchanges = list(engine.run(source))
    kinds = {(ex.request.api_key if ex.request else None, parallel_pipe.shippable(ex))
             for ex in exchanges}
    assert (0, True) in kinds and (3, False) in kinds and (18, False) in kinds


@pytest.mark.skipif(not LANE, reason="the pipeline needs the summary lane (C accelerator)")
@pytest.mark.parametrize("where", ["engine", "render"])
def test_a_failing_worker_is_reported(capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    monkeypatch.setattr(parallel, "BLOCK", 1)
    parent = os.getpid()
    if where == "engine":
        real_ship = parallel_pipe.shippable

        def ship(ex: Any) -> bool:
            if os.getpid() != parent and ex.index == 6:
                raise RuntimeError("boom")
            return real_ship(ex)

        monkeypatch.setattr(parallel_pipe, "shippable", ship)
    else:
        real_decode = parallel_pipe.decode_request

        def decode(raw: bytes, *args: Any) -> Any:
            msg = real_decode(raw, *args)
            msg.problems.append("not as the engine made it")
            return msg

        monkeypatch.setattr(parallel_pipe, "decode_request", decode)
        monkeypatch.setattr(parallel_pipe, "_PIPE_TAKE", None)      # (the Python path)
    code, out, err = _run(capsys, ["decode", "-j", "2", str(CODECS)])
    assert code == 70
    if where == "engine":
        assert err == "kwsniff decode: internal error: decoding worker 1 failed: " \
                      "RuntimeError: boom\n"
    else:
        assert err.startswith("kwsniff decode: internal error: decoding worker 2 failed: "
                              "RuntimeError: exchange ") and "did not decode again" in err
    one = _run(capsys, ["decode", "-j", "1", str(CODECS)])[1]
    assert one.startswith(out)          # what came before the failure, in order


@pytest.mark.parametrize("share", [1000, 16, 3, 2])
def test_no_deadlock_when_the_parent_reads_little_ahead(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        share: int) -> None:
    """The engine worker's own blocks reach the parent as soon as they are made: the
    parent waits for them while it reads the render worker only a little ahead, and the
    render worker waits for the engine worker's link (a block held back in a write
    batch would stop all three)."""
    monkeypatch.setattr(parallel, "BLOCK", 2)
    monkeypatch.setattr(parallel, "READ_AHEAD", 512)
    monkeypatch.setattr(parallel, "READ_CHUNK", 512)
    monkeypatch.setattr(parallel, "PIPE_SIZE", 4096)
    monkeypatch.setattr(parallel_pipe, "SHARE", share)
    for pcap in (GROUP, CODECS):
        assert _run(capsys, ["decode", "-j", "2", str(pcap)]) == \
            _run(capsys, ["decode", "-j", "1", str(pcap)])


def test_a_capture_without_exchanges(capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "header-only.pcap"
    empty.write_bytes(GROUP.read_bytes()[:24])      # the global header, no packet
    mark = _marker(monkeypatch, tmp_path)
    two = _run(capsys, ["decode", "-j", "2", str(empty)])
    assert two == _run(capsys, ["decode", "-j", "1", str(empty)])
    assert two[0] == 0 and two[1] == "" and "0 exchanges" in two[2]
    assert mark.exists() == LANE


@pytest.mark.skipif(parallel_pipe._PIPE_SHIP is None, reason="needs the C accelerator")
def test_the_c_shipping_is_the_python_shipping() -> None:
    """pipe_ship: shippable() and the record _Link.exchange writes, on every exchange of
    every capture and on edited copies."""
    import copy
    import dataclasses
    made = 0
    for pcap in PCAPS:
        engine = Engine(EngineOptions(defer_bodies=True))
        with open_capture(str(pcap)) as source:
            exchanges = list(engine.run(source))
        for ex in exchanges:
            variants = [ex]
            if ex.request is not None and ex.response is not None:
                for edit in ({"missing": 3}, {"problems": ["x"]}, {"inferred": "guess"},
                             {"api_version": 999}, {"deferred": None}):
                    odd = copy.copy(ex)
                    odd.response = dataclasses.replace(ex.response, **edit)
                    variants.append(odd)
                odd = copy.copy(ex)
                odd.status = "unanswered"
                variants.append(odd)
            for v in variants:
                c_buf = bytearray(b"prefix")
                got = parallel_pipe._PIPE_SHIP(c_buf, v)
                expected = parallel_pipe.shippable(v)
                assert got is None or got == expected
                if got:
                    link = parallel_pipe._Link(parallel._Sink(-1), 1 << 30)
                    link.buf += b"prefix"
                    link.streams.add(v.stream)          # (known: no endpoints record)
                    link.exchange(v)
                    assert bytes(c_buf) == bytes(link.buf)
                    made += 1
                elif got is False:
                    assert c_buf == b"prefix"
    assert made > 50


def _fields(obj: Any) -> Any:
    """A dataclass instance's fields, recursively (messages and exchanges compared)."""
    import dataclasses
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj), tuple((f.name, _fields(getattr(obj, f.name)))
                                 for f in dataclasses.fields(obj)))
    if isinstance(obj, (list, tuple)):
        return (type(obj), tuple(_fields(v) for v in obj))
    return obj


@pytest.mark.skipif(parallel_pipe._PIPE_TAKE is None, reason="needs the C accelerator")
def test_the_c_take_is_the_python_take(monkeypatch: pytest.MonkeyPatch) -> None:
    """pipe_take: the exchange take_record makes of every shipped record of every
    capture, or None (and then take_record decides) for plans not learnt, unknown
    streams, short or damaged records."""
    from kwsniff.kafka import decoding
    take = parallel_pipe._PIPE_TAKE
    made = declined = 0
    for pcap in PCAPS:
        engine = Engine(EngineOptions(defer_bodies=True))
        with open_capture(str(pcap)) as source:
            exchanges = [ex for ex in engine.run(source) if parallel_pipe.shippable(ex)]
        for ex in exchanges:
            link = parallel_pipe._Link(parallel._Sink(-1), 1 << 30)
            link.buf += b"prefix"
            link.streams.add(ex.stream)
            link.exchange(ex)
            buf = link.buf
            start, end = len(b"prefix") + 5, len(buf)
            ends = {ex.stream: (ex.client, ex.broker)}
            plans = (decoding._REQUEST_PLANS, decoding._RESPONSE_PLANS)
            python = parallel_pipe.take_record(buf, start, end, ends)
            got = take(buf, start, end, *plans, ends)
            if got is None:         # (a plan the decoders learn on first use)
                declined += 1
                got = take(buf, start, end, *plans, ends)
            assert got is not None and _fields(got) == _fields(python)
            assert got.request.deferred == python.request.deferred
            made += 1
            # where the Python code decides: None, nothing changed
            assert take(buf, start, end, {}, plans[1], ends) is None
            assert take(buf, start, end, plans[0], {}, ends) is None
            assert take(buf, start, end, *plans, {}) is None
            assert take(buf, start, start + 20, *plans, ends) is None
            assert take(buf, start, end + 1, *plans, ends) is None
            cut = bytearray(buf)
            cut[start + 32:start + 36] = (end - start).to_bytes(4, "little")
            assert take(cut, start, end, *plans, ends) is None
            damaged = bytearray(buf)
            n = int.from_bytes(buf[start + 32:start + 36], "little")
            damaged[start + 36 + n - 1:start + 36 + n] = b""      # the request cut short
            got = take(damaged, start, end - 1, *plans, ends)
            if got is not None:
                assert _fields(got) == _fields(
                    parallel_pipe.take_record(damaged, start, end - 1, ends))
    assert made > 50 and declined <= 20
