"""Run a sample capture through the engine and the insights collector."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.output.insights import InsightsCollector

PCAPS = Path(__file__).resolve().parents[2] / "pcaps"


def insights_of(name: str, **limits: Any) -> dict[str, Any]:
    """:meth:`InsightsCollector.report` of ``pcaps/<name>.pcap``."""
    engine = Engine(EngineOptions())
    collector = InsightsCollector(**limits)
    with open_capture(str(PCAPS / f"{name}.pcap")) as source:
        for exchange in engine.run(source):
            collector.add(exchange)
    return collector.report()


def manifest(name: str) -> dict[str, Any]:
    return json.loads((PCAPS / f"{name}.json").read_text())
