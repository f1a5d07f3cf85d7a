"""The decoding side of the TUI: runs the engine and sends rows (in a child process).

Contract:

* :func:`decode` runs the one engine path over a :class:`Job` (a capture file, or a
  live interface through :class:`~kwsniff.live_engine.LiveDecoder`) and reports through
  ``send(message)``; it returns when the input ends or ``stopped()`` turns true, and
  never raises (errors end the run with an ``error`` in the final message).
* Messages (tuples, first item the kind):

  * ``("rows", [row tuple, ...])`` — :class:`~kwsniff.tui.rowbuild.RowBuilder` rows, in
    order; their exchanges are in the spill files before the message is sent; a worker
    of a split run (below) sends ``("rows", rows, row_ids)``: the store row id of each;
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

* A capture file can be decoded by two processes (``Job.workers == 2``), with results
  identical to one (``tests/tui/test_tui_split.py``), as ``decode -j 2`` does
  (:mod:`kwsniff.commands.parallel`): both run the whole engine (the same exchanges in
  the same order, the same counters), which defers the bodies it does not read itself;
  row id ``r`` (the ``r``-th exchange, 0-based) belongs to worker
  ``owner(r // SPLIT_BLOCK, 2)``, which completes its bodies
  (:func:`kwsniff.kafka.decoding.complete`) and makes its row and spill record (its own
  spill files, :func:`~kwsniff.tui.store.spill_path` with the worker number). Worker 0
  also completes every other exchange and keeps the statistics, the problem count, the
  progress and the counters of the whole run (so they are made as in one process); it
  renders only one block in :data:`SHARE`. Of the exchanges it does not own, worker 1
  walks the facts only of messages that can teach topic names, so its names are those
  of one process. Worker 1 sends only rows, names and a last ``("done", None, error,
  [], [])``. The loader merges the rows of both in row-id order.
* :func:`child_main` is the entry point of the decoder process
  (``python -m kwsniff.tui.decoder``, started by :class:`~kwsniff.tui.loader.Loader`):
  it sets the streaming GC thresholds (:mod:`kwsniff.gc_policy`), reads the job from
  standard input, loads the session's plugins, then runs :func:`decode` sending over
  standard output until stopped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kwsniff import gc_policy
from kwsniff.output.facts import ExchangeFacts, TopicNames, learn_names, teaches
from kwsniff.output.pipeline import run_counters
from kwsniff.output.stats import StatsCollector
from kwsniff.tui.rowbuild import RowBuilder

PUBLISH_SECONDS = 0.1
STATS_SECONDS = 2.0
MAX_BATCH = 5000
#: rows per block of a split run (a block belongs to one worker)
SPLIT_BLOCK = 256
#: in a split run worker 0 (which also completes every exchange for the statistics)
#: renders one block in SHARE, worker 1 the others
SHARE = 4
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
    worker: int = 0                          # this process's number in a split run
    workers: int = 1                         # 1, or 2 for a split run (files only)


def owner(block: int, workers: int) -> int:
    """The worker that renders the rows of ``block`` (see the module contract)."""
    if workers <= 1:
        return 0
    return 0 if block % SHARE == 0 else 1


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
        self.builder = RowBuilder(job.spill_dir, worker=job.worker)
        self.names = _LearningNames()
        self.stats = StatsCollector()
        self.engine: Any = None
        self.packets = 0
        self.fraction: float | None = None
        self.batch: list[tuple[Any, ...]] = []
        self.row_ids: list[int] = []         # split run: the row id of each batch row
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
        if self.batch:
            self.builder.flush()
            batch, self.batch = self.batch, []
            if self.job.workers > 1:
                ids, self.row_ids = self.row_ids, []
                self.send(("rows", batch, ids))
            else:
                self.send(("rows", batch))
        fresh = self.names.take()
        if fresh:
            self.send(("names", fresh))
        if self.job.worker:
            return                  # (worker 0 reports the run)
        first_ts = self.engine.summary.first_ts if self.engine is not None else None
        self.send(("progress", self.packets, self.fraction, first_ts))
        if self.live is not None:
            st = self.live.stats()
            self.send(("capture", st.packets, st.dropped, st.if_dropped))
        if force or now >= self._next_stats:
            self._next_stats = now + STATS_SECONDS
            self.send(("stats", self.stats.report()))
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
            if ex.problems or (ex.request is not None and ex.request.problems) or \
                    (ex.response is not None and ex.response.problems):
                self.exchange_problems += len(ex.all_problems())
            stats_add(facts)
            if len(self.batch) >= MAX_BATCH or time.monotonic() >= self._next_publish:
                self.publish()
            if stopped():
                break

    def consume_split(self, exchanges: Iterable[Any]) -> None:
        """:meth:`consume` for one worker of a split run (see the module contract)."""
        from kwsniff.kafka.decoding import complete

        job = self.job
        worker, workers = job.worker, job.workers
        keeper = worker == 0
        names = self.names
        builder = self.builder
        stats_add = self.stats.add
        stopped = self.stopped
        context = self.engine.ctx.annotate_ctx
        rid = -1
        block, mine = -1, False
        for ex in exchanges:
            rid += 1
            if rid // SPLIT_BLOCK != block:
                block = rid // SPLIT_BLOCK
                mine = owner(block, workers) == worker
            if mine or keeper:
                complete(ex, context)
                facts = ExchangeFacts(ex, names)
                if mine:
                    self.batch.append(builder.row(ex, facts, rid))
                    self.row_ids.append(rid)
                if keeper:
                    if ex.problems or (ex.request is not None and ex.request.problems) or \
                            (ex.response is not None and ex.response.problems):
                        self.exchange_problems += len(ex.all_problems())
                    stats_add(facts)
                if not mine and (teaches(ex.request) or teaches(ex.response)):
                    facts.response_side   # noqa: B018 - walks both, learning names
            else:
                learn_names(ex, names)
            if len(self.batch) >= MAX_BATCH or time.monotonic() >= self._next_publish:
                self.publish()
            if stopped():
                break

    # ------------------------------------------------------------------ sources
    def run_file(self, path: str) -> None:
        from kwsniff.capture import open_capture
        from kwsniff.engine import Engine

        options = self.job.options
        if self.job.workers > 1:
            import copy

            from kwsniff.engine import EngineOptions
            options = copy.copy(options) if options is not None else EngineOptions()
            options.defer_bodies = True
        self.engine = Engine(options)
        with open_capture(path) as source:
            size = 0
            if not source.compression:
                try:
                    size = os.path.getsize(path)
                except OSError:
                    size = 0
            self.fraction = 0.0 if size else None
            overhead = _RECORD_OVERHEAD.get(source.format, 16)
            consume = self.consume_split if self.job.workers > 1 else self.consume
            try:
                consume(self.engine.run(self._measured(source, size, overhead)))
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
        self.builder.close()
        if self.job.worker:
            self.send(("done", None, self.error, [], []))
            return
        self.send(("done", self.counters(), self.error, self.capture_problems,
                   self.connections()))


def decode(job: Job, send: Send, stopped: Callable[[], bool]) -> None:
    """Decode ``job``, reporting through ``send`` (see the module contract)."""
    from kwsniff.errors import UserError

    run = _Run(job, send, stopped)
    try:
        if job.path is not None:
            run.run_file(job.path)
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
    try:
        if job.plugin_args is not None:
            from kwsniff.plugin_api.cli import plugin_session

            with plugin_session(job.plugin_args):
                decode(job, out.send, stop.is_set)
        else:
            decode(job, out.send, stop.is_set)
    except (BrokenPipeError, EOFError, OSError):
        pass          # the UI went away
    finally:
        try:
            out.close()
        except OSError:
            pass


if __name__ == "__main__":
    child_main()
