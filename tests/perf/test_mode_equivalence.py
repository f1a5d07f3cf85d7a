"""Summary, -V and export agree on every capture (lazy decoding changes nothing).

The summary counts records from batch headers and never decodes record bodies; -V and
``export --records`` decode every record. Whatever each mode skips, all three must
report the same exchanges (number, route, API and version, correlation id), the same
statuses, the same problem counts and run counters, and the records the detail modes
decode must be the records the headers announce.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.perf.modes import ModeFacts, mode_facts

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "pcaps").glob("*.pcap"))
BENCH_DATA = ROOT / "benchmarks" / "data"


def assert_equivalent(modes: dict[str, ModeFacts]) -> None:
    summary, tree, export = modes["summary"], modes["tree"], modes["export"]
    # the run counters (exchanges, connections, packets, problems, skipped and lost bytes)
    assert summary.run_line == tree.run_line == export.run_line
    assert list(summary.exchanges) == list(tree.exchanges) == list(export.exchanges)
    assert list(summary.exchanges) == list(range(1, len(summary.exchanges) + 1))
    for index, s in summary.exchanges.items():
        t, e = tree.exchanges[index], export.exchanges[index]
        where = f"exchange {index}"
        assert (s.client, s.broker) == (t.client, t.broker) == (e.client, e.broker), where
        assert t.api == e.api and s.api.endswith(" " + e.api), where
        assert s.correlation_id == t.correlation_id == e.correlation_id, where
        assert t.status == e.status, where
        assert s.paired == (e.status == "paired"), where
        assert s.problems == e.problems, where
        # records decoded by -V and by export --records: the same ones
        assert t.records == e.records, where


def assert_records_match_headers(modes: dict[str, ModeFacts]) -> None:
    """Records decoded == records announced by batch headers (captures without damage)."""
    for index, e in modes["export"].exchanges.items():
        assert e.records == e.header_records, f"exchange {index}"


@pytest.mark.parametrize("capture", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_modes_agree_on_sample_captures(capture: Path) -> None:
    modes = mode_facts(capture)
    assert modes["summary"].exchanges, "the capture holds Kafka exchanges"
    assert_equivalent(modes)


@pytest.mark.parametrize("name", ["rdkafka-produce-codecs", "rdkafka-consumer-group",
                                  "rdkafka-idempotent-txn"])
def test_decoded_records_match_batch_headers(name: str) -> None:
    modes = mode_facts(ROOT / "pcaps" / f"{name}.pcap")
    assert sum(e.records or 0 for e in modes["export"].exchanges.values()) > 0
    assert_records_match_headers(modes)


def _prefix(src: Path, packets: int, dst: Path) -> Path:
    """The first ``packets`` packets of ``src`` as a pcap file."""
    from kwsniff.capture import open_capture
    from kwsniff.capture.writer import PcapWriter

    with open_capture(str(src)) as source, open(dst, "wb") as fh:
        writer = None
        for frame, ts, linktype, data, orig_len in source:
            if writer is None:
                writer = PcapWriter(fh, linktype)
            writer.write(ts, data, orig_len)
            if frame >= packets:
                break
    return dst


@pytest.mark.slow
@pytest.mark.parametrize("name,ports,packets", [
    ("bulk", (29092, 29093, 29094), 30_000),
    ("chatty", (39092, 39093, 39094), 60_000),
    ("mixed", (49092, 49093, 49094), 40_000),
])
def test_modes_agree_on_benchmark_captures(tmp_path: Path, name: str,
                                           ports: tuple[int, ...], packets: int) -> None:
    """The benchmark captures (``benchmarks/captures.py``; skipped when not built)."""
    src = BENCH_DATA / f"{name}.pcap"
    if not src.exists():
        pytest.skip(f"{src} not built (run benchmarks/captures.py)")
    capture = _prefix(src, packets, tmp_path / f"{name}-prefix.pcap")
    modes = mode_facts(capture, [a for p in ports for a in ("-p", str(p))])
    assert len(modes["summary"].exchanges) > 500
    assert_equivalent(modes)
    assert_records_match_headers(modes)
