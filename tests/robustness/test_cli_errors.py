"""Every user mistake gives one clear line on standard error and a non-zero exit code,
never a traceback; ``--debug`` shows the traceback."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz import wire
from kwsniff.cli import main

ROOT = Path(__file__).resolve().parents[2]
KWSNIFF = [sys.executable, "-m", "kwsniff"]
CAPTURE = str(ROOT / "pcaps" / "midstream.pcap")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("cli")
    out = {"dir": str(d), "missing": str(d / "missing.pcap")}
    (d / "text.txt").write_text("hello, not a capture\n")
    out["text"] = str(d / "text.txt")
    (d / "empty.pcap").write_bytes(b"")
    out["empty"] = str(d / "empty.pcap")
    (d / "short.pcap").write_bytes(b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00")
    out["short"] = str(d / "short.pcap")
    (d / "bad.pcap.gz").write_bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 40)
    out["badgz"] = str(d / "bad.pcap.gz")
    (d / "ng.pcapng").write_bytes(b"\x0a\x0d\x0d\x0a" + bytes(8))
    out["badng"] = str(d / "ng.pcapng")
    return out


CASES = {
    "missing file": (["decode", "{missing}"], "no such file"),
    "not a capture": (["decode", "{text}"], "not a pcap or pcapng capture"),
    "empty file": (["decode", "{empty}"], "empty file"),
    "a directory": (["decode", "{dir}"], "is a directory"),
    "truncated header": (["decode", "{short}"], "truncated pcap file"),
    "corrupt gzip": (["decode", "{badgz}"], "corrupt"),
    "corrupt pcapng": (["decode", "{badng}"], "corrupt pcapng"),
    "export missing file": (["export", "{missing}", "-o", "-"], "no such file"),
    "stats missing file": (["stats", "{missing}"], "no such file"),
    "tui missing file": (["tui", "{missing}"], "no such file"),
    "bad filter": (["decode", CAPTURE, "-Y", "topic =="], "bad display filter"),
    "unknown filter field": (["stats", CAPTURE, "-Y", "topc == orders"], "bad display filter"),
    "export bad filter": (["export", CAPTURE, "-o", "-", "-Y", "api in {{"], "bad display filter"),
    "filter nested too deeply": (["decode", CAPTURE, "-Y", "(" * 300 + "error" + ")" * 300],
                                 "nested too deeply"),
    "unknown interface": (["live", "-i", "kwsniff-no-such-if0", "-c", "1"], "unknown interface"),
    "output directory missing": (["export", CAPTURE, "-o", "{dir}/no/such/dir/x.jsonl"],
                                 "cannot write"),
    "output is a directory": (["export", CAPTURE, "-o", "{dir}"], "cannot write"),
    "output device full": (["export", CAPTURE, "-o", "/dev/full"], "No space left"),
    "negative timeout": (["decode", CAPTURE, "--timeout", "-1"], "--timeout"),
    "plugins not a directory": (["decode", CAPTURE, "--plugins", "{missing}"], "not a directory"),
    "live unwritable -w": (["live", "-i", "lo", "-c", "1", "-w", "{dir}/no/such/x.pcap"],
                           "cannot write"),
    "live bad display filter": (["live", "-i", "lo", "-c", "1", "-Y", "topic =="],
                                "bad display filter"),
}
if os.geteuid() == 0:      # compiling a capture filter opens the interface
    CASES["live bad capture filter"] = (["live", "-i", "lo", "--duration", "1", "-f", "tcp port ("],
                                        "invalid capture filter")


def _argv(args: list[str], files: dict[str, str]) -> list[str]:
    return [a.format(**files) for a in args]


def _one_clear_line(err: str, command: str, expect: str) -> None:
    assert "Traceback" not in err, err
    lines = err.rstrip("\n").splitlines()
    assert lines and lines[0].startswith(f"kwsniff {command}: "), err
    assert expect in lines[0], err
    if "bad display filter" in lines[0]:
        # the expression and a caret under the mistake follow the message
        assert len(lines) == 3 and lines[2].strip() == "^", err
    else:
        assert len(lines) == 1, err


@pytest.mark.parametrize("case", CASES)
def test_user_mistake_gives_one_line(case: str, files: dict[str, str],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    args, expect = CASES[case]
    argv = _argv(args, files)
    rc = main(argv)
    captured = capsys.readouterr()
    assert rc != 0
    _one_clear_line(captured.err, argv[0], expect)


@pytest.mark.parametrize("case", ["missing file", "bad filter", "output directory missing",
                                  "unknown interface"])
def test_debug_shows_the_traceback(case: str, files: dict[str, str],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    args, expect = CASES[case]
    for argv in (["--debug"] + _argv(args, files), _argv(args, files) + ["--debug"]):
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc != 0
        assert "Traceback (most recent call last)" in err and expect in err, err


def _run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(KWSNIFF + argv, capture_output=True, text=True, env=env, cwd="/",
                          timeout=120, check=False, **kw)  # type: ignore[call-overload]


def test_empty_standard_input() -> None:
    p = _run(["decode", "-"], stdin=subprocess.DEVNULL)
    assert p.returncode == 2
    _one_clear_line(p.stderr, "decode", "empty input")


def test_standard_input_is_a_terminal() -> None:
    master, slave = pty.openpty()
    try:
        p = _run(["decode", "-"], stdin=slave)
    finally:
        os.close(master)
        os.close(slave)
    assert p.returncode == 2
    _one_clear_line(p.stderr, "decode", "terminal")


def test_internal_error_is_one_line_and_asks_for_a_report(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    """A bug (not a user mistake) still gives one line, exit code 70, no traceback."""
    import kwsniff.commands.stats as stats

    def broken(args: object) -> int:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(stats, "run", broken)
    rc = main(["stats", CAPTURE])
    err = capsys.readouterr().err
    assert rc == 70 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "internal error: RuntimeError: simulated bug" in err and "--debug" in err


# ----------------------------------------------------------------------------- no permission

as_nobody = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                               reason="needs root and setpriv to run as nobody")


def _as_nobody(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1", HOME="/tmp")
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
                          + KWSNIFF + argv, capture_output=True, text=True, env=env, cwd="/",
                          timeout=120, check=False)


@as_nobody
def test_unreadable_capture(tmp_path: Path) -> None:
    secret = tmp_path / "secret.pcap"
    secret.write_bytes(wire.pcap_bytes(wire.conversation([(False, wire.metadata_request(1))])))
    secret.chmod(0o600)
    os.chmod(tmp_path, 0o755)
    p = _as_nobody(["decode", str(secret)])
    assert p.returncode == 2, p.stderr
    _one_clear_line(p.stderr, "decode", "permission denied")


@as_nobody
def test_unwritable_output(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    p = _as_nobody(["export", CAPTURE, "-o", str(locked / "out.jsonl")])
    assert p.returncode == 1, p.stderr
    _one_clear_line(p.stderr, "export", "Permission denied")


@as_nobody
def test_live_capture_without_privileges() -> None:
    p = _as_nobody(["live", "-i", "lo", "-c", "1"])
    assert p.returncode != 0, p.stderr
    _one_clear_line(p.stderr, "live", "permission")


# ----------------------------------------------------------------------------- argument mistakes

ARG_MISTAKES = {
    "bad count": (["decode", "x.pcap", "-c", "x"], "decode",
                  "argument -c/--count: not a number: 'x'"),
    "bad port": (["stats", "x.pcap", "-p", "kafka"], "stats", "argument -p/--port: not a port"),
    "unknown option": (["decode", "--bogus", "x.pcap"], "decode",
                       "unrecognized arguments: --bogus"),
    "missing -o": (["export", "x.pcap"], "export",
                   "the following arguments are required: -o/--output"),
    "bad choice": (["decode", "-t", "q", "x.pcap"], "decode",
                   "argument -t/--time-format: invalid choice: 'q'"),
    "unknown command": (["frob"], None, "invalid choice: 'frob'"),
    "unknown top option": (["--bogus"], None, "unrecognized arguments: --bogus"),
    "analyze bad bucket": (["analyze", "x.jsonl", "--bucket", "0"], "analyze", "--bucket"),
}


@pytest.mark.parametrize("case", ARG_MISTAKES)
def test_argument_mistakes_are_one_line_with_a_help_hint(
        case: str, capsys: pytest.CaptureFixture[str]) -> None:
    """argparse's mistakes read like kwsniff's own errors: one line naming the command,
    pointing to its --help, exit status 2 (no usage block)."""
    argv, command, expect = ARG_MISTAKES[case]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    prog = f"kwsniff {command}" if command else "kwsniff"
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{prog}: ") and expect in lines[0], err
    assert lines[0].endswith(f"(see {prog} --help)"), err
