"""Codecs against bytes made by independent implementations (kafka-python's codec
functions, python-snappy, xxhash, zstandard/gzip used directly), limits and bad streams."""

from __future__ import annotations

import gzip
import io
import os
import struct

import kafka.codec as kc
import pytest
import snappy
import xxhash
import zstandard

from kwsniff.kafka import compression as comp
from kwsniff.kafka.compression import GZIP, LZ4, SNAPPY, ZSTD, decompress

RAW = b"".join(b"kafka record %06d {\"k\": %d}\n" % (i, i * 7) for i in range(4000))


def _encoders():
    return {
        "gzip": (GZIP, kc.gzip_encode),
        "snappy-xerial": (SNAPPY, kc.snappy_encode),
        "snappy-xerial-small-blocks": (SNAPPY, lambda d: kc.snappy_encode(d, xerial_blocksize=1000)),
        "snappy-raw": (SNAPPY, lambda d: kc.snappy_encode(d, xerial_compatible=False)),
        "lz4-frame": (LZ4, kc.lz4_encode),
        "lz4-pre-kip57": (LZ4, kc.lz4_encode_old_kafka),
        "zstd": (ZSTD, kc.zstd_encode),
        "zstd-no-content-size": (ZSTD, lambda d: zstandard.ZstdCompressor(write_content_size=False).compress(d)),
    }


@pytest.mark.parametrize("name", list(_encoders()))
def test_roundtrip_independent_encoder(name: str) -> None:
    codec, enc = _encoders()[name]
    res = decompress(codec, enc(RAW))
    assert res.problem is None
    assert res.data == RAW


def test_xerial_framing_reported_and_python_snappy_agrees() -> None:
    data = kc.snappy_encode(RAW, xerial_blocksize=4096)
    assert data.startswith(comp.XERIAL_MAGIC)
    res = decompress(SNAPPY, data)
    assert (res.data, res.framing) == (RAW, "xerial")
    # python-snappy cannot read the framing itself, but its raw blocks are what we read
    assert decompress(SNAPPY, snappy.compress(RAW)).data == RAW


def test_xerial_little_endian_version_fields_accepted() -> None:
    # some producers (redpanda) write the two header ints little-endian
    data = bytearray(kc.snappy_encode(RAW))
    data[8:16] = struct.pack("<ii", 1, 1)
    assert decompress(SNAPPY, bytes(data)).data == RAW


def test_legacy_lz4_checksum_is_the_pre_kip57_one() -> None:
    data = kc.lz4_encode_old_kafka(RAW)
    # independent check that this really is the broken checksum (xxh32 over magic too)
    assert data[6] == xxhash.xxh32(data[0:6]).intdigest() >> 8 & 0xFF
    assert data[6] != xxhash.xxh32(data[4:6]).intdigest() >> 8 & 0xFF
    res = decompress(LZ4, data)
    assert res.data == RAW and res.problem is None
    assert "pre-KIP-57" in (res.framing or "")


def test_xxh32_matches_xxhash() -> None:
    for n in list(range(0, 40)) + [100, 1000]:
        data = os.urandom(n)
        assert comp.xxh32(data) == xxhash.xxh32(data).intdigest()
        assert comp.xxh32(data, 12345) == xxhash.xxh32(data, seed=12345).intdigest()


def test_zstd_streaming_frames_without_content_size() -> None:
    buf = io.BytesIO()
    cctx = zstandard.ZstdCompressor()
    with cctx.stream_writer(buf, closefd=False) as w:  # streaming: no content size in header
        for i in range(0, len(RAW), 5000):
            w.write(RAW[i:i + 5000])
    data = buf.getvalue()
    assert zstandard.get_frame_parameters(data).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(ZSTD, data).data == RAW


def test_multi_frame_and_multi_member_streams() -> None:
    half = len(RAW) // 2
    z = zstandard.ZstdCompressor()
    assert decompress(ZSTD, z.compress(RAW[:half]) + z.compress(RAW[half:])).data == RAW
    assert decompress(GZIP, gzip.compress(RAW[:half]) + gzip.compress(RAW[half:])).data == RAW
    assert decompress(LZ4, kc.lz4_encode(RAW[:half]) + kc.lz4_encode(RAW[half:])).data == RAW


@pytest.mark.parametrize("name", list(_encoders()))
def test_bomb_is_capped_at_the_limit(name: str) -> None:
    codec, enc = _encoders()[name]
    bomb = enc(b"\x00" * (8 << 20))
    assert len(bomb) < (1 << 20)
    res = decompress(codec, bomb, limit=1 << 20)
    assert res.problem is not None and "limit" in res.problem
    assert len(res.data) <= 1 << 20


def test_default_limit_is_configurable() -> None:
    old = comp.get_max_decompressed()
    assert old == 64 * 1024 * 1024
    try:
        comp.set_max_decompressed(1000)
        assert "limit of 1000" in (decompress(GZIP, gzip.compress(RAW)).problem or "")
        with pytest.raises(ValueError):
            comp.set_max_decompressed(0)
    finally:
        comp.set_max_decompressed(old)
    assert decompress(GZIP, gzip.compress(RAW)).problem is None


@pytest.mark.parametrize("name", list(_encoders()))
def test_truncated_stream_reports_and_keeps_partial_output(name: str) -> None:
    codec, enc = _encoders()[name]
    data = enc(RAW)
    for cut in (1, 5, len(data) // 2, len(data) - 1):
        res = decompress(codec, data[:cut])
        assert res.problem, f"cut at {cut} not reported"
        assert RAW.startswith(res.data)


@pytest.mark.parametrize("name", list(_encoders()))
def test_corrupt_streams_never_raise(name: str) -> None:
    codec, enc = _encoders()[name]
    data = bytearray(enc(RAW))
    for i in range(0, len(data), max(1, len(data) // 97)):
        bad = bytearray(data)
        bad[i] ^= 0x5A
        res = decompress(codec, bytes(bad), limit=1 << 20)
        # codecs without checksums may decode a flipped byte into other bytes (the batch
        # CRC catches that); what matters here: no exception, bounded output
        assert isinstance(res.data, bytes) and len(res.data) <= 1 << 20


def test_garbage_and_unknown_codec() -> None:
    for codec in (GZIP, SNAPPY, LZ4, ZSTD):
        res = decompress(codec, b"this is not compressed at all")
        assert res.problem and res.data == b""
    assert decompress(7, b"x").problem == "unknown compression codec 7"
    assert comp.codec_name(7) == "codec-7" and comp.codec_name(4) == "zstd"
