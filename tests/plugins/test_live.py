"""``kwsniff live`` loads the plugins too: a real producer's JSON value, captured live on
a private loopback, is shown decoded in the tree and exported decoded (slow; root)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parent / "live_plugin_probe.py"


@pytest.mark.slow
def test_live_decodes_with_plugins() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare (live capture on a private loopback)")
    if subprocess.run(["unshare", "--net", "--", "true"], capture_output=True).returncode:
        pytest.skip("unshare --net is not permitted here")
    proc = subprocess.run(["unshare", "--net", "--", sys.executable, str(PROBE)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["rc"] == 0, got["stderr"]
    assert '[json]' in got["tree"] and 'hello: "live"' in got["tree"]
    assert "trace.id: 0af7651916cd43dd8448eb211c80319c" in got["tree"]
    records = [o for o in got["export"] if o["kind"] == "record" and o["topic"] == "live-json"]
    assert records and all(r["value_decoded"] == {"format": "json",
                                                  "data": {"hello": "live", "n": 7}}
                           for r in records)
    produce = [o for o in got["export"] if o["kind"] == "exchange" and o["api_name"] == "Produce"]
    assert produce and produce[0]["plugins"]["trace"]["id"] == ["0af7651916cd43dd8448eb211c80319c"]
