"""decode/export/stats on the command line: options, one-line errors, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kwsniff.cli import main

from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[2]
ACKS = ROOT / "pcaps" / "rdkafka-acks.pcap"
needs_capture = pytest.mark.skipif(not ACKS.exists(), reason="pcaps/rdkafka-acks.pcap missing")
PORT = ["-p", "19292"]


_run = run_cli


@pytest.mark.parametrize("command", ["decode", "export", "stats"])
def test_missing_capture(command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = [command, str(tmp_path / "nope.pcap")] + (["-o", "-"] if command == "export" else [])
    code, out, err = _run(capsys, argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kwsniff {command}: ")
    assert "nope.pcap" in lines[0] and "Traceback" not in err


@pytest.mark.parametrize("command", ["decode", "export", "stats"])
def test_bad_filter_before_reading(command: str, capsys: pytest.CaptureFixture[str],
                                   tmp_path: Path) -> None:
    # The capture does not exist: the filter error must come first.
    argv = [command, str(tmp_path / "nope.pcap"), "-Y", "topic == "] + \
        (["-o", "-"] if command == "export" else [])
    code, out, err = _run(capsys, argv)
    assert code == 2
    assert err.splitlines()[0] == (f"kwsniff {command}: bad display filter: expected a value "
                                   "after '==', found end of expression (column 10)")
    assert err.splitlines()[1:] == ["    topic == ", "             ^"]


@needs_capture
def test_unwritable_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "missing-dir" / "out.jsonl"
    code, out, err = _run(capsys, ["export", str(ACKS), *PORT, "-o", str(target)])
    assert code == 1        # output errors exit 1 (kwsniff.errors.OutputError)
    assert err.strip().splitlines() == [
        f"kwsniff export: cannot write {target}: No such file or directory"]


def test_not_a_capture(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture file at all")
    code, out, err = _run(capsys, ["decode", str(junk)])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_list_fields(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, ["decode", "--list-fields"])
    assert code == 0
    assert out.splitlines()[0].split()[:2] == ["api", "name"]
    assert any(line.startswith("latency_ms ") for line in out.splitlines())


def test_option_mistakes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, ["decode"])
    assert code == 2 and "a CAPTURE file is required" in err
    code, out, err = _run(capsys, ["decode", "x.pcap", "--offsets"])
    assert code == 2 and "--offsets and --full-values need -V" in err


@needs_capture
def test_decode_filter_count_and_run_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, ["decode", str(ACKS), *PORT, "-Y", "api == Produce",
                                   "-c", "2", "--color", "never"])
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2 and all(" Produce v" in line for line in lines)
    assert "\x1b[" not in out
    assert "(2 shown)" in err.splitlines()[-1] and "problem" in err.splitlines()[-1]


@needs_capture
def test_decode_color_always(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, ["decode", str(ACKS), *PORT, "-c", "1", "--color", "always"])
    assert code == 0 and "\x1b[" in out


@needs_capture
def test_export_to_file_and_stdout(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    code, out, err = _run(capsys, ["export", str(ACKS), *PORT, "-o", str(target),
                                   "-Y", "api == Fetch"])
    assert code == 0 and out == ""
    lines = target.read_text().splitlines()
    objs = [json.loads(line) for line in lines]
    assert {o["api_name"] for o in objs if o["kind"] == "exchange"} == {"Fetch"}
    assert objs[-1]["kind"] == "summary"
    assert objs[-1]["exported_exchanges"] == len(objs) - 1 < objs[-1]["exchanges"]
    assert err.strip().endswith("bytes lost in gaps")
    code, out, err = _run(capsys, ["export", str(ACKS), *PORT, "-o", "-", "--no-summary",
                                   "-c", "1"])
    assert [json.loads(line)["kind"] for line in out.splitlines()] == ["exchange"]


@needs_capture
def test_stats_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, ["stats", str(ACKS), *PORT, "--json", "--top", "2"])
    assert code == 0
    report = json.loads(out)
    assert report["run"]["exchanges"] == report["exchanges"] > 0
    assert len(report["topics"]) == 2
    produce = [a for a in report["apis"] if a["api_name"] == "Produce"]
    assert produce and produce[0]["latency_ms"]["p50"] is not None


@needs_capture
def test_broken_pipe_is_quiet(tmp_path: Path) -> None:
    """`kwsniff decode ... | head -1` ends without a traceback."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        f"{sys.executable} -m kwsniff decode {ACKS} -p 19292 -V | head -1",
        shell=True, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert proc.stdout.startswith("Exchange 1: ")
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


def test_one_command_imports_only_its_own_module() -> None:
    code = ("import sys\nfrom kwsniff.cli import main\n"
            "rc = main(['protocols'])\n"
            "print(rc, sorted(m for m in sys.modules if m.startswith('kwsniff.commands.')),"
            " file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.stderr.strip().splitlines()[-1] == "0 ['kwsniff.commands.protocols']"
    assert "Produce" in proc.stdout


def test_requested_command() -> None:
    from kwsniff.cli import requested_command
    assert requested_command(["--debug", "decode", "x.pcap"]) == "decode"
    assert requested_command(["spark-decode", "-h"]) == "spark-decode"
    assert requested_command(["nosuch"]) is None
    assert requested_command(["--version"]) is None
    assert requested_command(["--", "decode"]) is None


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for name in ("decode", "export", "stats", "live", "tui", "analyze", "spark-decode",
                 "protocols"):
        assert name in out
