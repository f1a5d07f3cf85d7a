"""The TUI's spill: exchanges read back from it equal the ones decoded (bodies stripped
and decoded again from the raw frames included), and the spill stays compact."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tui_common import ALL_PCAPS

from kwsniff.capture import open_capture
from kwsniff.engine import Engine
from kwsniff.kafka.model import Exchange
from kwsniff.kafka.records import Records
from kwsniff.output.facts import ExchangeFacts, TopicNames
from kwsniff.output.jsonl import ExportEncoder, dumps
from kwsniff.output.tree import build_tree, render_tree
from kwsniff.tui import spill
from kwsniff.tui.spill import SpillWriter, lean, read_block, rebuild


def _shape(value: object) -> object:
    """A body as comparable plain data (keys in order; record sets by bytes and tags)."""
    if isinstance(value, Records):
        return ("Records", value.data, value.topic, value.partition)
    if isinstance(value, dict):
        return [(k, _shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return value


def _views(ex: Exchange, names: TopicNames) -> tuple[object, ...]:
    """What the TUI shows of an exchange: the -V tree (with spans) and the export line;
    and the bodies themselves, record-set tags included."""
    tree = list(render_tree(build_tree(ex, spans=True), offsets=True))
    obj = ExportEncoder("x", records=True, names=names).exchange_object(ex)
    bodies = [_shape(m.body) for m in (ex.request, ex.response) if m is not None]
    return tree, dumps(obj), bodies


@pytest.mark.parametrize("path", ALL_PCAPS, ids=lambda p: p.stem)
def test_rebuilt_exchanges_equal_the_decoded_ones(path: Path, tmp_path: Path) -> None:
    writer = SpillWriter()
    writer.open(str(tmp_path / "s"))
    names = TopicNames()
    decoded = []
    places = []
    stripped = 0
    with open_capture(str(path)) as source:
        for ex in Engine().run(source):
            ExchangeFacts(ex, names).topics  # noqa: B018 - learn names as the decoder does
            record = lean(ex)
            stripped += sum(1 for m in record[8:] if m is not None and m[1])
            places.append(writer.add(ex))
            decoded.append(ex)
    writer.close()
    fd = os.open(tmp_path / "s", os.O_RDONLY)
    try:
        for ex, (offset, item) in zip(decoded, places, strict=True):
            records = read_block(fd, offset)
            assert records is not None
            again = rebuild(records[item])
            assert again is not None
            assert _views(again, names) == _views(ex, names), ex.index
    finally:
        os.close(fd)
    if path.stem in ("rdkafka-consumer-group", "rdkafka-acks"):
        assert stripped > 0           # the test covers stripped bodies


def test_spill_is_smaller_than_the_frames(tmp_path: Path) -> None:
    """Produce/Fetch bodies are not spilled decoded: the spill (compressed) is smaller
    than the raw frames it holds."""
    path = Path(__file__).resolve().parent.parent.parent / "pcaps" / "rdkafka-acks.pcap"
    writer = SpillWriter()
    writer.open(str(tmp_path / "s"))
    frames = 0
    with open_capture(str(path)) as source:
        for ex in Engine().run(source):
            writer.add(ex)
            frames += sum(len(m.raw) for m in (ex.request, ex.response) if m is not None)
    writer.close()
    assert 0 < writer.bytes < frames
    assert os.path.getsize(tmp_path / "s") == writer.bytes


def test_damaged_spill_reads_as_unavailable(tmp_path: Path) -> None:
    target = tmp_path / "s"
    target.write_bytes(b"\x00\x00\x00\x10" + b"garbage")
    fd = os.open(target, os.O_RDONLY)
    try:
        assert read_block(fd, 0) is None
        assert read_block(fd, 1000) is None
    finally:
        os.close(fd)
    assert rebuild(None) is None


def test_blocks_close_when_full(tmp_path: Path) -> None:
    path = Path(__file__).resolve().parent.parent.parent / "pcaps" / "rdkafka-acks.pcap"
    writer = SpillWriter()
    writer.open(str(tmp_path / "s"))
    places = []
    with open_capture(str(path)) as source:
        for ex in Engine().run(source):
            places.append(writer.add(ex))
    writer.close()
    assert max(item for _, item in places) < spill.BLOCK_ITEMS
    assert len({offset for offset, _ in places}) >= len(places) // spill.BLOCK_ITEMS
