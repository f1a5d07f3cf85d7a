"""``export -o NAME.gz|.bz2|.xz|.zst`` writes the compression the name says, and the
content is the plain export's, byte for byte (one process and -j 2)."""

from __future__ import annotations

import bz2
import gzip
import lzma
import zlib
from pathlib import Path

import pytest
import zstandard

from kwsniff.cli import main
from kwsniff.output.compressed import compression_for, open_text_output

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = str(ROOT / "pcaps" / "rdkafka-consumer-group.pcap")

READERS = {
    ".gz": gzip.decompress,
    ".bz2": bz2.decompress,
    ".xz": lzma.decompress,
    ".zst": lambda data: zstandard.ZstdDecompressor().decompressobj().decompress(data),
}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    out = tmp_path_factory.mktemp("plain") / "out.jsonl"
    assert main(["export", "-j", "1", CAPTURE, "-o", str(out)]) == 0
    return out.read_bytes()


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("suffix", READERS)
def test_export_compresses_by_name(suffix: str, jobs: str, plain: bytes, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / f"out.jsonl{suffix}"
    assert main(["export", "-j", jobs, CAPTURE, "-o", str(out)]) == 0
    data = out.read_bytes()
    assert data != plain and len(data) < len(plain)
    assert READERS[suffix](data) == plain


def test_other_names_are_plain(tmp_path: Path) -> None:
    assert compression_for("out.jsonl") is None
    assert compression_for("OUT.JSONL.GZ") == "gzip"
    assert compression_for("out.jsonl.lz4") is None
    out = tmp_path / "out.json"
    with open_text_output(str(out)) as fh:
        fh.write("é\n")
    assert out.read_bytes() == "é\n".encode()


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_flush_makes_written_lines_readable(suffix: str, tmp_path: Path) -> None:
    """``live -o x.jsonl.gz`` flushes after every exchange: a reader sees each line."""
    out = tmp_path / f"live.jsonl{suffix}"
    fh = open_text_output(str(out))
    try:
        fh.write('{"kind": "exchange"}\n')
        fh.flush()
        data = out.read_bytes()
        if suffix == ".gz":
            text = zlib.decompressobj(wbits=31).decompress(data)
        else:
            text = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        assert text == b'{"kind": "exchange"}\n'
    finally:
        fh.close()
