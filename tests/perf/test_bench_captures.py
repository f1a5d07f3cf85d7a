"""The benchmark capture definitions (``benchmarks/captures.py``, ``benchmarks/capgen``):
every capture ``benchmarks/run.py`` runs has a scenario, limits and distinct ports; the
mixed scenario's records are deterministic and mixed; a capture outside its limits is
rejected. (Building a capture needs root and minutes: not done here.)"""

from __future__ import annotations

import json
import sys
from collections import Counter
from itertools import islice
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT / "tools", ROOT / "benchmarks"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

pytest.importorskip("confluent_kafka")

import captures  # noqa: E402
from capgen import apicaps, mixed  # noqa: E402


def test_three_captures_each_with_a_scenario_and_limits() -> None:
    assert captures.NAMES == ("bulk", "chatty", "mixed")
    assert set(captures.LIMITS) == set(captures.NAMES)
    ports = []
    for name in captures.NAMES:
        mod = captures.scenario(name)
        assert mod.NAME == name
        assert mod.DESCRIPTION and mod.PARAMS
        json.dumps(captures.wanted_identity(name))       # recorded in <name>.json
        ports += mod.PORTS
    assert len(ports) == len(set(ports)), "scenarios share broker ports"
    with pytest.raises(captures.CaptureBuildError):
        captures.scenario("nope")


def test_mixed_is_defined_as_the_issue_asks() -> None:
    lim = captures.LIMITS["mixed"]
    assert lim["min_bytes"] <= 150_000_000 <= lim["max_bytes"]
    assert lim["min_mb_per_s"] <= 2.5 <= lim["max_mb_per_s"]
    pr = mixed.PARAMS
    assert pr["messages"] >= lim["min_records"]
    # paced to about a minute of producing
    assert 45 <= pr["messages"] / pr["rate"] <= 90
    assert pr["loopback_mtu"] == mixed.LOOPBACK_MTU
    codecs = {conf["compression.type"] for _w, conf in mixed.PROFILES.values()}
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}


def test_mixed_records_are_deterministic_and_mixed() -> None:
    first = list(islice(mixed.records(3000, mixed.PARAMS["seed"]), 3000))
    again = list(islice(mixed.records(3000, mixed.PARAMS["seed"]), 3000))
    assert first == again
    other = list(islice(mixed.records(50, mixed.PARAMS["seed"] + 1), 50))
    assert other != first[:50]
    kinds = Counter(kind for _i, kind, _k, _v, _h in first)
    assert set(kinds) == set(mixed.PROFILES)
    total = sum(w for w, _c in mixed.PROFILES.values())
    for kind, (weight, _conf) in mixed.PROFILES.items():
        assert abs(kinds[kind] / len(first) - weight / total) < 0.04, kind
    sizes = {kind: [len(v) for _i, k, _key, v, _h in first if k == kind] for kind in kinds}
    assert max(sizes["metrics"]) < 200
    assert min(sizes["blobs"]) >= 8 * 1024
    assert any(h for *_rest, h in first) and any(h is None for *_rest, h in first)


def _facts(**over: object) -> dict:
    facts = {"tcpdump_dropped": 0, "tcpdump_captured": 60_000, "file_size": 150_000_000,
             "duration_s": 62.0, "records_produced": mixed.PARAMS["messages"]}
    facts.update(over)
    return facts


def test_mixed_limits_are_checked() -> None:
    captures._check("mixed", _facts())
    for bad, why in ((_facts(tcpdump_dropped=3), "dropped"),
                     (_facts(file_size=90_000_000, duration_s=40.0), "size"),
                     (_facts(duration_s=20.0), "MB/s"),
                     (_facts(duration_s=200.0), "MB/s"),
                     (_facts(records_produced=10), "records")):
        with pytest.raises(captures.CaptureBuildError, match=why):
            captures._check("mixed", bad)


def test_api_caps_stay_within_kafka_2_5() -> None:
    # Kafka 2.5's highest versions of the capped APIs (what tshark 4.0 decodes)
    kafka_2_5 = {0: 8, 1: 11, 2: 5, 3: 9, 8: 8, 22: 3}
    assert apicaps.KAFKA_2_5_MAX == kafka_2_5


def _exchange(index: int, status: str, request: list[int] | None,
              response: list[int] | None) -> dict:
    return {"index": index, "api_name": "Fetch", "api_version": 11, "status": status,
            "request_frames": request, "response_frames": response,
            "problems": ["something"]}


def test_agree_explains_kwsniff_problems_by_tshark_marks_only() -> None:
    import agree

    marked = {20}
    tshark_pairs = {(10, 20), (30, 40), (50, 60)}
    exchanges = [_exchange(1, "paired", [10, 10], [20, 20]),       # tshark marks it too
                 _exchange(2, "unanswered", [70, 70], None),       # cut off for both
                 _exchange(3, "paired", [30, 30], [40, 40]),       # tshark sees no fault
                 _exchange(4, "unanswered", [50, 50], None)]       # tshark has a response
    alone = agree.unexplained(exchanges, marked, tshark_pairs)
    assert [line.split()[1] for line in alone] == ["3", "4"]
