"""open_capture: detection, errors, compression, stdin, pipes and chunked streaming."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import subprocess
import sys
import threading

import lz4.frame
import pytest
import zstandard
from capture_helpers import ether_packets, read_all, sll2_packets

from kwsniff.capture import linktypes as lt
from kwsniff.capture import open_capture, source
from kwsniff.capture.writer import PcapngWriter, PcapWriter
from kwsniff.errors import CaptureError

COMPRESSORS = {
    "gzip": gzip.compress,
    "bzip2": bz2.compress,
    "xz": lzma.compress,
    "zstd": lambda b: zstandard.ZstdCompressor().compress(b),
    "lz4": lz4.frame.compress,
}


def pcap_bytes(n=20):
    buf = io.BytesIO()
    w = PcapWriter(buf)
    for p in ether_packets(n):
        w.write(*p)
    return buf.getvalue()


def pcapng_bytes():
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    w.add_interface(lt.ETHERNET)
    w.add_interface(lt.LINUX_SLL2, tsresol=9)
    for p in ether_packets(8):
        w.write(*p)
    for p in sll2_packets(3):
        w.write(*p, interface=1)
    w.new_section(">")
    w.add_interface(lt.ETHERNET)
    w.write_simple(b"x" * 60)
    return buf.getvalue()


@pytest.fixture(params=["pcap", "pcapng"])
def capture(request, tmp_path):
    raw = pcap_bytes() if request.param == "pcap" else pcapng_bytes()
    path = tmp_path / f"ref.{request.param}"
    path.write_bytes(raw)
    packets, problems, _ = read_all(path)
    assert problems == []
    return request.param, raw, packets


def test_regular_files_are_memory_mapped(tmp_path):
    path = tmp_path / "m.pcap"
    path.write_bytes(pcap_bytes())
    with open_capture(path) as src:
        assert src._mapped is not None
        assert len(list(src)) == 20


@pytest.mark.parametrize("codec", list(COMPRESSORS))
def test_compressed_files_detected_by_magic_not_name(tmp_path, capture, codec):
    fmt, raw, packets = capture
    path = tmp_path / "no-extension"
    path.write_bytes(COMPRESSORS[codec](raw))
    got, problems, src = read_all(path)
    assert (src.format, src.compression) == (fmt, codec)
    assert problems == [] and got == packets


def test_gzip_multimember_and_pcap_gz_name(tmp_path, capture):
    _, raw, packets = capture
    path = tmp_path / "x.pcap.gz"
    half = len(raw) // 2
    path.write_bytes(gzip.compress(raw[:half]) + gzip.compress(raw[half:]))
    got, problems, _ = read_all(path)
    assert problems == [] and got == packets


def test_truncated_gzip_keeps_the_packets_before_and_reports(tmp_path):
    raw = pcap_bytes(200)
    comp = gzip.compress(raw)
    path = tmp_path / "t.pcap.gz"
    path.write_bytes(comp[: len(comp) * 2 // 3])
    got, problems, _ = read_all(path)
    assert 0 < len(got) < 200
    assert got == read_all_bytes(tmp_path, raw)[: len(got)]
    assert len(problems) == 2
    assert "gzip data is corrupt or truncated" in problems[0]
    assert f"frame {len(got) + 1}: capture ends inside a record" in problems[1]


def test_garbage_after_gzip_data_is_reported_after_all_packets(tmp_path, capture):
    _, raw, packets = capture
    path = tmp_path / "g.pcap.gz"
    path.write_bytes(gzip.compress(raw) + b"not gzip at all")
    got, problems, _ = read_all(path)
    assert got == packets
    assert len(problems) == 1
    assert "bytes after the last gzip member are not gzip data" in problems[0]


def read_all_bytes(tmp_path, raw):
    path = tmp_path / "plain.bin"
    path.write_bytes(raw)
    return read_all(path)[0]


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_streaming_with_tiny_chunks_splits_records_anywhere(tmp_path, monkeypatch, capture,
                                                            chunk):
    _, raw, packets = capture
    monkeypatch.setattr(source, "CHUNK", chunk)
    got, problems, _ = read_all(io.BytesIO(raw))
    assert problems == [] and got == packets


def test_stream_truncated_in_the_middle_of_a_record(tmp_path, monkeypatch):
    raw = pcap_bytes(5)
    monkeypatch.setattr(source, "CHUNK", 13)
    got, problems, _ = read_all(io.BytesIO(raw[:-3]))
    assert len(got) == 4 and len(problems) == 1 and problems[0].startswith("frame 5: ")


def run_stdin(stdin, extra=""):
    code = ("import sys\nfrom kwsniff.capture import open_capture\n"
            "with open_capture('-') as s:\n"
            "    n = sum(len(p[3]) for p in s)\n"
            "    print(s.format, s.compression, s.packets, n, s.problems)\n")
    return subprocess.run([sys.executable, "-c", code], stdin=stdin, capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.mark.parametrize("codec", [None, "gzip"])
def test_stdin_from_a_file_and_from_a_pipe(tmp_path, capture, codec):
    fmt, raw, packets = capture
    data = gzip.compress(raw) if codec else raw
    path = tmp_path / "in"
    path.write_bytes(data)
    expect = f"{fmt} {codec} {len(packets)} {sum(len(p[3]) for p in packets)} []"
    with open(path, "rb") as f:
        assert run_stdin(f) == expect
    cat = subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE)
    try:
        assert run_stdin(cat.stdout) == expect
    finally:
        cat.stdout.close()
        cat.wait()


def test_named_pipe_is_streamed(tmp_path, capture):
    _, raw, packets = capture
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as f:
            f.write(raw)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        with open_capture(fifo) as src:
            assert src._mapped is None
            got = [(f, ts, t, bytes(d), o) for f, ts, t, d, o in src]
    finally:
        writer.join()
    assert got == packets


def test_file_object_input(capture):
    _, raw, packets = capture
    got, problems, src = read_all(io.BytesIO(raw))
    assert got == packets and src.name == "<file object>"


@pytest.mark.parametrize("content,message", [
    (b"", "empty file, not a capture"),
    (b"<html>hello</html>\n", "not a pcap or pcapng capture (starts with 3c 68 74 6d 6c 3e 68 65)"),
    (b"\xd4\xc3\xb2\xa1\x02\x00", "truncated pcap file: the file header has 6 of 24 bytes"),
    (b"\n\r\r\n\x1c\x00\x00\x00\x01\x02\x03\x04", "corrupt pcapng file: the section header has "
                                                  "no valid byte-order magic"),
    (gzip.compress(b"just text, compressed"), "not a pcap or pcapng capture (gzip-compressed)"),
    (b"\x1f\x8b\x08\x00garbage-not-gzip", "gzip data is corrupt or unreadable"),
    (gzip.compress(b""), "the gzip data is empty, not a capture"),
], ids=["empty", "text", "short-pcap", "bad-bom", "gzip-text", "bad-gzip", "empty-gzip"])
def test_not_a_capture_is_a_one_line_error_at_open(tmp_path, content, message):
    path = tmp_path / "bad"
    path.write_bytes(content)
    with pytest.raises(CaptureError) as err:
        open_capture(path)
    text = str(err.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(CaptureError, match=r"nope\.pcap: no such file$"):
        open_capture(tmp_path / "nope.pcap")
    with pytest.raises(CaptureError, match="is a directory, not a capture file$"):
        open_capture(tmp_path)


def test_unreadable_file(tmp_path):
    if os.geteuid() == 0:
        # root reads everything: use a path component that is not a directory instead
        path = tmp_path / "file"
        path.write_bytes(b"x")
        with pytest.raises(CaptureError, match="not a directory"):
            open_capture(path / "inside.pcap")
        return
    path = tmp_path / "secret.pcap"
    path.write_bytes(pcap_bytes())
    path.chmod(0)
    with pytest.raises(CaptureError, match="permission denied$"):
        open_capture(path)


def test_cli_exit_code_for_capture_errors():
    assert CaptureError.exit_code != 0


def test_single_pass_iteration_and_close(tmp_path):
    path = tmp_path / "once.pcap"
    path.write_bytes(pcap_bytes(3))
    src = open_capture(path)
    it = iter(src)
    assert next(it)[0] == 1
    with pytest.raises(RuntimeError, match="only once"):
        iter(src)
    src.close()
    src.close()
    with pytest.raises(ValueError, match="closed"):
        iter(src)
    assert "packets=1" in repr(src)


def test_closing_mid_iteration_releases_the_mapping(tmp_path):
    path = tmp_path / "mid.pcap"
    path.write_bytes(pcap_bytes(10))
    with open_capture(path) as src:
        for frame, *_ in src:
            if frame == 3:
                break
    assert src._mapped is None and src.packets == 3
