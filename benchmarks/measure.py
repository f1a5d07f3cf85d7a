"""Running a command and measuring it: wall time, CPU time (user + system) and peak RSS.

:func:`run_once` starts the command with its standard output sent to ``/dev/null``
(both tools format everything, nothing is kept) from a small helper process that
reaps it with ``os.wait4``, so wall time, CPU time and peak RSS are the command's own,
and keeps the tail of its standard error. :func:`summarize` gives the
median and spread of several samples.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Sequence


@dataclass(slots=True)
class Sample:
    wall: float          # seconds
    cpu: float           # user + system seconds
    user: float
    sys: float
    rss_mb: float        # peak resident set size (ru_maxrss), MiB
    returncode: int
    stderr_tail: str = ""


@dataclass(slots=True)
class Summary:
    """Median and spread of one command's samples."""

    samples: list[Sample] = field(default_factory=list)

    def _values(self, attr: str) -> list[float]:
        return [getattr(s, attr) for s in self.samples]

    def median(self, attr: str = "wall") -> float:
        return statistics.median(self._values(attr))

    def spread(self, attr: str = "wall") -> tuple[float, float]:
        vals = self._values(attr)
        return min(vals), max(vals)

    def spread_pct(self, attr: str = "wall") -> float:
        """(max - min) / median, in percent."""
        lo, hi = self.spread(attr)
        med = self.median(attr)
        return 100.0 * (hi - lo) / med if med else 0.0

    @property
    def peak_rss_mb(self) -> float:
        return max(self._values("rss_mb"))

    @property
    def ok(self) -> bool:
        return bool(self.samples) and all(s.returncode == 0 for s in self.samples)


#: Runs in a small helper process: it starts the command, waits for it with wait4 and
#: writes ``wall user sys maxrss_kb status`` to a pipe. A command started directly by
#: the (bigger) benchmark process would inherit that process's RSS high-water mark
#: through fork + exec; the helper's own is a few MB (the floor of the RSS column).
_LAUNCHER = """
import os, sys, time
fd, argv = int(sys.argv[1]), sys.argv[2:]
os.set_inheritable(fd, False)
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, ("cannot run %s: %s\\n" % (argv[0], exc)).encode())
    os._exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t
os.write(fd, ("%r %r %r %d %d" % (wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss,
                                  os.waitstatus_to_exitcode(status))).encode())
"""


def run_once(argv: Sequence[str], env: dict[str, str] | None = None) -> Sample:
    """Run ``argv`` once (stdout to /dev/null, through the helper) and measure it."""
    read_fd, write_fd = os.pipe()
    try:
        with tempfile.TemporaryFile() as err, open(os.devnull, "wb") as null:
            helper = [sys.executable, "-S", "-c", _LAUNCHER, str(write_fd), *argv]
            proc = subprocess.Popen(helper, stdout=null, stderr=err,
                                    stdin=subprocess.DEVNULL, env=env,
                                    pass_fds=(write_fd,))
            os.close(write_fd)
            write_fd = -1
            report = b""
            while chunk := os.read(read_fd, 4096):
                report += chunk
            proc.wait()
            err.seek(0)
            tail = err.read()[-4000:].decode("utf-8", "replace")
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
    try:
        wall_s, user_s, sys_s, rss_s, rc_s = report.decode().split()
        wall, user, sys_t, rss, rc = (float(wall_s), float(user_s), float(sys_s),
                                      int(rss_s), int(rc_s))
    except ValueError:
        return Sample(0.0, 0.0, 0.0, 0.0, 0.0, proc.returncode or 1,
                      tail + "\n(measuring helper failed)")
    return Sample(wall=wall, cpu=user + sys_t, user=user, sys=sys_t, rss_mb=rss / 1024.0,
                  returncode=rc, stderr_tail=tail)


def load_average() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)
