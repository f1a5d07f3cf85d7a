"""The real captures in pcaps/ decode with no unknown versions and no leftover bytes.

Runs the whole pipeline (capture -> TCP -> framing -> pairing -> this decoder), so it is
marked slow. Two anomalies of librdkafka's mock cluster (an encoder, not a decoder,
problem) are expected and checked for precisely:

* its ApiVersions answer to an unsupported v3 request is neither a v0 body (what Kafka
  sends) nor a v3 body: the ApiKeys count is written as n instead of n+1;
* its Metadata v13 responses carry one byte more than Kafka's v13 layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PCAPS = Path(__file__).resolve().parents[2] / "pcaps"
CAPTURES = sorted(PCAPS.glob("*.pcap")) if PCAPS.is_dir() else []

MOCK_APIVERSIONS = "body decoded only partly: ApiKeys: 16781824 elements cannot fit"
MOCK_METADATA_V13 = "1 byte left over after the body"


@pytest.mark.slow
@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_capture_decodes_cleanly(path: Path) -> None:
    engine = pytest.importorskip("kwsniff.engine")
    capture = pytest.importorskip("kwsniff.capture")
    meta = json.loads(path.with_suffix(".json").read_text())
    ports = tuple(meta.get("capture", {}).get("ports") or (9092,))
    decoded = 0
    unexpected: list[str] = []
    with capture.open_capture(str(path)) as src:
        for ex in engine.iter_exchanges(src, engine.EngineOptions(ports=ports)):
            for msg in (ex.request, ex.response):
                if msg is None or msg.api_key is None:
                    continue
                decoded += 1
                for p in msg.problems:
                    if "not a known version" in p or "unknown API key" in p:
                        unexpected.append(p)
                    elif msg.kind == "response" and msg.api_key == 18 and p.startswith(MOCK_APIVERSIONS):
                        assert msg.header_version == 0 and msg.body == {"ErrorCode": 35}
                    elif (msg.kind == "response" and msg.api_key == 3 and msg.api_version == 13
                          and p == MOCK_METADATA_V13):
                        assert msg.raw[-1:] == b"\x00"
                    elif "left over" in p or "decoded only partly" in p:
                        unexpected.append(f"{msg.kind} key {msg.api_key} v{msg.api_version}: {p}")
    assert decoded > 0
    assert unexpected == []
