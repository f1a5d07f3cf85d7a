"""Output that cannot be written (a full disk: ``> /dev/full``) is a one-line error
naming what could not be written, exit status 1 — never "internal error" (exit 70) and
never a second complaint from Python's flush at exit. Every command, with and without
``PYTHONUNBUFFERED`` (which changes how standard output is buffered)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = str(ROOT / "pcaps" / "aiokafka.pcap")
BIG = str(ROOT / "pcaps" / "rdkafka-consumer-group.pcap")

COMMANDS = {
    "decode": ["decode", CAPTURE],
    "decode -x": ["decode", "-x", CAPTURE],
    "decode -V -j 2": ["decode", "-V", "-j", "2", BIG],
    "decode --list-fields": ["decode", "--list-fields"],
    "stats": ["stats", CAPTURE],
    "stats --json": ["stats", "--json", CAPTURE],
    "export -o -": ["export", CAPTURE, "-o", "-"],
    "export -j 2 -o -": ["export", "-j", "2", BIG, "-o", "-"],
    "protocols": ["protocols"],
    "protocols --json": ["protocols", "--json"],
}


def _run_to_full_disk(argv: list[str], unbuffered: bool) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    with open("/dev/full", "w") as full:
        return subprocess.run([sys.executable, "-m", "kwsniff", *argv], stdout=full,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=120,
                              check=False)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("case", COMMANDS)
def test_full_standard_output_is_one_line_exit_1(case: str, unbuffered: bool) -> None:
    argv = COMMANDS[case]
    p = _run_to_full_disk(argv, unbuffered)
    assert p.stderr.splitlines()[0:1] == [
        f"kwsniff {argv[0]}: cannot write standard output: No space left on device"], p.stderr
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr
    assert "internal error" not in p.stderr
    assert p.returncode == 1


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_full_output_file_names_the_file(jobs: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    p = subprocess.run([sys.executable, "-m", "kwsniff", "export", "-j", jobs, BIG,
                        "-o", "/dev/full"], capture_output=True, text=True, env=env,
                       timeout=120, check=False)
    assert p.stderr.splitlines()[0] == \
        "kwsniff export: cannot write /dev/full: No space left on device", p.stderr
    assert p.returncode == 1


def test_other_os_errors_stay_internal_errors(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """An OSError that is not about writing output is still reported as a bug."""
    import kwsniff.commands.protocols as protocols
    from kwsniff.cli import main

    def broken(args: object) -> int:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(protocols, "run", broken)
    rc = main(["protocols"])
    err = capsys.readouterr().err
    assert rc == 70 and "internal error: OSError" in err
