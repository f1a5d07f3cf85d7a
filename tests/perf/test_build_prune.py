"""setup.py's build_py removes what a previous build left in the build directory and the
source no longer has: setuptools only ever adds files there, so a deleted ``.pxd`` or
module used to reach every later wheel built on the same machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_build_py_prunes_files_the_source_no_longer_has(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    stale = lib / "kwsniff" / "kafka" / "gone_module.pxd"
    ext = lib / "kwsniff" / "kafka" / "framing.cpython-311-x86_64-linux-gnu.so"
    stale.parent.mkdir(parents=True)
    stale.write_text("cdef class Gone: pass\n")
    ext.write_bytes(b"\x7fELF")                 # an extension build_ext put there
    env = dict(os.environ, KWSNIFF_NO_CYTHON="1")   # (build_py needs no Cython run)
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib",
                           str(lib)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not stale.exists()
    assert ext.exists()
    assert (lib / "kwsniff" / "kafka" / "framing.py").exists()
    assert (lib / "kwsniff" / "kafka" / "framing.pxd").exists()
