"""LiveDecoder: the file decoding path fed in live batches, released as exchanges complete."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_helpers import ROOT, api_versions_request, api_versions_response, tcp_packet

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka.model import NO_RESPONSE_EXPECTED, PAIRED, UNANSWERED, Exchange
from kwsniff.live_engine import LiveDecoder
from kwsniff.tcp import TcpOptions

PCAPS = sorted((ROOT / "pcaps").glob("*.pcap"))
CLIENT = ("10.9.8.7", 40000)
BROKER = ("10.9.8.1", 9092)


def _key(ex: Exchange) -> tuple:
    req, resp = ex.request, ex.response
    return (ex.stream, ex.status, ex.api_key, ex.api_version, ex.correlation_id,
            req.frame_first if req else None, resp.frame_last if resp else None,
            tuple(ex.all_problems()))


def _one_per_batch(path: Path) -> Iterator[list[tuple]]:
    with open_capture(str(path)) as src:
        for pkt in src:
            yield [pkt]


@pytest.mark.parametrize("pcap", PCAPS, ids=lambda p: p.name)
def test_same_exchanges_as_file_decoding(pcap: Path) -> None:
    with open_capture(str(pcap)) as src:
        engine = Engine(EngineOptions())
        expected = sorted(map(_key, engine.run(src)), key=repr)
    clock = {"now": 0.0}

    def batches() -> Iterator[list[tuple]]:
        for batch in _one_per_batch(pcap):
            clock["now"] = batch[0][1]          # wall clock follows capture time
            yield batch

    live = LiveDecoder(EngineOptions(), clock=lambda: clock["now"])
    got = list(live.run(batches()))
    assert sorted(map(_key, got), key=repr) == expected
    assert [ex.index for ex in got] == list(range(1, len(got) + 1))
    assert live.engine.summary.packets == engine.summary.packets
    assert live.engine.summary.exchanges_total == len(got)


def _live_lines(pcap: Path, lane: bool) -> list[str]:
    """Summary lines of ``pcap`` decoded live (one packet per batch), through the
    summary lane (the engine deferring bodies) or the full decoding."""
    import io

    from kwsniff.output.color import palette_for
    from kwsniff.output.pipeline import Selection, run_counters
    from kwsniff.output.skim import SummaryLane
    from kwsniff.output.summary import SummaryFormatter

    clock = {"now": 0.0}

    def batches() -> Iterator[list[tuple]]:
        for batch in _one_per_batch(pcap):
            clock["now"] = batch[0][1]
            yield batch

    live = LiveDecoder(EngineOptions(defer_bodies=lane), clock=lambda: clock["now"])
    selection = Selection()
    if lane:
        selection.lane = SummaryLane(live.engine.ctx.annotate_ctx, selection.names)
    fmt = SummaryFormatter(palette_for(io.StringIO(), "never"), "e")
    lines = [fmt.format(ex, facts) for ex, facts in selection(live.run(batches()))]
    if lane:
        assert selection.lane.tried == 0 or selection.lane.taken > 0
    # the end-of-capture counters too (`kwsniff live -q` prints only those, also
    # through the lane)
    counters = run_counters(live.engine.summary, (), selection.problems)
    return lines + [f"problems {selection.problems}", repr(sorted(counters.items())),
                    repr(sorted(live.engine.summary.exchanges.items()))]


@pytest.mark.parametrize("pcap", PCAPS, ids=lambda p: p.name)
def test_summary_lane_lines_are_the_full_ones(pcap: Path) -> None:
    """``kwsniff live`` prints summary lines (or, with -q, nothing) through the summary
    lane (no -o, -V, -x or filter): the same lines as the full decoding, in the same
    (completion) order, and the same end-of-capture counters."""
    from kwsniff.output.skim import SummaryLane
    if not SummaryLane.available():
        pytest.skip("the summary lane needs the field-decoder kernel")
    assert _live_lines(pcap, True) == _live_lines(pcap, False)


@pytest.mark.parametrize("pcap", PCAPS[:4] + [p for p in PCAPS if "consumer-group" in p.name],
                         ids=lambda p: p.name)
def test_exchanges_are_released_by_the_packet_that_completes_them(pcap: Path) -> None:
    current = {"frame": 0}
    released: list[tuple[Exchange, int]] = []

    def batches() -> Iterator[list[tuple]]:
        for batch in _one_per_batch(pcap):
            current["frame"] = batch[0][0]
            yield batch
        current["frame"] = -1                   # end of input

    live = LiveDecoder(EngineOptions(), clock=lambda: 0.0)
    for ex in live.run(batches()):
        released.append((ex, current["frame"]))
    completed = 0
    for ex, frame in released:
        if ex.status == PAIRED and ex.response is not None and not ex.response.inferred:
            assert frame == ex.response.frame_last, ex
            completed += 1
        elif ex.status == NO_RESPONSE_EXPECTED and ex.request is not None:
            assert frame in (ex.request.frame_last, -1)
    assert completed > 0


def _idle_conversation(correlation_id: int = 7) -> list[tuple]:
    """Handshake, one ApiVersions request; the broker acknowledges and stays silent."""
    t = 1_800_000_000.0
    req = api_versions_request(correlation_id)
    pkts = [tcp_packet(CLIENT, BROKER, 100, 0, "S"),
            tcp_packet(BROKER, CLIENT, 500, 101, "SA"),
            tcp_packet(CLIENT, BROKER, 101, 501, "A"),
            tcp_packet(CLIENT, BROKER, 101, 501, "PA", req),
            tcp_packet(BROKER, CLIENT, 501, 101 + len(req), "A")]
    return [(i + 1, t + i * 0.001, 1, data, len(data)) for i, data in enumerate(pkts)]


def test_idle_link_times_out_requests_by_wall_clock() -> None:
    packets = _idle_conversation()
    t0 = packets[-1][1]
    clock = {"now": t0}
    idle_batches = {"n": 0}

    def batches() -> Iterator[list[tuple]]:
        yield packets
        for _ in range(40):                    # 40 idle ticks of 0.25 s: 10 s, no packets
            clock["now"] += 0.25
            idle_batches["n"] += 1
            yield []
        raise AssertionError("the unanswered request was not released while idle")

    live = LiveDecoder(EngineOptions(ports=(9092,), timeout=2.0),
                       clock=lambda: clock["now"], sweep=0.5)
    gen = live.run(batches())
    ex = next(gen)
    assert ex.status == UNANSWERED and ex.correlation_id == 7
    assert ex.client == CLIENT and ex.broker == BROKER
    # released between 2 s and 2.5 s (+ one sweep period) of silence
    assert 2.0 <= idle_batches["n"] * 0.25 <= 3.0
    gen.close()


def test_answer_is_released_at_once_and_rest_at_the_end() -> None:
    packets = _idle_conversation(correlation_id=3)
    t = packets[-1][1]
    resp = api_versions_response(3)
    answer = tcp_packet(BROKER, CLIENT, 501, 101 + len(api_versions_request(3)), "PA", resp)
    second = api_versions_request(4)
    ask_again = tcp_packet(CLIENT, BROKER, 101 + len(api_versions_request(3)), 501 + len(resp),
                           "PA", second)
    later = [(6, t + 0.01, 1, answer, len(answer)), (7, t + 0.02, 1, ask_again, len(ask_again))]
    seen_at: list[tuple[int, str]] = []
    fed = {"n": 0}

    def batches() -> Iterator[list[tuple]]:
        yield packets
        for pkt in later:
            fed["n"] += 1
            yield [pkt]

    live = LiveDecoder(EngineOptions(ports=(9092,), timeout=300.0), clock=lambda: t)
    for ex in live.run(batches()):
        seen_at.append((fed["n"], ex.status))
    # the answer completes exchange 1 as soon as it is fed; the second request is still
    # waiting when the input ends and is reported then, as a file's end would
    assert seen_at == [(1, PAIRED), (2, UNANSWERED)]
    assert live.engine.summary.exchanges == {**live.engine.summary.exchanges,
                                             PAIRED: 1, UNANSWERED: 1}


def test_memory_stays_flat_over_many_connections() -> None:
    """Thousands of short Kafka connections: memory is bounded by the engine's limits.

    Once the (here small) limits on remembered connections are reached, nothing else
    accumulates: the live driver keeps no exchange.
    """

    def conversation(n: int, t: float) -> list[tuple]:
        client = ("10.9.8.7", 10000 + n % 50000)
        req = api_versions_request(1)
        resp = api_versions_response(1)
        pkts = [tcp_packet(client, BROKER, 100, 0, "S"),
                tcp_packet(BROKER, client, 500, 101, "SA"),
                tcp_packet(client, BROKER, 101, 501, "PA", req),
                tcp_packet(BROKER, client, 501, 101 + len(req), "PA", resp),
                tcp_packet(client, BROKER, 101 + len(req), 501 + len(resp), "FA"),
                tcp_packet(BROKER, client, 501 + len(resp), 102 + len(req), "FA"),
                tcp_packet(client, BROKER, 102 + len(req), 502 + len(resp), "A")]
        return [(0, t + i * 1e-4, 1, d, len(d)) for i, d in enumerate(pkts)]

    clock = {"now": 1_800_000_000.0}
    sizes: list[int] = []

    def batches(total: int) -> Iterator[list[tuple]]:
        for n in range(total):
            clock["now"] += 0.01
            yield conversation(n, clock["now"])
            if n in (800, 2400):
                sizes.append(tracemalloc.get_traced_memory()[0])

    opts = EngineOptions(ports=(9092,), max_connection_summaries=200,
                         tcp=TcpOptions(max_connections=200))
    live = LiveDecoder(opts, clock=lambda: clock["now"])
    tracemalloc.start()
    try:
        count = sum(1 for _ in live.run(batches(2401)))
    finally:
        tracemalloc.stop()
    assert count == 2401
    assert live.engine.summary.exchanges[PAIRED] == 2401
    growth = sizes[1] - sizes[0]
    assert growth < 300_000, f"memory grew by {growth} bytes over 1600 connections"


@pytest.mark.parametrize("options", [["-V"], ["-V", "-x"], ["-V", "--full-values"]],
                         ids=" ".join)
def test_live_prints_verbose_trees_as_decode_does(options: list[str]) -> None:
    """``kwsniff live -V`` (and ``-x``) prints each exchange as ``kwsniff decode`` does:
    the printer of live gives, for the exchanges of a capture in capture order, exactly
    the output of ``kwsniff decode`` with the same options."""
    import io
    import subprocess
    import sys

    from kwsniff.cli import build_parser
    from kwsniff.commands.live import ExchangePrinter

    pcap = next(p for p in PCAPS if "consumer-group" in p.name)
    args = build_parser("live").parse_args(["live", "-i", "lo", "--color", "never",
                                            *options])
    out = io.StringIO()
    printer = ExchangePrinter(out, args)
    with open_capture(str(pcap)) as src:
        for ex in Engine(EngineOptions()).run(src):
            printer.emit(ex, None)
    decoded = subprocess.run([sys.executable, "-m", "kwsniff", "decode", "-j", "1",
                              "--color", "never", *options, str(pcap)],
                             capture_output=True, text=True, check=True).stdout
    assert out.getvalue() == decoded
    assert decoded.count("\nExchange ") > 50
