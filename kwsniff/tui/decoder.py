"""The decoding side of the TUI: runs the engine and sends rows (in a child process).

Contract:

* :func:`decode` runs the one engine path over a :class:`Job` (a capture file, or a
  live interface through :class:`~kwsniff.live_engine.LiveDecoder`) and reports through
  ``send(message)``; it returns when the input ends or ``stopped()`` turns true, and
  never raises (errors end the run with an ``error`` in the final message).
* Messages (tuples, first item the kind):

  * ``("rows", [row tuple, ...])`` — :class:`~kwsniff.tui.rowbuild.RowBuilder` rows, in
    order; their exchanges are in the spill files before the message is sent;
  * ``("progress", packets, fraction | None, first_ts | None)`` — fraction of the file
    read (estimated; None for compressed input and live capture);
  * ``("names", [(topic_id, name), ...])`` — topic ids learned (for slow filters);
  * ``("stats", report)`` — :meth:`~kwsniff.output.stats.StatsCollector.report` so far
    (every :data:`STATS_SECONDS` and at the end);
  * ``("counters", counters)`` — the run counters so far (with each report);
  * ``("capture", packets, dropped, if_dropped)`` — live capture counters;
  * ``("done", counters, error | None, capture_problems, connections)`` — last message:
    the run counters, and per Kafka connection
    ``(stream, client, broker, protocol, first_ts, last_ts, client_ids, tcp_bytes)``.

* A capture file can be decoded by two processes (``Job.workers == 2``) as a pipeline,
  with results identical to one process (``tests/tui/test_tui_split.py``): the engine
  runs once. Worker 0 (the *engine*) runs the engine, counts the exchanges' problems
  and makes each exchange's spill record (:func:`~kwsniff.tui.spill.pack`), which it
  hands, in order and in batches, to worker 1 over the link (``link``: a callable taking
  one batch's bytes, :func:`pack_batch`; an empty ``bytes`` ends the run). Worker 1 (the
  *row builder*) has no engine: it takes the batches (``link``: an iterable of them,
  :func:`unpack_batch`), rebuilds each exchange from its record
  (:func:`~kwsniff.tui.spill.rebuild`: the same exchange, facts and output), and makes
  the rows, the spill files (the engine's records as they are), the topic names and
  the statistics as one process does. Worker 0 sends progress, capture counters, run
  counters and the last ``("done", counters, error, capture_problems, connections)``;
  worker 1 sends rows, names, statistics and a last ``("done", None, error, [], [])``.
  An exchange whose record cannot be pickled is handed on as a record of its addresses,
  status and problems only, with one problem more saying so (one process would spill
  it as unavailable and show its row in full).
* :func:`child_main` is the entry point of the decoder process
  (``python -m kwsniff.tui.decoder``, started by :class:`~kwsniff.tui.loader.Loader`):
  it sets the streaming GC thresholds (:mod:`kwsniff.gc_policy`), reads the job from
  standard input, loads the session's plugins, then runs :func:`decode` sending over
  standard output until stopped; in a two-process run the link is the pipe whose end
  ``Job.link_fd`` is (the loader makes it).
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kwsniff import gc_policy
from kwsniff.output.facts import ExchangeFacts, TopicNames
from kwsniff.output.pipeline import run_counters
from kwsniff.output.stats import StatsCollector
from kwsniff.tui.rowbuild import RowBuilder

PUBLISH_SECONDS = 0.1
STATS_SECONDS = 2.0
MAX_BATCH = 5000
#: exchange records per link batch of a two-process run (and at most LINK_BYTES of them)
LINK_BATCH = 512
LINK_BYTES = 1 << 20
#: batches the engine process may have made and not yet written to the link (bytes):
#: a thread writes them, so the engine does not wait for a row builder that is busy
#: for a moment (a repaint of the UI on its core)
LINK_AHEAD = 32 << 20
#: the row builder of a two-process run yields to the engine process (the pipeline's
#: longest stage) and to the UI: on two cores the engine then keeps one to itself
BUILDER_NICE = 5
#: a record of an exchange that could not be pickled carries this problem more
UNSHIPPED = "the decoded exchange could not be handed to the row builder process"
#: per-packet record overhead of the capture formats, for the progress estimate
_RECORD_OVERHEAD = {"pcap": 16, "pcapng": 32}

Send = Callable[[tuple[Any, ...]], None]


@dataclass(slots=True)
class Job:
    """What to decode and how."""

    spill_dir: str
    path: str | None = None                  # a capture file, or
    interface: str | None = None             # a live interface
    options: Any = None                      # EngineOptions
    ports: tuple[int, ...] = ()              # live: kernel filter ports
    bpf_filter: str | None = None            # live: custom capture filter
    buffer_mib: int | None = None            # live: kernel buffer
    plugin_args: Any = None                  # argparse namespace with the plugin options
    extra: dict[str, Any] = field(default_factory=dict)
    worker: int = 0                          # 0 the engine, 1 the row builder (two-process run)
    workers: int = 1                         # 1, or 2 for a pipeline (files only)
    link_fd: int = -1                        # two-process run: this worker's end of the link


def pack_batch(records: list[bytes], raws: list[int]) -> bytes:
    """One link batch: exchange records (:func:`~kwsniff.tui.spill.pack`) and the raw
    frame bytes of each."""
    return pickle.dumps((records, raws), pickle.HIGHEST_PROTOCOL)


def unpack_batch(data: bytes) -> tuple[list[bytes], list[int]]:
    """The records and raw sizes of a :func:`pack_batch` batch."""
    records, raws = pickle.loads(data)
    return records, raws


def _problems(ex: Any) -> int:
    """How many problems ``ex`` has, its messages' included (the run counters')."""
    if ex.problems or (ex.request is not None and ex.request.problems) or \
            (ex.response is not None and ex.response.problems):
        return len(ex.all_problems())
    return 0


def _unshipped(ex: Any) -> bytes:
    """The record of an exchange that cannot be pickled: its addresses, status and
    problems (as text), and one problem more (:data:`UNSHIPPED`)."""
    from kwsniff.tui.spill import lean
    from kwsniff.kafka.model import Exchange
    stub = Exchange(ex.index, ex.stream, tuple(ex.client), tuple(ex.broker), ex.status,
                    None, None, str(ex.protocol),
                    [str(p) for p in ex.all_problems()] + [UNSHIPPED], None)
    return pickle.dumps(lean(stub), pickle.HIGHEST_PROTOCOL)


class _LearningNames(TopicNames):
    """A topic-name map that remembers what it learned since the last :meth:`take`."""

    __slots__ = ("fresh",)

    def __init__(self) -> None:
        super().__init__()
        self.fresh: dict[str, str] = {}

    def learn(self, topic_id: str, name: str) -> None:
        if self.get(topic_id) != name:
            self.fresh[topic_id] = name
        super().learn(topic_id, name)

    def take(self) -> list[tuple[str, str]]:
        out = list(self.fresh.items())
        self.fresh.clear()
        return out


class _Run:
    """One decoding run: engine, row builder, statistics and batching."""

    def __init__(self, job: Job, send: Send, stopped: Callable[[], bool]) -> None:
        self.job = job
        self.send = send
        self.stopped = stopped
        # what this process reports (see the module contract)
        self.rows_here = job.workers == 1 or job.worker == 1
        self.engine_here = job.workers == 1 or job.worker == 0
        self.builder = RowBuilder(job.spill_dir) if self.rows_here else None
        self.names = _LearningNames()
        self.stats = StatsCollector()
        self.engine: Any = None
        self.packets = 0
        self.fraction: float | None = None
        self.batch: list[tuple[Any, ...]] = []
        self.exchange_problems = 0
        self.capture_problems: list[str] = []
        self.error: str | None = None
        self.live: Any = None
        self._next_publish = time.monotonic() + PUBLISH_SECONDS
        self._next_stats = time.monotonic() + STATS_SECONDS

    # ------------------------------------------------------------------ output
    def publish(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now < self._next_publish and len(self.batch) < MAX_BATCH:
            return
        self._next_publish = now + PUBLISH_SECONDS
        stats = force or now >= self._next_stats
        if stats:
            self._next_stats = now + STATS_SECONDS
        if self.rows_here:
            if self.batch:
                self.builder.flush()
                batch, self.batch = self.batch, []
                self.send(("rows", batch))
            fresh = self.names.take()
            if fresh:
                self.send(("names", fresh))
            if stats:
                self.send(("stats", self.stats.report()))
        if self.engine_here:
            first_ts = self.engine.summary.first_ts if self.engine is not None else None
            self.send(("progress", self.packets, self.fraction, first_ts))
            if self.live is not None:
                st = self.live.stats()
                self.send(("capture", st.packets, st.dropped, st.if_dropped))
            if stats:
                self.send(("counters", self.counters()))

    def counters(self) -> dict[str, int] | None:
        if self.engine is None:
            return None
        return run_counters(self.engine.summary, self.capture_problems, self.exchange_problems)

    def consume(self, exchanges: Iterable[Any]) -> None:
        names = self.names
        builder = self.builder
        stats_add = self.stats.add
        stopped = self.stopped
        for ex in exchanges:
            facts = ExchangeFacts(ex, names)
            # self.batch, not a local alias: publish() (also called between live packet
            # batches) replaces the list
            self.batch.append(builder.row(ex, facts))
            self.exchange_problems += _problems(ex)
            stats_add(facts)
            if len(self.batch) >= MAX_BATCH or time.monotonic() >= self._next_publish:
                self.publish()
            if stopped():
                break

    def ship(self, exchanges: Iterable[Any], link: Callable[[bytes], Any]) -> None:
        """The engine worker of a two-process run: hand every exchange's record to the
        row builder (see the module contract)."""
        from kwsniff.tui.spill import pack

        stopped = self.stopped
        records: list[bytes] = []
        raws: list[int] = []
        size = 0
        try:
            try:
                for ex in exchanges:
                    self.exchange_problems += _problems(ex)
                    record, raw = pack(ex)
                    if not record:
                        record = _unshipped(ex)
                    records.append(record)
                    raws.append(raw)
                    size += len(record)
                    if len(records) >= LINK_BATCH or size >= LINK_BYTES or \
                            time.monotonic() >= self._next_publish:
                        batch, records, raws, size = pack_batch(records, raws), [], [], 0
                        link(batch)
                        self.publish()
                    if stopped():
                        break
            finally:
                # also after an error (which this process reports): the row builder
                # shows what was decoded and ends without one of its own
                if records:
                    link(pack_batch(records, raws))
                link(b"")
        except BrokenPipeError:
            pass                # the row builder is gone: the UI stopped the run

    def build(self, batches: Iterable[bytes]) -> None:
        """The row builder of a two-process run: rows, spill, names and statistics of
        the exchanges the engine worker hands on (see the module contract)."""
        from kwsniff.tui.spill import rebuild

        names = self.names
        builder = self.builder
        stats_add = self.stats.add
        stopped = self.stopped
        for data in batches:
            if not data:
                return
            records, raws = unpack_batch(data)
            for record, raw in zip(records, raws):
                ex = rebuild(record)
                facts = ExchangeFacts(ex, names)
                self.batch.append(builder.row(ex, facts, (record, raw)))
                stats_add(facts)
            if len(self.batch) >= MAX_BATCH or time.monotonic() >= self._next_publish:
                self.publish()
            if stopped():
                return
        self.error = "the engine process ended before the end of the capture"

    # ------------------------------------------------------------------ sources
    def run_file(self, path: str, link: Any = None) -> None:
        from kwsniff.capture import open_capture
        from kwsniff.engine import Engine

        if not self.engine_here:
            self.build(link)
            return
        self.engine = Engine(self.job.options)
        with open_capture(path) as source:
            size = 0
            if not source.compression:
                try:
                    size = os.path.getsize(path)
                except OSError:
                    size = 0
            self.fraction = 0.0 if size else None
            overhead = _RECORD_OVERHEAD.get(source.format, 16)
            exchanges = self.engine.run(self._measured(source, size, overhead))
            try:
                if self.rows_here:
                    self.consume(exchanges)
                else:
                    self.ship(exchanges, link)
            finally:
                self.capture_problems = list(source.problems)

    def _measured(self, source: Iterable[tuple], size: int, overhead: int) -> Iterator[tuple]:
        n = 0
        read = 0
        for pkt in source:
            n += 1
            read += len(pkt[3]) + overhead
            if not n & 1023:
                self.packets = n
                if size:
                    self.fraction = min(0.99, read / size)
                if self.stopped():
                    return
            yield pkt
        self.packets = n

    def run_live(self) -> None:
        from kwsniff.capture.live import DEFAULT_BUFFER_MIB, open_live
        from kwsniff.live_engine import LiveDecoder

        job = self.job
        with open_live(job.interface or "any", ports=job.ports, bpf_filter=job.bpf_filter,
                       buffer_mib=job.buffer_mib or DEFAULT_BUFFER_MIB) as source:
            self.live = source
            decoder = LiveDecoder(job.options)
            self.engine = decoder.engine
            self.publish(force=True)              # tells the UI the capture is running
            try:
                self.consume(decoder.run(self._live_batches(source)))
            finally:
                self.capture_problems = list(source.problems)
                if source.error:
                    self.error = source.error

    def _live_batches(self, source: Any) -> Iterator[list[tuple]]:
        for batch in source.batches():
            self.packets += len(batch)
            # the decoder consumed the previous batch: show its exchanges now
            self.publish(force=not batch and bool(self.batch))
            if self.stopped():
                source.stop()
                return
            yield batch

    # ------------------------------------------------------------------ end
    def connections(self) -> list[tuple[Any, ...]]:
        out = []
        try:
            summaries = self.engine.connection_summaries() if self.engine is not None else []
        except Exception:  # noqa: BLE001 - decoration only
            summaries = []
        for cs in summaries:
            if cs.client is None or cs.broker is None:
                continue
            out.append((cs.stream, tuple(cs.client), tuple(cs.broker), cs.protocol,
                        cs.first_ts, cs.last_ts, [c for c in cs.client_ids if c],
                        cs.bytes_from_client + cs.bytes_from_broker))
        return out

    def finish(self) -> None:
        try:
            self.publish(force=True)
        except OSError as err:
            self.error = self.error or f"cannot write the spill file: {err}"
        if self.builder is not None:
            self.builder.close()
        if not self.engine_here:
            self.send(("done", None, self.error, [], []))
            return
        self.send(("done", self.counters(), self.error, self.capture_problems,
                   self.connections()))


def decode(job: Job, send: Send, stopped: Callable[[], bool], link: Any = None) -> None:
    """Decode ``job``, reporting through ``send`` (see the module contract; ``link``: a
    two-process run's link)."""
    from kwsniff.errors import UserError

    run = _Run(job, send, stopped)
    try:
        if job.path is not None:
            run.run_file(job.path, link)
        else:
            run.run_live()
    except UserError as err:
        run.error = str(err)
    except Exception as err:  # noqa: BLE001 - reported in the UI instead of a traceback
        run.error = f"internal error while decoding: {type(err).__name__}: {err}"
    run.finish()


def child_main() -> None:
    """Entry point of the decoder process (``python -m kwsniff.tui.decoder``).

    Protocol: the parent writes one pickled :class:`Job` to standard input (framed by
    :class:`multiprocessing.connection.Connection`) and keeps the pipe open; closing it
    (or writing anything more) stops the run. Messages go to standard output, framed
    the same way; nothing else may be written there, so file descriptors 1 and 2 are
    pointed at the null device (the terminal belongs to the UI).
    """
    import signal
    import threading
    from multiprocessing.connection import Connection

    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C belongs to the UI
    gc_policy.for_streaming()      # this process only streams (about -30 % CPU)
    out = Connection(os.dup(1), readable=False)
    inp = Connection(os.dup(0), writable=False)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    try:
        job = inp.recv()
    except (EOFError, OSError):
        return
    stop = threading.Event()

    def watch() -> None:
        try:
            inp.recv_bytes()
        except (EOFError, OSError):
            pass
        stop.set()

    threading.Thread(target=watch, name="stop-watch", daemon=True).start()
    link_conn: Connection | None = None
    link: Any = None
    sender: _LinkSender | None = None
    if job.workers > 1 and job.link_fd >= 0:
        if job.worker == 0:
            link_conn = Connection(job.link_fd, readable=False)
            link = sender = _LinkSender(link_conn.send_bytes, LINK_AHEAD)
        else:
            link_conn = Connection(job.link_fd, writable=False)
            link = _received(link_conn)
            try:
                os.nice(BUILDER_NICE)
            except OSError:
                pass
    try:
        if job.plugin_args is not None:
            from kwsniff.plugin_api.cli import plugin_session

            with plugin_session(job.plugin_args):
                decode(job, out.send, stop.is_set, link)
        else:
            decode(job, out.send, stop.is_set, link)
    except (BrokenPipeError, EOFError, OSError):
        pass          # the UI went away
    finally:
        if sender is not None:
            sender.close()          # what is queued goes out first
        for conn in (out, link_conn):
            try:
                if conn is not None:
                    conn.close()
            except OSError:
                pass


class _LinkSender:
    """The engine process's end of the link: ``sender(data)`` queues a batch for a
    thread that writes it with ``write`` (blocking only while more than ``limit`` bytes
    wait); raises BrokenPipeError once a write failed (the row builder is gone).
    :meth:`close` waits until every queued batch is written (or writing failed)."""

    def __init__(self, write: Callable[[bytes], Any], limit: int) -> None:
        import threading
        from collections import deque

        self._write = write
        self._limit = limit
        self._queue: deque[bytes] = deque()
        self._queued = 0
        self._failed = False
        self._closing = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="link-writer", daemon=True)
        self._thread.start()

    def __call__(self, data: bytes) -> None:
        with self._cond:
            while self._queued > self._limit and not self._failed:
                self._cond.wait()
            if self._failed:
                raise BrokenPipeError("the row builder process is gone")
            self._queue.append(data)
            self._queued += len(data)
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                data = self._queue[0]
            try:
                self._write(data)
            except OSError:          # (BrokenPipeError among them)
                with self._cond:
                    self._failed = True
                    self._queue.clear()
                    self._queued = 0
                    self._cond.notify_all()
                return
            with self._cond:
                self._queue.popleft()
                self._queued -= len(data)
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()


def _received(conn: Any) -> Iterator[bytes]:
    """The batches arriving over a link, until it ends (EOF: the engine process is gone)."""
    while True:
        try:
            yield conn.recv_bytes()
        except (EOFError, OSError):
            return


if __name__ == "__main__":
    child_main()
