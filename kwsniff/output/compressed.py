"""Output files compressed by their name: ``out.jsonl.gz``, ``.bz2``, ``.xz``, ``.zst``.

Contract: :func:`open_text_output` opens ``path`` for writing UTF-8 text with ``"\\n"``
line ends; when the name ends in one of :data:`COMPRESSED_SUFFIXES` the bytes go
through that compressor (a complete, standard file once the stream is closed — the
capture readers and the usual command-line tools read it back), any other name is
written as is. For gzip and zstd ``flush()`` pushes what was written so far
through the compressor, so a reader of a file still being written (``live -o``) sees
every flushed line; bzip2 and xz cannot flush mid-stream and complete their output
when the file is closed.
Errors are :class:`OSError` (the caller names the file); a suffix whose compressor
module is missing is an :class:`~kwsniff.errors.OutputError`.
"""

from __future__ import annotations

import io
from typing import IO, Any

from kwsniff.errors import OutputError

#: name suffix -> compression (the names the capture readers use)
COMPRESSED_SUFFIXES = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz", ".zst": "zstd"}


def compression_for(path: str) -> str | None:
    """The compression ``path``'s name asks for, or None."""
    lower = path.lower()
    for suffix, name in COMPRESSED_SUFFIXES.items():
        if lower.endswith(suffix):
            return name
    return None


def _binary_writer(path: str, compression: str) -> Any:
    if compression == "gzip":
        import gzip
        return gzip.open(path, "wb")
    if compression == "bzip2":
        import bz2
        return bz2.open(path, "wb")
    if compression == "xz":
        import lzma
        return lzma.open(path, "wb")
    try:
        import zstandard
    except ImportError:
        raise OutputError(f"cannot write {path}: .zst needs the zstandard module") from None
    raw = open(path, "wb")  # noqa: SIM115 - closed with the writer
    try:
        return zstandard.ZstdCompressor().stream_writer(raw, closefd=True)
    except BaseException:
        raw.close()
        raise


def open_text_output(path: str) -> IO[str]:
    """``path`` opened for UTF-8 text, compressed as its name says (module docstring)."""
    compression = compression_for(path)
    if compression is None:
        return open(path, "w", encoding="utf-8", newline="\n")  # noqa: SIM115
    binary = _binary_writer(path, compression)
    try:
        # (zstandard's writer directly: its flush() is the one that empties the
        # compressor, which a BufferedWriter in between would not call)
        return io.TextIOWrapper(binary, encoding="utf-8", newline="\n")
    except BaseException:
        binary.close()
        raise
