"""A capture file decoded by two TUI decoder processes gives the store, statistics,
counters and spilled exchanges of one process (the two-process pipeline of
kwsniff.tui.decoder: the engine process hands every exchange's record to the row
builder).

Both workers run here in this process, one after the other (the link a list of
batches; small batches, so that every capture has several); their messages are then
applied interleaved (worker 1 first, in uneven steps), as the loader must cope with
any order of arrival.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from tui_common import ALL_PCAPS, PCAPS, load_in_process

from kwsniff.output.jsonl import ExportEncoder, dumps
from kwsniff.output.tree import build_tree, render_tree
from kwsniff.tui import decoder as decoder_mod
from kwsniff.tui.decoder import decode, unpack_batch
from kwsniff.tui.loader import Loader, split_workers
from kwsniff.tui.store import ExchangeStore


def _split_load(path: Path, tmp: Path) -> Loader:
    loader = Loader(path=str(path), spill_dir=str(tmp), workers=2)
    assert loader.workers == 2
    streams: list[list[tuple[Any, ...]]] = []
    batches: list[bytes] = []
    for worker, link in ((0, batches.append), (1, iter(batches))):
        job = dataclasses.replace(loader.job, worker=worker)
        sent: list[tuple[Any, ...]] = []
        decode(job, sent.append, lambda: False, link)
        streams.append(sent)
    assert batches[-1] == b"" and b"" not in batches[:-1]      # the end of the run
    sizes = [len(unpack_batch(b)[0]) for b in batches[:-1]]
    assert max(sizes, default=0) <= decoder_mod.LINK_BATCH
    assert len(sizes) >= min(2, sum(sizes))
    assert not any(m[0] == "rows" for m in streams[0])       # rows come from worker 1
    # worker 1 first, then alternating 3 messages of worker 0 with 1 of worker 1
    order: list[tuple[int, tuple[Any, ...]]] = [(1, m) for m in streams[1][:1]]
    rest0, rest1 = list(streams[0]), list(streams[1][1:])
    while rest0 or rest1:
        order += [(0, m) for m in rest0[:3]] + [(1, m) for m in rest1[:1]]
        del rest0[:3], rest1[:1]
    for worker, message in order:
        assert not loader.done
        loader.apply(message, worker)
    assert loader.done
    return loader


def _columns(store: ExchangeStore) -> list[tuple[Any, ...]]:
    out = []
    for row in range(store.count):
        loc = store.locate(row)
        assert loc is not None
        seg, i = loc
        out.append((seg.ts[i], store.latency_of(row), seg.stream[i], seg.api_key[i],
                    seg.api_version[i], seg.corr[i], seg.status[i],
                    store.protocols[seg.protocol[i]], store.client_ids[seg.client_id[i]],
                    store.routes[seg.route[i]], store.facts_table[seg.facts[i]],
                    seg.req_bytes[i], seg.resp_bytes[i], seg.records[i], seg.problems[i],
                    seg.index[i], tuple(seg.frames[4 * i:4 * i + 4]),
                    store.digest_text(row)))
    return out


def _shown(store: ExchangeStore) -> list[tuple[object, ...]]:
    """The -V tree (with offsets) and the export line of every spilled exchange."""
    encoder = ExportEncoder("x", records=True, names=store.names)
    out = []
    for row in range(store.count):
        ex = store.exchange(row)
        assert ex is not None, row
        out.append((list(render_tree(build_tree(ex, spans=True), offsets=True)),
                    dumps(encoder.exchange_object(ex))))
    return out


@pytest.mark.parametrize("path", ALL_PCAPS, ids=[p.name for p in ALL_PCAPS])
def test_two_workers_give_what_one_gives(path: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decoder_mod, "LINK_BATCH", 3)
    one = load_in_process(path, spill_dir=str(tmp_path))
    two = _split_load(path, tmp_path)
    try:
        assert two.store.count == one.store.count
        assert _columns(two.store) == _columns(one.store)
        assert two.report == one.report
        assert two.counters == one.counters
        assert two.error == one.error and two.capture_problems == one.capture_problems
        assert {k: dataclasses.astuple(v) for k, v in two.store.connections.items()} == \
            {k: dataclasses.astuple(v) for k, v in one.store.connections.items()}
        assert dict(two.store.names._names) == dict(one.store.names._names)
        assert _shown(two.store) == _shown(one.store)
    finally:
        one.close()
        two.close()


def test_which_captures_are_split(tmp_path: Path) -> None:
    """Two processes only when asked (``workers=2``), for an uncompressed capture file
    without plugins, on a machine with two usable CPUs."""
    import gzip
    import os

    small = ALL_PCAPS[0]
    two_cpus = len(os.sched_getaffinity(0)) >= 2
    assert split_workers(str(small)) == (2 if two_cpus else 1)
    assert split_workers(str(small), plugin_args=object()) == 1
    assert split_workers(None) == 1
    packed = tmp_path / "small.pcap.gz"
    packed.write_bytes(gzip.compress(small.read_bytes()))
    assert split_workers(str(packed)) == 1
    spill = tmp_path / "spill"
    spill.mkdir()
    assert Loader(path=str(small), spill_dir=str(spill)).workers == 1      # the default
    assert Loader(interface="lo", spill_dir=str(spill), workers=2).workers == 1


def test_two_real_decoder_processes(tmp_path: Path) -> None:
    """Loader.run with two decoder processes: the same rows, report and counters as
    with one; closing removes every spill file. (567 exchanges: two link batches.)"""
    path = PCAPS / "insights-groups.pcap"
    loaders = []
    for workers in (1, 2):
        loader = Loader(path=str(path), spill_dir=str(tmp_path), workers=workers)
        loader.run()
        assert loader.done and loader.error is None
        loaders.append(loader)
    one, two = loaders
    try:
        assert len(two._processes) == 2
        assert two.store.count == one.store.count > decoder_mod.LINK_BATCH
        assert _columns(two.store) == _columns(one.store)
        assert two.report == one.report and two.counters == one.counters
        assert _shown(two.store) == _shown(one.store)
    finally:
        for loader in loaders:
            loader.close()
    assert not list(tmp_path.iterdir())


def test_stopping_two_decoder_processes(tmp_path: Path) -> None:
    loader = Loader(path=str(ALL_PCAPS[0]), spill_dir=str(tmp_path), workers=2)
    loader.stop()                     # before they start: both stop at once
    loader.run()
    assert loader.done
    loader.close()
    assert all(p.poll() is not None for p in loader._processes)
    assert not list(tmp_path.iterdir())


def test_message_state_follows_the_field_order() -> None:
    """``KafkaMessage.state()`` (what a spill record keeps of a message) lists every
    field in ``_MESSAGE_FIELDS`` order, so ``KafkaMessage(*state)`` is the same message."""
    from kwsniff.kafka.model import _MESSAGE_FIELDS, KafkaMessage

    values = {name: f"v{i}" for i, name in enumerate(_MESSAGE_FIELDS)}
    values["problems"] = ["p"]
    msg = KafkaMessage(**values)
    assert msg.state() == [values[name] for name in _MESSAGE_FIELDS]
    again = KafkaMessage(*msg.state())
    assert [getattr(again, n) for n in _MESSAGE_FIELDS] == msg.state()


def test_an_exchange_that_cannot_be_pickled_is_handed_on_with_a_problem(
        tmp_path: Path) -> None:
    """The engine process hands on a record of the addresses, status and problems of an
    exchange it cannot pickle, with one problem more that says so; its row is made."""
    from kwsniff.kafka.model import Exchange, KafkaMessage
    from kwsniff.tui.spill import pack, rebuild

    msg = KafkaMessage("request", b"\x00\x12\x00\x03", api_key=18, api_version=3,
                       body={"odd": lambda: None}, problems=["first"])
    ex = Exchange(7, 3, ("10.0.0.1", 5000), ("10.0.0.2", 9092), "unanswered", msg)
    assert pack(ex)[0] == b""                     # (one process spills it as unavailable)
    back = rebuild(decoder_mod._unshipped(ex))
    assert back is not None and back.request is None and back.response is None
    assert (back.index, back.stream, back.client, back.broker, back.status) == \
        (7, 3, ("10.0.0.1", 5000), ("10.0.0.2", 9092), "unanswered")
    assert back.problems == ["request: first", decoder_mod.UNSHIPPED]


def test_the_row_builder_reports_an_engine_that_ended_early(tmp_path: Path) -> None:
    """A link that ends without the end of the run (the engine process died): the rows
    it brought are kept and the run ends with an error."""
    path = PCAPS / "insights-groups.pcap"
    loader = Loader(path=str(path), spill_dir=str(tmp_path), workers=2)
    batches: list[bytes] = []
    decode(dataclasses.replace(loader.job, worker=0), lambda m: None, lambda: False,
           batches.append)
    assert len(batches) > 2
    sent: list[tuple[Any, ...]] = []
    decode(dataclasses.replace(loader.job, worker=1), sent.append, lambda: False,
           iter(batches[:1]))
    rows = sum(len(m[1]) for m in sent if m[0] == "rows")
    assert rows == len(unpack_batch(batches[0])[0])
    assert sent[-1] == ("done", None,
                        "the engine process ended before the end of the capture", [], [])
    loader.close()


def test_how_many_decoder_processes_the_command_asks_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kwsniff tui -j``: 1 or 2 as given; auto (the default) two for a capture of
    64 MB or more when two CPUs are idle at the start, else one."""
    import argparse

    from kwsniff.commands import parallel
    from kwsniff.commands import tui as tui_cmd

    parser = argparse.ArgumentParser()
    tui_cmd.add_arguments(parser)
    assert parser.parse_args(["x.pcap"]).jobs is None
    assert parser.parse_args(["x.pcap", "-j", "auto"]).jobs is None
    assert parser.parse_args(["x.pcap", "-j", "2"]).jobs == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["x.pcap", "-j", "3"])

    small = ALL_PCAPS[0]
    big = tmp_path / "big.pcap"
    with open(big, "wb") as fh:
        fh.truncate(parallel.SUMMARY_MIN_BYTES)
    monkeypatch.setattr(parallel, "_usable_cpus", lambda: 2)
    monkeypatch.setattr(parallel, "_idle_cpus", lambda: 1.9)
    assert tui_cmd.decoder_processes(1, str(big)) == 1
    assert tui_cmd.decoder_processes(2, str(small)) == 2
    assert tui_cmd.decoder_processes(None, str(big)) == 2
    assert tui_cmd.decoder_processes(None, str(small)) == 1
    assert tui_cmd.decoder_processes(None, str(tmp_path / "missing.pcap")) == 1
    monkeypatch.setattr(parallel, "_idle_cpus", lambda: 1.2)        # one core busy
    assert tui_cmd.decoder_processes(None, str(big)) == 1


def test_an_engine_error_is_reported_once_with_the_rows_before_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error in the engine process of a two-process run: the link still ends (the row
    builder shows the rows made before it, without an error of its own) and the engine
    process's last message carries the error."""
    path = PCAPS / "insights-groups.pcap"
    loader = Loader(path=str(path), spill_dir=str(tmp_path), workers=2)
    real = decoder_mod._Run._measured

    def failing(self: Any, source: Any, size: int, overhead: int) -> Any:
        for n, pkt in enumerate(real(self, source, size, overhead)):
            if n == 600:
                raise RuntimeError("boom")
            yield pkt

    monkeypatch.setattr(decoder_mod._Run, "_measured", failing)
    batches: list[bytes] = []
    sent0: list[tuple[Any, ...]] = []
    decode(dataclasses.replace(loader.job, worker=0), sent0.append, lambda: False,
           batches.append)
    assert batches[-1] == b""
    assert sent0[-1][0] == "done" and "boom" in sent0[-1][2]
    sent1: list[tuple[Any, ...]] = []
    decode(dataclasses.replace(loader.job, worker=1), sent1.append, lambda: False,
           iter(batches))
    shipped = sum(len(unpack_batch(b)[0]) for b in batches[:-1])
    assert shipped > 0
    assert sum(len(m[1]) for m in sent1 if m[0] == "rows") == shipped
    assert sent1[-1] == ("done", None, None, [], [])
    loader.close()


def test_the_engine_process_writes_the_link_from_a_thread() -> None:
    """The link sender queues batches for its writer thread in order, waits while more
    than its limit is queued, turns a failed write into BrokenPipeError for the engine
    loop (which then stops) and, closing, writes what is queued first."""
    import threading

    written: list[bytes] = []
    gate = threading.Event()

    def write(data: bytes) -> None:
        gate.wait(10)
        written.append(data)

    sender = decoder_mod._LinkSender(write, limit=10)
    sender(b"a" * 8)
    sender(b"b" * 8)                       # 16 queued: over the limit, but accepted
    blocked = threading.Thread(target=sender, args=(b"c" * 8,))
    blocked.start()
    blocked.join(0.3)
    assert blocked.is_alive()              # waits for the writer
    gate.set()
    blocked.join(10)
    sender.close()
    assert written == [b"a" * 8, b"b" * 8, b"c" * 8]

    def broken(data: bytes) -> None:
        raise BrokenPipeError

    failing = decoder_mod._LinkSender(broken, limit=1 << 20)
    failing(b"x")
    failing._thread.join(10)
    with pytest.raises(BrokenPipeError):
        failing(b"y")
    failing.close()
