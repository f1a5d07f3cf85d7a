"""Paths the plugin tests share (a module with its own name: test modules importing
``conftest`` got another directory's conftest when several test directories ran in one
pytest invocation)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
CAPTURE = ROOT / "pcaps" / "plugins-avro-protobuf-json.pcap"
MANIFEST = CAPTURE.with_suffix(".json")
CONFIG = DATA / "plugins.toml"
