"""Decoding leaves no reference cycles behind per exchange.

The streaming commands run the cyclic GC rarely (``kwsniff.cli.gc_thresholds``): that is only
safe, and only fast, while every exchange, its record sets, batches, records and output
are freed by reference counting. These tests count what the collector finds after runs
over N and 2N exchanges: a cycle per exchange (such as a record set and its batches
pointing at each other, or a recursive closure per rendered tree) makes the count grow
with N.
"""

from __future__ import annotations

import gc
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuzz import wire
from kwsniff import cli, gc_policy

CODEC_GZIP = 1


def _records(i: int) -> tuple[bytes, bytes]:
    recs = [wire.v2_record(j, b"k%d" % j, b"value %d of %d" % (j, i), [(b"h", b"v")])
            for j in range(3)]
    gz = zlib.compressobj(wbits=31)
    packed = gz.compress(b"".join(recs)) + gz.flush()
    return (wire.v2_batch(recs, base_offset=i * 3),
            wire.v2_batch(recs, base_offset=i * 3, attributes=CODEC_GZIP, payload=packed,
                          count=3))


def _capture(tmp_path: Path, n: int) -> Path:
    pairs: list[tuple[bool, bytes]] = []
    corr = 0
    for i in range(n):
        plain, packed = _records(i)
        for req, resp in ((wire.produce_request(corr + 1, plain + packed),
                           wire.produce_response(corr + 1)),
                          (wire.fetch_request(corr + 2), wire.fetch_response(corr + 2, packed)),
                          (wire.metadata_request(corr + 3), wire.metadata_response(corr + 3))):
            pairs += [(False, req), (True, resp)]
        corr += 3
    path = tmp_path / f"cycles-{n}.pcap"
    path.write_bytes(wire.pcap_bytes(wire.conversation(pairs)))
    return path


def _free_garbage() -> None:
    """Free what DEBUG_SAVEALL kept (cleared while saving, it would be found again)."""
    flags = gc.get_debug()
    gc.set_debug(0)
    gc.garbage.clear()
    gc.collect()
    gc.set_debug(flags)


@pytest.fixture
def saved_garbage() -> Iterator[None]:
    gc.collect()
    flags = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield
    finally:
        gc.set_debug(flags)
        _free_garbage()


def _garbage_of(argv: list[str]) -> int:
    """Objects in reference cycles that ``kwsniff ARGV`` left behind."""
    _free_garbage()
    assert cli.main(argv) == 0
    gc.collect()
    return len(gc.garbage)


@pytest.mark.parametrize("args", [
    ["decode"], ["decode", "-V"], ["decode", "-x"], ["decode", "-V", "-x", "--offsets"],
    ["export", "--records", "-o", "-"], ["stats"],
], ids=" ".join)
def test_no_cycles_per_exchange(tmp_path: Path, saved_garbage: None, args: list[str],
                                capsys: pytest.CaptureFixture[str]) -> None:
    small, large = _capture(tmp_path, 40), _capture(tmp_path, 80)
    jobs = ["-j", "1"] if args[0] in ("decode", "export") else []
    _garbage_of([*args, *jobs, str(small)])                  # imports, caches
    g1 = _garbage_of([*args, *jobs, str(small)])
    g2 = _garbage_of([*args, *jobs, str(large)])
    out = capsys.readouterr()
    assert "120 exchanges" in out.err or args[0] != "decode"
    # 120 more exchanges (40 x produce, fetch, metadata): less than one object in 10
    assert g2 - g1 < 12, f"cyclic garbage grows with the capture: {g1} -> {g2} objects"


def _many_connections(tmp_path: Path, n: int) -> Path:
    """``n`` short connections (one Metadata exchange each), one after the other."""
    packets: list[tuple[float, bytes]] = []
    for i in range(n):
        conn = wire.Connection(client=("10.0.0.1", 20000 + i), t0=wire.T0 + i)
        conn.handshake()
        conn.send(False, wire.metadata_request(1))
        conn.send(True, wire.metadata_response(1))
        conn.close()
        packets += conn.packets
    path = tmp_path / f"connections-{n}.pcap"
    path.write_bytes(wire.pcap_bytes(packets))
    return path


@pytest.mark.parametrize("args", [["decode", "-j", "1"], ["export", "-j", "1", "-o", "-"]],
                         ids=" ".join)
def test_no_cycles_per_connection(tmp_path: Path, saved_garbage: None, args: list[str],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A closed connection's conversation is freed by reference counting (its framers
    call back into it: the engine detaches them when it retires the conversation)."""
    small, large = _many_connections(tmp_path, 30), _many_connections(tmp_path, 60)
    _garbage_of([*args, str(small)])
    g1 = _garbage_of([*args, str(small)])
    g2 = _garbage_of([*args, str(large)])
    capsys.readouterr()
    assert g2 - g1 < 10, f"cyclic garbage grows with the connections: {g1} -> {g2} objects"


def test_streaming_commands_collect_less_often_and_restore() -> None:
    before = gc.get_threshold()
    try:
        with cli.gc_thresholds("decode"):
            assert gc.get_threshold()[0] == gc_policy.GC_YOUNG
            assert gc.get_threshold()[1:] == before[1:]
        assert gc.get_threshold() == before
        with cli.gc_thresholds("tui"):
            assert gc.get_threshold() == before
    finally:
        gc.set_threshold(*before)


def test_main_restores_the_thresholds(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_threshold()
    assert cli.main(["decode", str(_capture(tmp_path, 2))]) == 0
    assert gc.get_threshold() == before
    assert "6 exchanges" in capsys.readouterr().err


def test_gc_policy_block_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    with gc_policy.streaming():
        assert gc.get_threshold() == (gc_policy.GC_YOUNG, *before[1:])
    assert gc.get_threshold() == before


def test_spark_partition_decoding_streams_with_the_streaming_thresholds() -> None:
    pytest.importorskip("pyspark")
    from kwsniff.engine import EngineOptions
    from kwsniff.spark.connection_decoder import decode_sorted

    before = gc.get_threshold()
    seen: list[tuple[int, ...]] = []

    def items():   # an empty partition that notes the thresholds while it is read
        seen.append(gc.get_threshold())
        return
        yield

    assert list(decode_sorted(items(), EngineOptions(), None)) == []
    assert seen == [(gc_policy.GC_YOUNG, *before[1:])]
    assert gc.get_threshold() == before
