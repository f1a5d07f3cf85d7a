"""Candidate testing of orphan responses (kwsniff/kafka/inference.py) rules out a
candidate from the C field decoder's verdict alone (``decoder.misfit``) and decodes in
full only the others: ``decoding.fits_exactly`` must say exactly what decoding every
candidate in full says, on real responses against every plausible (api, version)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka import decoding
from kwsniff.kafka.inference import all_pairs
from kwsniff.kafka.protocol import cprogram
from kwsniff.kafka.protocol.decoder import misfit

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = [ROOT / "pcaps" / name for name in
            ("rdkafka-consumer-group.pcap", "kafka-python-0.11.pcap", "tansu-admin.pcap")]


def _responses() -> list[tuple[bytes, int, int]]:
    out = []
    for path in CAPTURES:
        engine = Engine(EngineOptions())
        with open_capture(str(path)) as source:
            for ex in engine.run(source):
                resp = ex.response
                if resp is not None and resp.api_key is not None and \
                        resp.api_version is not None:
                    out.append((resp.raw, resp.api_key, resp.api_version))
    return out


def test_fits_exactly_is_the_full_decoding_verdict() -> None:
    responses = _responses()
    assert len(responses) > 100
    rng = random.Random(5)
    sample = rng.sample(responses, 12)
    pairs = all_pairs(None)
    checked = ruled_out = 0
    for raw, key, version in sample:
        for k, v in [(key, version)] + rng.sample(pairs, 150):
            full = decoding.try_response(raw, k, v)
            quick = decoding.fits_exactly(raw, k, v)
            assert (quick is not None) == decoding.decodes_exactly(full), (k, v, key, version)
            if quick is not None:   # (the same decoding: every byte, no problem)
                assert quick.body_end == full.body_end == len(raw)    # type: ignore[union-attr]
                assert quick.body.keys() == full.body.keys()    # type: ignore[union-attr]
            if misfit(raw, k, v):
                ruled_out += 1
                assert not decoding.decodes_exactly(full), (k, v)
            checked += 1
    assert checked > 1000
    if cprogram.decode_fields is not None:      # (compiled: the kernel rules most out)
        assert ruled_out > checked // 2


def test_the_true_version_is_never_ruled_out() -> None:
    for raw, key, version in _responses():
        if decoding.decodes_exactly(decoding.try_response(raw, key, version)):
            assert not misfit(raw, key, version), (key, version)


@pytest.mark.parametrize("raw", [b"", b"\x00\x00", b"\x00\x00\x00\x01"])
def test_short_frames(raw: bytes) -> None:
    assert decoding.fits_exactly(raw, 3, 9) is None
