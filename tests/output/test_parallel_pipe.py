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
#: the pipeline renders through the summary lane, which needs the field-decoder kernel (without
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


@pytest.mark.parametrize("argv,used", [
    (["-j", "2"], True),
    (["-j", "3"], False),
    (["-j", "2", "-V"], False),
    (["-j", "2", "-x"], False),
    (["-j", "2", "-Y", "api == Fetch"], False),
])
def test_used_only_where_it_may_be(capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                   argv: list[str], used: bool) -> None:
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


def test_large_exchanges_are_rendered_where_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exchange whose frames hold more than MAX_SHIP_BYTES is not shipped (its line
    is): the bytes are not copied through the link."""
    engine = Engine(EngineOptions(defer_bodies=True))
    with open_capture(str(CODECS)) as source:
        exchanges = [ex for ex in engine.run(source) if parallel_pipe.shippable(ex)]
    assert exchanges
    sizes = sorted(len(ex.request.raw) + len(ex.response.raw) for ex in exchanges)
    middle = sizes[len(sizes) // 2]
    monkeypatch.setattr(parallel_pipe, "MAX_SHIP_BYTES", middle)
    kept = [ex for ex in exchanges if parallel_pipe.shippable(ex)]
    assert kept and len(kept) < len(exchanges)
    assert all(len(ex.request.raw) + len(ex.response.raw) <= middle for ex in kept)


@pytest.mark.parametrize("limit", [0, 300])
def test_identical_whatever_is_shipped(capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    monkeypatch.setattr(parallel, "BLOCK", 2)
    monkeypatch.setattr(parallel_pipe, "MAX_SHIP_BYTES", limit)
    for pcap in (GROUP, CODECS):
        assert _run(capsys, ["decode", "-j", "2", str(pcap)]) == \
            _run(capsys, ["decode", "-j", "1", str(pcap)])


@pytest.mark.skipif(not LANE, reason="the pipeline needs the summary lane (field-decoder kernel)")
@pytest.mark.parametrize("where", ["engine", "render"])
def test_a_failing_worker_is_reported(capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    monkeypatch.setattr(parallel, "BLOCK", 1)
    parent = os.getpid()
    if where == "engine":
        real = parallel_pipe._X_RECORD

        class Failing:
            """The link's record layout, failing in a worker (the engine worker ships)."""
            size = real.size

            def pack(self, *values: Any) -> bytes:
                if os.getpid() != parent:
                    raise RuntimeError("boom")
                return real.pack(*values)

        monkeypatch.setattr(parallel_pipe, "_X_RECORD", Failing())
    else:
        real_layout = parallel_pipe._EXCHANGE

        class Cut:
            """The link's exchange layout, read with the request frame lost: it does not
            decode again as the engine worker decoded it."""
            size = real_layout.size

            def unpack_from(self, buf: bytearray, start: int) -> tuple:
                return (*real_layout.unpack_from(buf, start)[:5], 0)

        monkeypatch.setattr(parallel_pipe, "_EXCHANGE", Cut())
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
