"""Paths the Spark tests share (a module with its own name: test modules importing
``conftest`` got another directory's conftest when several test directories ran in one
pytest invocation)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PCAPS = ROOT / "pcaps"
