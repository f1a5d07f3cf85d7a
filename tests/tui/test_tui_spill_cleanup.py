"""Spill directories of a TUI that was killed are removed by the next TUI; live ones,
and directories not made by a loader, are kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from kwsniff.tui.loader import LOCK_NAME, SPILL_PREFIX, Loader, remove_stale_spill_dirs
from tui_common import ROOT, SAMPLE

_CHILD = """
import sys, time
from kwsniff.tui.loader import Loader
loader = Loader(path=sys.argv[1], spill_dir=sys.argv[2])
open(loader.directory + "/spill-0", "wb").write(b"x" * 4096)
print(loader.directory, flush=True)
time.sleep(60)
"""


def _killed_loader_dir(spill: Path) -> Path:
    """The spill directory of a loader in a process killed with SIGKILL."""
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(SAMPLE), str(spill)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None
        directory = Path(proc.stdout.readline().strip())
        assert directory.is_dir() and (directory / LOCK_NAME).exists()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return directory


def test_killed_loader_dir_is_removed_by_the_next_loader(tmp_path: Path) -> None:
    stale = _killed_loader_dir(tmp_path)
    assert stale.is_dir()                       # SIGKILL left it behind
    loader = Loader(path=str(SAMPLE), spill_dir=str(tmp_path))
    try:
        assert not stale.exists()
        assert Path(loader.directory).is_dir()
    finally:
        loader.close()
    assert not Path(loader.directory).exists()


def test_live_and_foreign_dirs_are_kept(tmp_path: Path) -> None:
    live = Loader(path=str(SAMPLE), spill_dir=str(tmp_path))
    foreign = tmp_path / (SPILL_PREFIX + "not-a-loader")
    foreign.mkdir()
    (foreign / "data").write_bytes(b"keep")
    other = tmp_path / "unrelated"
    other.mkdir()
    stale = _killed_loader_dir(tmp_path)
    try:
        assert remove_stale_spill_dirs(str(tmp_path)) == [str(stale)]
        assert Path(live.directory).is_dir()
        assert (foreign / "data").read_bytes() == b"keep" and other.is_dir()
        assert remove_stale_spill_dirs(str(tmp_path)) == []
    finally:
        live.close()
    assert not Path(live.directory).exists()


def test_missing_parent_is_not_an_error(tmp_path: Path) -> None:
    assert remove_stale_spill_dirs(str(tmp_path / "absent")) == []
