"""Background loading for the TUI: a decoder process feeding the store.

Contract:

* :class:`Loader` starts ``python -m kwsniff.tui.decoder`` (the same interpreter and
  import path) as a separate process (two when ``workers=2`` and :func:`split_workers`
  allows it: the two-process pipeline of :mod:`kwsniff.tui.decoder`, joined by a pipe
  the loader makes — the engine process writes its end, the row builder reads the
  other; the store is the same as with one) — the decoding never competes with the UI
  for the interpreter lock, and a second CPU core does it — and, in the thread that
  calls :meth:`Loader.run`
  (a Textual thread worker), receives its messages and applies them: rows into the
  :class:`~kwsniff.tui.store.ExchangeStore` (published as they arrive), topic names,
  statistics reports, progress and live capture counters.
* State for the UI (read from any thread): :attr:`progress` (fraction of the file read,
  None when unknown), :attr:`packets`, :attr:`first_ts`, :attr:`report` (the latest
  statistics report of the whole capture), :attr:`done`, :attr:`counters` (the run
  summary of every command, at the end), :attr:`error` (a one-line message),
  :attr:`capture_problems`, :attr:`dropped` (live: kernel drops), :attr:`capturing`
  (live: the decoder's capture is running).
* :meth:`stop` ends the run soon from any thread; :meth:`close` (at exit) stops the
  process for good and removes the spill directory.
* :meth:`apply` handles one message (``worker``: the process it came from); tests
  drive it directly with :func:`kwsniff.tui.decoder.decode` in-process.
* The spill directory (``kwsniff-tui-*`` in ``spill_dir`` or the system temporary
  directory) holds a ``.lock`` file its loader keeps locked (``flock``) while it lives;
  the lock goes with the process however it ends. A new loader first removes the spill
  directories in the same place whose lock nobody holds any more (left by a TUI that
  was killed, e.g. SIGKILL or a crash): :func:`remove_stale_spill_dirs`. Directories
  without a lock file (not made by this code, or still being created) are left alone.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection, wait
from typing import Any

from kwsniff.tui.decoder import Job
from kwsniff.tui.store import ConnectionRow, ExchangeStore

JOIN_SECONDS = 3.0
SPILL_PREFIX = "kwsniff-tui-"
LOCK_NAME = ".lock"
#: pipe buffer asked of the kernel for the link of a two-process run (best effort)
LINK_PIPE_SIZE = 1 << 20


def split_workers(path: str | None, plugin_args: Any = None) -> int:
    """Decoder processes ``path`` can have: 2 for an uncompressed capture file when two
    CPUs are usable and no plugin is loaded, else 1. (Two cost more CPU in all than one
    — the row builder rebuilds every exchange from its record —: they shorten loading
    only when a second core is free.)"""
    if path is None or plugin_args is not None:
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        if cpus < 2:
            return 1
        from kwsniff.capture import open_capture
        with open_capture(path) as source:
            return 1 if source.compression else 2
    except Exception:  # noqa: BLE001 - one process then reports what is wrong
        return 1


def _lock_spill_dir(directory: str) -> int:
    """Create ``directory/.lock`` already locked (made and locked under another name,
    then renamed, so that no sweep ever sees it unlocked); returns its descriptor."""
    tmp = os.path.join(directory, LOCK_NAME + ".new")
    fd = os.open(tmp, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(tmp, os.path.join(directory, LOCK_NAME))
    except OSError:
        os.close(fd)
        raise
    return fd


def remove_stale_spill_dirs(parent: str | None = None) -> list[str]:
    """Remove the spill directories under ``parent`` (default: the system temporary
    directory) whose loader is gone: their ``.lock`` can be locked. Returns what was
    removed; never raises."""
    removed: list[str] = []
    try:
        parent = parent or tempfile.gettempdir()
        names = [n for n in os.listdir(parent) if n.startswith(SPILL_PREFIX)]
    except OSError:
        return removed
    for name in names:
        path = os.path.join(parent, name)
        try:
            fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue                    # no lock file: not ours to judge
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue                # a live loader holds it
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.exists(path):
                removed.append(path)
        finally:
            os.close(fd)
    return removed


class Loader:
    """See the module contract."""

    def __init__(self, *, path: str | None = None, interface: str | None = None,
                 options: Any = None, ports: tuple[int, ...] = (),
                 bpf_filter: str | None = None, buffer_mib: int | None = None,
                 plugin_args: Any = None, spill_dir: str | None = None,
                 max_rows: int | None = None, workers: int = 1) -> None:
        if (path is None) == (interface is None):
            raise ValueError("give exactly one of path and interface")
        self.path = path
        self.interface = interface
        remove_stale_spill_dirs(spill_dir)
        self.directory = tempfile.mkdtemp(prefix=SPILL_PREFIX, dir=spill_dir)
        try:
            self._lock: int | None = _lock_spill_dir(self.directory)
        except OSError:
            self._lock = None           # (a file system without flock: no sweeping)
        kwargs = {} if max_rows is None else {"max_rows": max_rows}
        self.store = ExchangeStore(self.directory, **kwargs)
        self.workers = split_workers(path, plugin_args) if workers == 2 else 1
        self.job = Job(self.directory, path=path, interface=interface, options=options,
                       ports=ports, bpf_filter=bpf_filter, buffer_mib=buffer_mib,
                       plugin_args=plugin_args, workers=self.workers)
        self.progress: float | None = 0.0 if path is not None else None
        self.packets = 0
        self.first_ts: float | None = None
        self.report: dict[str, Any] | None = None
        self.done = False
        self.error: str | None = None
        self.counters: dict[str, int] | None = None
        self.capture_problems: list[str] = []
        self.dropped = 0
        self.if_dropped = 0
        self.capturing = False          # live: the decoder's capture handle is active
        self.started = time.monotonic()
        self.finished_at: float | None = None
        self._processes: list[subprocess.Popen[bytes]] = []
        self._controls: list[Connection] = []
        self._ended: set[int] = set()    # workers whose "done" arrived
        self._last: tuple[Any, ...] | None = None   # worker 0's "done" (two processes)
        self._stopping = False
        self._closed = False

    @property
    def live(self) -> bool:
        return self.interface is not None

    @property
    def elapsed(self) -> float:
        end = self.finished_at if self.finished_at is not None else time.monotonic()
        return end - self.started

    @property
    def _process(self) -> subprocess.Popen[bytes] | None:
        """The (first) decoder process."""
        return self._processes[0] if self._processes else None

    # ------------------------------------------------------------------ control
    def stop(self) -> None:
        """Ask the decoder to end soon (callable from any thread)."""
        self._stopping = True
        controls, self._controls = self._controls, []
        for control in controls:
            try:
                control.close()          # end of its standard input: the decoder stops
            except OSError:
                pass

    def close(self) -> None:
        """Stop the decoder process, release the store and remove the spill directory."""
        if self._closed:
            return
        self._closed = True
        self.stop()
        for proc in list(self._processes):
            try:
                proc.wait(JOIN_SECONDS)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(JOIN_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.store.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    # ------------------------------------------------------------------ running
    def _start(self) -> list[Connection]:
        env = dict(os.environ)
        paths = [p for p in sys.path if p and os.path.isdir(p)]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        out = []
        # two processes: the engine (0) writes the link, the row builder (1) reads it
        ends = list(reversed(os.pipe())) if self.workers > 1 else []
        if ends:
            try:
                fcntl.fcntl(ends[1], fcntl.F_SETPIPE_SZ, LINK_PIPE_SIZE)
            except (AttributeError, OSError):
                pass                    # (the default size works, with less slack)
        try:
            for worker in range(self.workers):
                fds = (ends[worker],) if ends else ()
                proc = subprocess.Popen([sys.executable, "-m", "kwsniff.tui.decoder"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env, close_fds=True,
                                        pass_fds=fds)
                self._processes.append(proc)
                assert proc.stdin is not None and proc.stdout is not None
                control = Connection(os.dup(proc.stdin.fileno()), readable=False)
                proc.stdin.close()
                job = dataclasses.replace(self.job, worker=worker,
                                          link_fd=fds[0] if fds else -1)
                control.send_bytes(pickle.dumps(job, pickle.HIGHEST_PROTOCOL))
                self._controls.append(control)
                out.append(Connection(os.dup(proc.stdout.fileno()), writable=False))
                proc.stdout.close()
        finally:
            for fd in ends:              # the processes hold them now
                os.close(fd)
        if self._stopping:
            self.stop()
        return out

    def run(self) -> None:
        """Start the decoder process(es) and apply their messages until they end; never
        raises."""
        try:
            pipes = self._start()
        except Exception as err:  # noqa: BLE001 - reported in the UI
            self.error = f"cannot start the decoder process: {err}"
            self._finish()
            return
        reading = dict(enumerate(pipes))
        try:
            while not self.done and reading:
                for conn in wait(list(reading.values())):
                    k = pipes.index(conn)       # type: ignore[arg-type]
                    try:
                        message = conn.recv()   # type: ignore[union-attr]
                    except (EOFError, OSError, pickle.UnpicklingError):
                        del reading[k]
                        proc = self._processes[k]
                        code = proc.poll()
                        if k not in self._ended and not self._stopping:
                            self.error = self.error or (
                                "the decoder process ended unexpectedly"
                                + (f" (exit code {code})" if code is not None else ""))
                            self.stop()         # the other one cannot go on alone
                        continue
                    self.apply(message, k)
                    if self.done:
                        break
        finally:
            for conn in pipes:
                conn.close()
            self._finish()

    def _finish(self) -> None:
        self.store.publish()
        if self.path is not None and self.error is None:
            self.progress = 1.0
        if self.finished_at is None:
            self.finished_at = time.monotonic()
        self.done = True

    def apply(self, message: tuple[Any, ...], worker: int = 0) -> None:
        """Apply one decoder message (see :mod:`kwsniff.tui.decoder`) of ``worker``."""
        kind = message[0]
        store = self.store
        if kind == "rows":
            append = store.append
            for row in message[1]:
                append(row)
            store.publish()
        elif kind == "progress":
            _, self.packets, fraction, first_ts = message
            if fraction is not None:
                self.progress = fraction
            if first_ts is not None and self.first_ts is None:
                self.first_ts = first_ts
        elif kind == "names":
            for topic_id, name in message[1]:
                store.names.learn(topic_id, name)
        elif kind == "stats":
            self.report = message[1]
        elif kind == "counters":
            if message[1] is not None:
                self.counters = message[1]
        elif kind == "capture":
            _, self.packets, self.dropped, self.if_dropped = message
            self.capturing = True
        elif kind == "done" and self.workers > 1:
            self._ended.add(worker)
            if message[2]:
                self.error = self.error or message[2]
            if worker == 0:
                self._last = message
            if len(self._ended) == self.workers:
                last, self._last = self._last, None
                if last is not None:
                    self._done(last)
                else:
                    self._finish()
        elif kind == "done":
            self._done(message)

    def _done(self, message: tuple[Any, ...]) -> None:
        _, counters, error, problems, connections = message
        self.counters = counters
        if error:
            self.error = error
        self.capture_problems = list(problems)
        self._merge_connections(connections)
        self._finish()

    def _merge_connections(self, connections: list[tuple[Any, ...]]) -> None:
        """TCP byte counts of finished connections, and Kafka connections that carried
        no exchange."""
        conns = self.store.connections
        for stream, client, broker, protocol, first, last, client_ids, tcp_bytes in connections:
            row = conns.get(stream)
            if row is None:
                if len(conns) >= self.store.max_connections:
                    continue
                row = conns[stream] = ConnectionRow(stream, client, broker, protocol,
                                                    client_ids=list(client_ids)[:8],
                                                    first_ts=first, last_ts=last)
            row.tcp_bytes = tcp_bytes

