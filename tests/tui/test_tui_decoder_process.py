"""The TUI's decoder process streams with the streaming GC thresholds (it only decodes;
with Python's defaults a third of its CPU went to the cyclic collector)."""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing.connection import Connection

from kwsniff import gc_policy
from kwsniff.tui.decoder import Job
from tui_common import ROOT, SAMPLE

_CHILD = """
import gc
from kwsniff.tui import decoder

def report(job, send, stopped, link=None):
    send(("threshold", gc.get_threshold(), job.path))

decoder.decode = report
decoder.child_main()
"""


def test_decoder_process_uses_the_streaming_thresholds(tmp_path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdin is not None and proc.stdout is not None
    control = Connection(os.dup(proc.stdin.fileno()), readable=False)
    replies = Connection(os.dup(proc.stdout.fileno()), writable=False)
    proc.stdin.close()
    proc.stdout.close()
    try:
        control.send(Job(str(tmp_path), path=str(SAMPLE)))
        assert replies.poll(60)
        kind, threshold, path = replies.recv()
    finally:
        control.close()
        replies.close()
        proc.wait(30)
    assert (kind, path) == ("threshold", str(SAMPLE))
    assert threshold[0] == gc_policy.GC_YOUNG
