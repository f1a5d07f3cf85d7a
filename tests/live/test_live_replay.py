"""`kwsniff live` on a veth pair fed by tcpreplay: every exchange of the file, no drop.

Slow (opt-in): a real capture replayed at a low rate through
``tests/live/bench_live_replay.py`` (its own network namespace, deleted afterwards).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest
from live_helpers import ROOT

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_live_replay as replay

PCAP = ROOT / "pcaps" / "rdkafka-consumer-group.pcap"   # 3-broker mock cluster, 530 packets
PORTS = [19092, 19093, 19094]


@pytest.mark.slow
@pytest.mark.parametrize("live_args", [[], ["-o", "-"]], ids=["quiet-lane", "export"])
def test_low_rate_replay_decodes_every_exchange(live_args: list[str]) -> None:
    why = replay.missing_requirements()
    if why:
        pytest.skip(f"cannot replay here: {why}")
    with tempfile.TemporaryDirectory() as tmp:
        pcap = Path(tmp) / "slice.pcap"
        assert replay.slice_pcap(PCAP, pcap, 0) == 530
        reference = replay.file_reference(pcap, PORTS)
        result = replay.replay_once(pcap, PORTS, "2000", live_args, f"kwstest-{id(tmp)}")
    assert reference["exchanges"] == 109 and reference["unanswered"] == 8
    assert result["sent"] == 530
    assert result["kernel_drops"] == 0
    checked = replay.verdict(result, reference)
    assert {k: checked[k] for k in replay.COMPARED} == checked["expected"]
    assert checked["ok"]
    assert not Path("/run/netns", f"kwstest-{id(tmp)}").exists()   # namespace deleted
