"""Streaming commands buffer standard output even under PYTHONUNBUFFERED (stdout_policy)."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from kwsniff import stdout_policy
from kwsniff.cli import main

ROOT = Path(__file__).resolve().parents[2]
ACKS = ROOT / "pcaps" / "rdkafka-acks.pcap"
needs_capture = pytest.mark.skipif(not ACKS.exists(), reason="pcaps/rdkafka-acks.pcap missing")


def _unbuffered(fd: int) -> io.TextIOWrapper:
    """What Python makes of standard output under PYTHONUNBUFFERED=1."""
    raw = io.FileIO(fd, "w", closefd=False)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="strict", write_through=True)


def test_unbuffered_file_is_buffered_inside_and_restored(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.txt"
    with open(target, "wb") as fh:
        original = _unbuffered(fh.fileno())
        monkeypatch.setattr(sys, "stdout", original)
        with stdout_policy.batched():
            inner = sys.stdout
            assert inner is not original
            assert not inner.write_through
            for i in range(10):
                print(f"line {i} →")
            assert target.stat().st_size == 0       # still in the buffer: no write per line
        assert sys.stdout is original
        assert target.read_text("utf-8") == "".join(f"line {i} →\n" for i in range(10))
        os.fstat(fh.fileno())                        # the descriptor is still open


def test_flushed_and_restored_on_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.txt"
    with open(target, "wb") as fh:
        original = _unbuffered(fh.fileno())
        monkeypatch.setattr(sys, "stdout", original)
        with pytest.raises(RuntimeError), stdout_policy.batched():
            print("before the error")
            raise RuntimeError("boom")
        assert sys.stdout is original
        assert target.read_text("utf-8") == "before the error\n"


def test_buffered_streams_are_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open(tmp_path / "out.txt", "w", encoding="utf-8") as fh:    # buffered already
        monkeypatch.setattr(sys, "stdout", fh)
        with stdout_policy.batched():
            assert sys.stdout is fh
    other = io.StringIO()
    monkeypatch.setattr(sys, "stdout", other)
    with stdout_policy.batched():
        assert sys.stdout is other


def test_terminal_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = pty.openpty()
    try:
        tty = _unbuffered(slave)
        monkeypatch.setattr(sys, "stdout", tty)
        with stdout_policy.batched():
            assert sys.stdout is tty
    finally:
        os.close(master)
        os.close(slave)


@needs_capture
@pytest.mark.parametrize("command", [["decode"], ["decode", "-V"], ["export", "-o", "-"],
                                     ["stats"]])
def test_commands_under_pythonunbuffered(command: list[str], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The output is the same as with Python's buffered standard output, and it goes out
    in big writes, not one per line."""
    argv = [*command, str(ACKS), "-p", "19292"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    expected = subprocess.run([sys.executable, "-m", "kwsniff", *argv], capture_output=True,
                              env=env, check=True, cwd=ROOT).stdout
    target = tmp_path / "out.txt"
    made: list[io.TextIOWrapper] = []

    def spy_open(*a: object, **kw: object) -> io.TextIOWrapper:
        stream = open(*a, **kw)   # noqa: SIM115
        made.append(stream)
        return stream

    monkeypatch.setattr(stdout_policy, "open", spy_open, raising=False)
    with open(target, "wb") as fh:
        original = _unbuffered(fh.fileno())
        monkeypatch.setattr(sys, "stdout", original)
        assert main(argv) == 0
        assert sys.stdout is original
    assert target.read_bytes() == expected
    assert expected.count(b"\n") > 20
    assert len(made) == 1 and not made[0].write_through and not made[0].line_buffering


def test_cli_only_streaming_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    from kwsniff import cli
    calls: list[str] = []

    class Probe:
        def __enter__(self) -> None:
            calls.append("enter")

        def __exit__(self, *exc: object) -> None:
            calls.append("exit")

    monkeypatch.setattr(stdout_policy, "batched", Probe)
    for command in ("decode", "export", "stats", "live"):
        with cli._batched_stdout(command):
            pass
    assert calls == ["enter", "exit"] * 4
    calls.clear()
    for command in ("tui", "analyze", "protocols", None):
        with cli._batched_stdout(command):
            pass
    assert calls == []
