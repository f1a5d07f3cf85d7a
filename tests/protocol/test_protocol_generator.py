"""tools/gen_schemas.py reproduces the committed table byte for byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from shared_protocol import SHARED_PROTOCOL

ROOT = Path(__file__).resolve().parents[2]
SHARED = SHARED_PROTOCOL
TABLE = ROOT / "kwsniff" / "kafka" / "protocol" / "schema_table.py"


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/kafka-protocol is not present")
def test_generator_reproduces_committed_table(tmp_path: Path) -> None:
    out = tmp_path / "schema_table.py"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_schemas.py"),
                           "--source", str(SHARED), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == TABLE.read_bytes()


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/kafka-protocol is not present")
def test_generator_check_mode() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_schemas.py"), "--check",
                           "--source", str(SHARED)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
