"""``decode``/``export -j N``: one capture decoded by N forked processes, output identical
to one process.

Contract:

* :func:`decoding_jobs` picks the number of processes: 1 for ``-j 1``, ``-c``, standard
  input or another file that is not a regular file, a capture that cannot be opened
  (the one-process path reports why), a display filter naming a run-state field (its
  whole-run pass needs every connection); ``-j N`` otherwise. ``auto`` (the default) uses
  ``min(usable CPUs, AUTO_MAX_JOBS)`` where rendering dominates (``decode -V`` or
  ``-x``, ``export``) on uncompressed files of at least :data:`AUTO_MIN_BYTES`. Summary
  lines use ``min(usable CPUs, SUMMARY_MAX_JOBS)`` on uncompressed files of at least
  :data:`SUMMARY_MIN_BYTES`: two processes then run as a pipeline (below; chatty
  benchmark capture 6.1 s -> 4.1 s wall, 1.2x the CPU). Where exchanges are large the
  pipeline renders them in the engine worker (``parallel_pipe.MAX_SHIP_BYTES``), so it
  costs about what one process does (bulk capture, instructions: one process 2.96 G,
  pipeline 2.88 G on the longer path, 3.0 G in all). One process otherwise
  (compressed: every worker would decompress the whole file). ``auto`` counts only CPUs idle when the run starts
  (:func:`_idle_cpus`, measured over :data:`IDLE_WINDOW`): with one core busy
  elsewhere on a two-core machine it runs one process, never slower than ``-j 1``.
* :func:`decode_in_parallel` and :func:`export_in_parallel` write exactly the output
  (standard output / the ``-o`` file) and standard error of the one-process command;
  both use :func:`run_workers`. Every worker runs the whole engine over the whole capture
  (identical engine state, exchange indexes, counters and topic-id resolution) and does
  the output work (facts, display filter, summary line / -V tree / -x dump) only for
  the exchanges it owns: block ``(index - 1) // BLOCK`` belongs to worker
  ``block % N``. Of the other exchanges it walks the facts only of messages whose
  schema can teach topic names (a struct with a ``TopicId``, or an unknown schema), so
  the output layer's topic-id -> name map learns exactly as in one process. The engine
  defers the bodies it does not read itself (``EngineOptions.defer_bodies``: Produce,
  Fetch, ListOffsets, OffsetCommit, OffsetFetch, Heartbeat without topic ids); a worker
  decodes them only for the exchanges it owns (:func:`kwsniff.kafka.decoding.complete`),
  which then are exactly as one process decodes them.
* Summary lines on two processes, through the summary lane, without plugin hooks, run
  as a pipeline instead (:mod:`kwsniff.commands.parallel_pipe`): worker 1 runs the
  engine, renders one block in ``parallel_pipe.SHARE`` and ships the exchanges of the
  other blocks to worker 2, which renders them without an engine. The records to the
  parent are the same; block ``b`` comes from ``parallel_pipe.owner(b)``. A failure of
  worker 2 caused only by worker 1 stopping is reported as worker 1's failure.
* Plugins loaded by the parent are inherited. What they would report during the run
  (hook failures, notices) is recorded by the workers as events and replayed, in
  exchange order, into the parent's own plugin objects, which count, de-duplicate and
  print as in one process: events of an exchange's output come from its owner, those
  of the decoding before it from the owner of that exchange (every worker decodes the
  same), those after the last exchange from one worker.
* Each worker writes length-prefixed records into its own pipe, in index order: one
  text record per owned block (empty when the filter dropped all of it; a block's text
  over :data:`PART_CHARS` is sent in parts, so memory stays bounded) and a final
  record with its counters (plugin events go in a record before a block's text). The
  parent reads block ``b`` from worker ``b % N`` (reading ahead up to
  :data:`READ_AHEAD` bytes of every worker, so that workers are not held in lockstep
  by big blocks; memory stays bounded by that), writes the text, sums the display
  counters (shown, exchange problems) and checks that the engine counters of all
  workers agree. Workers never touch standard output or error.
* A worker that fails (exception, signal, early exit) or disagrees is reported as
  ``internal error: decoding worker K failed: ...`` (exit status 70); on any exit of
  the parent (end, error, Ctrl-C, broken output pipe) the workers are terminated and
  reaped.
"""

from __future__ import annotations

import argparse
import codecs
import fcntl
import io
import os
import select
import signal
import stat
import struct
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from kwsniff.commands.decode import engine_options, exchange_printer, open_output, \
    report_end, summary_lane, use_lane
from kwsniff.errors import CaptureError, UserError, output_error
from kwsniff.kafka.decoding import complete
from kwsniff.kafka.model import Exchange, KafkaMessage
from kwsniff.output.facts import TopicNames, learn_names
from kwsniff.output.filter import DisplayFilter
from kwsniff.output.pipeline import Selection
from kwsniff.output.summary import SummaryFormatter

#: ``auto`` decodes smaller captures in one process (below this, -V saves < ~0.5 s)
AUTO_MIN_BYTES = 4 << 20
#: ``auto`` uses at most this many processes
AUTO_MAX_JOBS = 4
#: ``auto`` for summary lines: at least this big a file, at most this many processes
SUMMARY_MIN_BYTES = 64 << 20
SUMMARY_MAX_JOBS = 2
#: seconds over which ``auto`` measures how many CPUs are idle (see :func:`_idle_cpus`)
IDLE_WINDOW = 0.1
#: consecutive exchanges one worker renders (one record, one write in the parent)
BLOCK = 32
#: text a worker holds before it sends part of a block
PART_CHARS = 1 << 20
#: a worker's pipe writes are batched up to this many bytes
WRITE_BATCH = 64 << 10
#: pipe buffer requested from the kernel (best effort)
PIPE_SIZE = 1 << 20
#: bytes the parent reads at once, and reads ahead per worker at most
READ_CHUNK = 1 << 20
READ_AHEAD = 16 << 20

_HEADER = struct.Struct("<cI")       # record kind, payload length
_TEXT, _PART, _EVENTS, _FINAL, _ERROR = b"T", b"t", b"P", b"F", b"E"


class WorkerFailed(UserError):
    """A decoding worker crashed, exited early or disagreed with the others."""

    exit_code = 70

    def __init__(self, worker: int, why: str) -> None:
        super().__init__(f"internal error: decoding worker {worker} failed: {why}")


# ----------------------------------------------------------------------------- choice

def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _idle_cpus(window: float = IDLE_WINDOW) -> float:
    """How many CPUs were idle over the last ``window`` seconds (from ``/proc/stat``;
    from the load average where that cannot be read; every usable CPU when neither
    can), at most the usable CPUs."""
    usable = _usable_cpus()

    def sample() -> tuple[int, int] | None:
        try:
            with open("/proc/stat", encoding="ascii") as fh:
                fields = fh.readline().split()
        except OSError:
            return None
        if not fields or fields[0] != "cpu" or len(fields) < 5:
            return None
        ticks = [int(x) for x in fields[1:]]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)     # idle + iowait
        return idle, sum(ticks)

    first = sample()
    if first is not None:
        time.sleep(window)
        second = sample()
        if second is not None and second[1] > first[1]:
            share = (second[0] - first[0]) / (second[1] - first[1])
            return min(float(usable), share * (os.cpu_count() or usable))
    try:
        return max(0.0, min(float(usable), usable - os.getloadavg()[0]))
    except (AttributeError, OSError):
        return float(usable)


def decoding_jobs(args: argparse.Namespace, heavy: bool = True) -> int:
    """How many processes ``decode``/``export`` use (see the module contract); ``heavy``:
    rendering dominates the run (``-V``, ``-x``, export), else summary lines."""
    jobs = getattr(args, "jobs", 1)
    if jobs == 1 or getattr(args, "count", None) is not None or args.capture == "-" \
            or not hasattr(os, "fork"):
        return 1
    if _run_state_filter(getattr(args, "display_filter", None)):
        return 1        # the whole-run pass needs every connection in one process
    try:
        info = os.stat(args.capture)
    except OSError:
        return 1
    if not stat.S_ISREG(info.st_mode):        # a pipe cannot be read N times
        return 1
    if jobs is None:
        if info.st_size < (AUTO_MIN_BYTES if heavy else SUMMARY_MIN_BYTES):
            return 1
        jobs = min(_usable_cpus(), AUTO_MAX_JOBS if heavy else SUMMARY_MAX_JOBS)
        if jobs > 1:
            # only cores that are idle now: on a busy machine the extra processes would
            # share a core with others and the run would take longer than on one
            jobs = min(jobs, max(1, int(_idle_cpus() + 0.5)))
        if jobs > 1 and _compressed(args.capture):
            return 1
    return max(1, jobs)


def _run_state_filter(expression: str | None) -> bool:
    """Whether the display filter names a run-state field (end-to-end latency, consumer
    group: :mod:`kwsniff.output.insights.annotate`)."""
    if not expression:
        return False
    from kwsniff.output.filter import FilterError, compile_filter
    try:
        return bool(compile_filter(expression).run_fields)
    except FilterError:
        return False        # the command reports the mistake itself


def _compressed(path: str) -> bool:
    """Whether the capture is compressed (True too when it cannot be opened: the
    one-process path then reports why)."""
    from kwsniff.capture import open_capture
    try:
        with open_capture(path) as source:
            return source.compression is not None
    except (OSError, CaptureError):
        return True


# ----------------------------------------------------------------------------- workers

class _Sink:
    """Length-prefixed records into a pipe, written in batches."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()

    def record(self, kind: bytes, payload: bytes) -> None:
        buf = self.buf
        buf += _HEADER.pack(kind, len(payload))
        buf += payload
        if len(buf) >= WRITE_BATCH:
            self.flush()

    def flush(self) -> None:
        view = memoryview(self.buf)
        while view:
            view = view[os.write(self.fd, view):]
        view.release()
        self.buf.clear()


def _owned(exchanges: Iterable[Exchange], worker: int, jobs: int, names: TopicNames,
           end_block: Callable[[], None], events: list[Any],
           prepare: Callable[[Exchange], None]) -> Iterator[Exchange]:
    """The exchanges of ``worker``'s blocks, each after ``prepare(exchange)`` (decodes
    the bodies the engine deferred); ``end_block()`` after each block. The others only
    teach ``names`` (when their schema can). ``events`` (plugin events,
    see :class:`_PluginTap`) keeps those of this worker's blocks: the events that came
    before one of its exchanges and those of its output; at the end it holds the events
    after the last exchange."""
    block, mine = -1, False
    mark = len(events)
    for ex in exchanges:
        before = events[mark:]          # from the decoding up to this exchange
        del events[mark:]
        b = (ex.index - 1) // BLOCK
        if b != block:
            if mine:
                end_block()
            block, mine = b, b % jobs == worker
        if mine:
            events += before
            prepare(ex)
            yield ex
        else:
            learn_names(ex, names)
        mark = len(events)
    after = events[mark:]
    del events[mark:]
    if mine:
        end_block()
    events += after


class _PluginTap:
    """Worker side of plugin reporting: what would be reported (hook failures, plugin
    notices, other reports) is recorded as events, in order, for the parent to replay
    into its own identical plugin objects (which count, de-duplicate and print exactly
    as one process does). Patches this worker process's Guard and PluginContext."""

    def __init__(self, manager: Any) -> None:
        from kwsniff.plugin_api.context import PluginContext
        from kwsniff.plugin_api.guard import Guard
        self.events: list[Any] = []
        contexts, guards = _plugin_objects(manager)
        ctx_ids = {id(c): i for i, c in enumerate(contexts)}
        guard_ids = {id(g): i for i, g in enumerate(guards)}
        events = self.events
        failed = Guard.failed
        report = PluginContext.report

        def tap_failed(guard: Any, problem: Any, where: str = "", consequence: str = "") -> None:
            i = guard_ids.get(id(guard))
            if i is None:
                failed(guard, problem, where, consequence)
                return
            text = problem if isinstance(problem, str) else \
                f"{type(problem).__name__}: {problem}"
            events.append(("failed", i, text, where, consequence))

        def tap_report(ctx: Any, message: str) -> None:
            i = ctx_ids.get(id(ctx))
            if i is None:
                report(ctx, message)
            else:
                events.append(("notice", i, message))

        Guard.failed = tap_failed                      # type: ignore[method-assign]
        PluginContext.report = tap_report              # type: ignore[method-assign]
        manager.reporter = lambda message: events.append(("report", message))


def _plugin_objects(manager: Any) -> tuple[list[Any], list[Any]]:
    """The plugin contexts and hook guards of ``manager``, in a fixed order."""
    contexts = [p.context for p in getattr(manager, "plugins", ()) if p.context is not None]
    return contexts, [g for c in contexts for g in c.guards]


def _replay(manager: Any, events: list[Any]) -> None:
    """Parent side of :class:`_PluginTap`."""
    contexts, guards = _plugin_objects(manager)
    for ev in events:
        if ev[0] == "failed":
            guards[ev[1]].failed(ev[2], ev[3], ev[4])
        elif ev[0] == "notice":
            contexts[ev[1]].report(ev[2])
        else:
            manager.report(ev[1])


#: ``factory(engine, selection, write) -> (emit, extra)``: a worker's output for one
#: run; ``emit(exchange, facts)`` renders an owned exchange through ``write`` (which
#: takes text, or bytes of strict UTF-8 text), ``extra()`` is a dict of the worker's own
#: counts for the parent
Renderer = Callable[[Any, Selection, Callable[[Any], Any]],
                    tuple[Callable[[Exchange, Any], None], Callable[[], dict[str, Any]]]]


def _work(args: argparse.Namespace, worker: int, jobs: int,
          display_filter: DisplayFilter | None, factory: Renderer, sink: _Sink,
          parent: int) -> None:
    import pickle     # (here: start-up of one-process runs does not pay for it)

    from kwsniff.capture import open_capture
    from kwsniff.engine import Engine
    from kwsniff.plugin_api.cli import active_manager
    manager = active_manager()
    events = _PluginTap(manager).events if manager is not None else []
    options = engine_options(args)
    # bodies that only output needs are decoded for the exchanges this worker renders
    options.defer_bodies = True
    engine = Engine(options)
    annotate_ctx = engine.ctx.annotate_ctx
    selection = Selection(display_filter, None)
    parts: list[str] = []
    emit, extra = factory(engine, selection, parts.append)
    measured = [0, 0]       # parts already measured, their characters

    def send(kind: bytes) -> None:
        if events:
            sink.record(_EVENTS, pickle.dumps(events))
            events.clear()
        # (each part encoded on its own: one non-ASCII character, as in a -V heading,
        # does not make the whole block a wide string)
        sink.record(kind, b"".join([p.encode("utf-8", "surrogatepass") for p in parts]))
        parts.clear()
        measured[:] = [0, 0]

    def end_block() -> None:
        send(_TEXT)

    with open_capture(args.capture) as source:
        if os.getppid() != parent:
            return      # the parent is gone already
        # (a summary lane completes the deferred bodies it does not skim itself)
        prepare = _nothing if selection.lane is not None else \
            (lambda ex: complete(ex, annotate_ctx))
        owned = _owned(engine.run(source), worker, jobs, selection.names, end_block, events,
                       prepare)
        for ex, facts in selection(owned):
            emit(ex, facts)
            measured[1] += sum(map(len, parts[measured[0]:]))
            measured[0] = len(parts)
            if measured[1] >= PART_CHARS:
                send(_PART)     # bounded memory with huge exchanges
        final = {"engine": (engine.summary.exchanges_total,
                            _engine_counters(engine, source)),
                 "capture_problems": list(getattr(source, "problems", ())),
                 "tls_notes": list(engine.summary.tls_notes),
                 "shown": selection.shown, "problems": selection.problems,
                 "events": list(events), "extra": extra()}
    sink.record(_FINAL, pickle.dumps(final))
    sink.flush()


def _pipe_work(args: argparse.Namespace, worker: int, pipe: tuple[int, Any], sink: _Sink,
               parent: int) -> None:
    """A worker of the pipeline (kwsniff/commands/parallel_pipe.py): 0 runs the engine,
    1 renders what it ships; ``pipe``: the link's end and the palette."""
    import pickle

    from kwsniff.capture import open_capture
    from kwsniff.commands import parallel_pipe
    link_fd, palette = pipe
    parts: list[Any] = []

    def send() -> None:
        sink.record(_TEXT, b"".join([p.encode("utf-8", "surrogatepass") if type(p) is str
                                     else p for p in parts]))
        parts.clear()
        if worker == 0:
            sink.flush()        # (at once: see parallel_pipe.engine_work)

    if worker == 0:
        with open_capture(args.capture) as source:
            if os.getppid() != parent:
                return      # the parent is gone already
            final = parallel_pipe.engine_work(args, palette, _Sink(link_fd), send, parts,
                                              source, WRITE_BATCH, BLOCK, _engine_counters)
    else:
        final = parallel_pipe.render_work(args, palette, link_fd, send, parts, sink.flush)
    sink.record(_FINAL, pickle.dumps(final))
    sink.flush()


def _nothing(ex: Exchange) -> None:
    pass


def _engine_counters(engine: Any, source: Any) -> dict[str, int]:
    from kwsniff.output.pipeline import run_counters
    return run_counters(engine.summary, getattr(source, "problems", ()), 0)


def _end_with_parent() -> None:
    """Linux: SIGTERM this worker when the parent dies, even by SIGKILL (best effort)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _worker_main(args: argparse.Namespace, worker: int, jobs: int,
                 display_filter: DisplayFilter | None, factory: Renderer, fd: int,
                 parent: int, pipe: tuple[int, Any] | None = None) -> None:
    """Body of a forked worker; never returns."""
    code = 1
    sink = _Sink(fd)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)    # the parent ends the workers
        _end_with_parent()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        if pipe is not None:
            _pipe_work(args, worker, pipe, sink, parent)
        else:
            _work(args, worker, jobs, display_filter, factory, sink, parent)
        code = 0
    except BaseException as err:  # noqa: BLE001 - reported by the parent
        try:    # after the blocks already rendered, as one process would have shown
            sink.record(_ERROR, f"{type(err).__name__}: {err}".encode("utf-8", "replace"))
            sink.flush()
        except BaseException:  # noqa: BLE001 - the parent is gone or reports the exit
            pass
    finally:
        os._exit(code)


# ----------------------------------------------------------------------------- parent

def _exit_text(pid: int) -> str:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return "exited"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"killed by signal {name}"
    return f"exited with status {os.WEXITSTATUS(status)} before the end of its output"


class _Workers:
    """The forked workers and the read ends of their pipes."""

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.fds: list[int] = []
        self.bufs: list[bytearray] = []     # bytes read ahead, from ``pos`` on
        self.pos: list[int] = []
        self.eof: list[bool] = []

    def start(self, args: argparse.Namespace, jobs: int,
              display_filter: DisplayFilter | None, factory: Renderer,
              pipeline: Any = None) -> None:
        """Fork the workers; ``pipeline`` (the palette): the two workers of
        :mod:`kwsniff.commands.parallel_pipe`, joined by a pipe of their own."""
        pipes = []
        link: tuple[int, int] | None = None
        parent = os.getpid()
        try:
            for _ in range(jobs):
                pipes.append(os.pipe())
                try:    # fewer context switches (best effort; Linux)
                    fcntl.fcntl(pipes[-1][0], fcntl.F_SETPIPE_SZ, PIPE_SIZE)
                except (AttributeError, OSError):
                    pass
            if pipeline is not None:
                link = os.pipe()
                try:
                    fcntl.fcntl(link[0], fcntl.F_SETPIPE_SZ, PIPE_SIZE)
                except (AttributeError, OSError):
                    pass
            for k in range(jobs):
                pid = os.fork()
                if pid == 0:       # the worker
                    for j, (r, w) in enumerate(pipes):
                        os.close(r)
                        if j != k:
                            os.close(w)
                    pipe = None
                    if link is not None:
                        keep = link[1] if k == 0 else link[0]   # 0 writes, 1 reads
                        os.close(link[0] if k == 0 else link[1])
                        pipe = (keep, pipeline)
                    _worker_main(args, k, jobs, display_filter, factory, pipes[k][1], parent,
                                 pipe)
                self.pids.append(pid)
        finally:
            if link is not None:
                os.close(link[0])
                os.close(link[1])
            for r, w in pipes:
                os.close(w)
                self.fds.append(r)
                self.bufs.append(bytearray())
                self.pos.append(0)
                self.eof.append(False)

    def read(self, k: int) -> tuple[bytes, bytes]:
        """The next record of worker ``k``; a failure or early end is WorkerFailed."""
        if self._have(k, _HEADER.size):
            kind, size = _HEADER.unpack_from(self.bufs[k], self.pos[k])
            if self._have(k, _HEADER.size + size):
                buf, start = self.bufs[k], self.pos[k] + _HEADER.size
                payload = bytes(buf[start:start + size])
                self.pos[k] = start + size
                if self.pos[k] >= READ_CHUNK and self.pos[k] * 2 >= len(buf):
                    del buf[:self.pos[k]]
                    self.pos[k] = 0
                if kind == _ERROR:
                    raise WorkerFailed(k + 1, payload.decode("utf-8", "replace"))
                return kind, payload
        raise WorkerFailed(k + 1, _exit_text(self.pop_pid(k)))

    def _have(self, k: int, n: int) -> bool:
        """Whether ``n`` bytes of worker ``k`` are buffered (reading as needed)."""
        while len(self.bufs[k]) - self.pos[k] < n:
            if self.eof[k]:
                return False
            self._pump(k)
        return True

    def _pump(self, k: int) -> None:
        """Wait for data from worker ``k``; meanwhile read ahead from the others (up to
        READ_AHEAD bytes each), so that a worker is not held up while the parent waits
        for a slow block of another one."""
        wanted = [self.fds[k]]
        for j, fd in enumerate(self.fds):
            if j != k and not self.eof[j] and len(self.bufs[j]) - self.pos[j] < READ_AHEAD:
                wanted.append(fd)
        ready, _, _ = select.select(wanted, [], [])
        for fd in ready:
            j = self.fds.index(fd)
            data = os.read(fd, READ_CHUNK)
            if data:
                self.bufs[j] += data
            else:
                self.eof[j] = True

    def pop_pid(self, k: int) -> int:
        pid = self.pids[k]
        self.pids[k] = 0
        return pid

    def finish(self) -> None:
        """Reap every worker; one that did not exit cleanly is WorkerFailed."""
        for k in range(len(self.pids)):
            pid = self.pop_pid(k)
            if pid:
                _, status = os.waitpid(pid, 0)
                if status != 0:
                    self.pids[k] = 0
                    raise WorkerFailed(k + 1, "exited with status "
                                       f"{os.waitstatus_to_exitcode(status)}")

    def stop(self) -> None:
        """Terminate and reap the workers still running; close the pipes."""
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []
        for k, pid in enumerate(self.pids):
            if pid:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for k, pid in enumerate(self.pids):
            if pid:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
                self.pids[k] = 0


class Totals:
    """What the parent knows at the end of a parallel run."""

    def __init__(self, counters: dict[str, int], shown: int, capture_problems: list[str],
                 extras: list[dict[str, Any]], tls_notes: list[str] | None = None) -> None:
        self.counters = counters                  # as :func:`run_counters` gives them
        self.tls_notes = tls_notes or []          # TLS connections not decrypted
        self.shown = shown                        # exchanges that passed the filter
        self.capture_problems = capture_problems
        self.extras = extras                      # every worker's ``extra()``

    def extra_sum(self, key: str) -> int:
        return sum(int(e.get(key, 0)) for e in self.extras)


def _text_writer(write: Callable[[str], Any]) -> Callable[[bytes], Any]:
    """How the parent writes a worker's UTF-8 text (encoded with ``surrogatepass``).

    When ``write`` is the ``write`` of a UTF-8 :class:`io.TextIOWrapper` that is not line
    buffered (a file or pipe, not a terminal) on a platform whose newline is ``\n``, the
    bytes go straight to its binary buffer: decoding them only for the wrapper to encode
    them again cost the parent a third of its time. Text with a 0xED byte (which starts
    every encoded surrogate, and a few Hangul characters) takes the text path, so that
    it fails or is escaped exactly as in one process; the wrapper is flushed before the
    next direct write, keeping the order."""
    stream = getattr(write, "__self__", None)
    text = (lambda payload: write(payload.decode("utf-8", "surrogatepass")))
    try:
        direct = (type(stream) is io.TextIOWrapper and os.linesep == "\n"
                  and not stream.line_buffering
                  and codecs.lookup(stream.encoding).name == "utf-8")
    except (LookupError, ValueError):
        direct = False
    if not direct:
        return text
    assert stream is not None
    stream.flush()
    raw_write = stream.buffer.write
    dirty = [False]

    def write_bytes(payload: bytes) -> None:
        if b"\xed" in payload:
            text(payload)
            dirty[0] = True
            return
        if dirty[0]:
            stream.flush()
            dirty[0] = False
        raw_write(payload)

    return write_bytes


def run_workers(args: argparse.Namespace, jobs: int, display_filter: DisplayFilter | None,
                factory: Renderer, write: Callable[[str], Any], pipeline: Any = None
                ) -> Totals:
    """Decode ``args.capture`` on ``jobs`` workers that render with ``factory``; write
    their text in exchange order through ``write`` (see the module contract).
    ``pipeline`` (the palette): the two workers of
    :mod:`kwsniff.commands.parallel_pipe` instead."""
    import pickle     # (here: start-up of one-process runs does not pay for it)

    from kwsniff.capture import open_capture
    from kwsniff.plugin_api.cli import active_manager
    with open_capture(args.capture):      # errors exactly as in one process
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    manager = active_manager()
    # every worker runs an engine: imported once here, before the fork, the workers share
    # it (each importing it after the fork costs ~25 ms of CPU)
    import kwsniff.engine  # noqa: F401
    workers = _Workers()
    put = _text_writer(write)
    try:
        workers.start(args, jobs, display_filter, factory, pipeline)
        read = workers.read
        if pipeline is not None:
            from kwsniff.commands.parallel_pipe import LINK_ENDED, owner
            read = _engine_first(workers, LINK_ENDED)
        else:
            def owner(block: int) -> int:
                return block % jobs
        block = 0
        while True:
            k = owner(block)
            kind, payload = read(k)
            while kind == _EVENTS or kind == _PART:
                if kind == _EVENTS:
                    _replay(manager, pickle.loads(payload))
                elif payload:
                    put(payload)
                kind, payload = read(k)
            if kind != _TEXT:
                break
            if payload:
                put(payload)
            block += 1
        finals: dict[int, dict[str, Any]] = {}
        for j in [k, *(j for j in range(jobs) if j != k)]:
            if j != k:
                kind, payload = read(j)
            if kind != _FINAL:
                raise WorkerFailed(j + 1, "its records do not match the other workers'")
            finals[j] = pickle.loads(payload)
        workers.finish()
    finally:
        workers.stop()
    first = finals[0]
    total, counters = first["engine"]
    for j in range(1, jobs):
        if finals[j]["engine"] != first["engine"] or \
                finals[j]["capture_problems"] != first["capture_problems"]:
            raise WorkerFailed(j + 1, "its run counters differ from worker 1's")
    if block != -(-total // BLOCK):
        raise WorkerFailed(k + 1, f"{block} output blocks for {total} exchanges")
    _replay(manager, finals[k]["events"])     # after the last exchange, once
    counters = dict(counters)
    counters["problems"] += sum(f["problems"] for f in finals.values())
    return Totals(counters, sum(f["shown"] for f in finals.values()),
                  first["capture_problems"], [finals[j]["extra"] for j in range(jobs)],
                  first.get("tls_notes"))


def _engine_first(workers: _Workers, link_ended: str) -> Callable[[int], tuple[bytes, bytes]]:
    """``workers.read`` for the pipeline: when the render worker (2) failed only because
    the engine worker (1) stopped shipping, the engine worker's own failure is reported."""
    def read(k: int) -> tuple[bytes, bytes]:
        try:
            return workers.read(k)
        except WorkerFailed as err:
            if k != 1 or link_ended not in str(err):
                raise
            while True:             # its records until its failure (or a clean end)
                if workers.read(0)[0] == _FINAL:
                    raise

    return read


def decode_in_parallel(args: argparse.Namespace, jobs: int,
                       display_filter: DisplayFilter | None, palette: Any,
                       out: IO[str]) -> int:
    """``decode`` on ``jobs`` worker processes (see the module contract)."""

    def factory(engine: Any, selection: Selection, write: Callable[[Any], Any]) -> Any:
        formatter = SummaryFormatter(palette, args.time_format)
        printer = exchange_printer(args, palette, formatter, write)
        selection.lean = bool(args.verbose)     # as in one process (decode.run)
        if summary_lane(args, display_filter):
            use_lane(engine, selection)

        def emit(ex: Exchange, facts: Any) -> None:
            if formatter.start_ts is None:
                formatter.start_ts = engine.summary.first_ts   # as in one process
            printer(ex, facts)

        return emit, dict

    from kwsniff.commands.parallel_pipe import pipeline_wanted
    lane = not args.verbose and not args.hex and summary_lane(args, display_filter)
    pipeline = palette if pipeline_wanted(args, jobs, lane) else None
    totals = run_workers(args, jobs, display_filter, factory, out.write, pipeline)
    out.flush()
    report_end(totals.counters, totals.shown, totals.capture_problems, notes=totals.tls_notes,
               note=_no_kafka(args, totals.counters))
    return 0


def export_in_parallel(args: argparse.Namespace, jobs: int,
                       display_filter: DisplayFilter | None) -> int:
    """``export`` on ``jobs`` worker processes: the same JSON Lines and summary."""
    from types import SimpleNamespace

    from kwsniff.output.jsonl import ExportEncoder, JsonlWriter

    def factory(engine: Any, selection: Selection, write: Callable[[str], Any]) -> Any:
        encoder = ExportEncoder(args.capture, records=args.records, names=selection.names)
        writer = JsonlWriter(SimpleNamespace(write=write), encoder)  # type: ignore[arg-type]
        return writer.write_exchange, lambda: {"exchanges": encoder.exchanges,
                                               "record_lines": encoder.record_lines}

    with open_output(args.output) as stream:
        try:
            totals = run_workers(args, jobs, display_filter, factory, stream.write)
            encoder = ExportEncoder(args.capture, records=args.records)
            encoder.exchanges = totals.extra_sum("exchanges")
            encoder.record_lines = totals.extra_sum("record_lines")
            if not args.no_summary:
                JsonlWriter(stream, encoder).write_summary(totals.counters)
            stream.flush()
        except OSError as err:
            if isinstance(err, BrokenPipeError):
                raise
            raise output_error(args.output, err) from None
    report_end(totals.counters, encoder.exchanges, totals.capture_problems, what="exported",
               notes=totals.tls_notes, note=_no_kafka(args, totals.counters))
    return 0


def _no_kafka(args: argparse.Namespace, counters: dict[str, int]) -> str | None:
    """The note of a capture without Kafka (:mod:`kwsniff.output.no_kafka`)."""
    if counters.get("connections") or counters.get("tls_undecrypted"):
        return None         # (TLS on a Kafka port without its key: the TLS hint says it)
    from kwsniff.output.no_kafka import capture_note
    return capture_note(args.capture, 0)
