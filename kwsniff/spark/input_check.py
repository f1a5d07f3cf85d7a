"""Checking the inputs of ``analyze`` and ``spark-decode`` before Spark starts.

Pure Python (no PySpark import, no JVM): a wrong input costs a fraction of a second and
one line instead of a JVM start and empty tables.

Contract:

* :func:`check_exports` accepts, per local input path:

  * a kwsniff export: a file whose first non-empty line (after gzip/bz2 decompression
    for ``.gz``/``.bz2``) is a JSON object with ``"schema": "kwsniff.exchange/1"``;
    a directory of such files (every regular, non-hidden file is checked, as Spark
    reads them all);
  * a ``spark-decode`` output directory (an ``exchanges/`` sub-directory with Parquet
    files) or Parquet (a ``.parquet`` file, or a directory of ``.parquet`` part files)
    whose footer names the exchange columns :data:`PARQUET_COLUMNS`.

  Anything else raises :class:`~kwsniff.errors.UserError` with one line that names the
  file, says what it is (missing, empty, a packet capture, other JSON, not text, ...)
  and what to run instead (``kwsniff export`` / ``kwsniff spark-decode``). Remote URIs
  (``hdfs://``, ``s3a://``, ...) and files compressed with codecs Python cannot open
  here (``.zst``, ``.lz4``, ``.snappy``, ``.deflate``) are passed through unchecked.
* :func:`check_captures` raises ``UserError("no such capture: ...")`` for missing local
  capture paths of ``spark-decode``.
"""

from __future__ import annotations

import bz2
import gzip
import json
import os
import re
from collections.abc import Iterable
from typing import BinaryIO

from kwsniff.errors import UserError

SCHEMA_ID = "kwsniff.exchange/1"
#: Columns a Parquet input must have (checked by name in the Parquet footer).
PARQUET_COLUMNS = ("index", "ts", "api_key", "api_name", "correlation_id", "client", "broker")
#: Longest first line parsed as JSON; a longer one is judged by its beginning.
MAX_LINE = 4 << 20
UNCHECKED_SUFFIXES = (".zst", ".zstd", ".lz4", ".snappy", ".deflate")
_PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1",
                b"\xa1\xb2\x3c\x4d", b"\x0a\x0d\x0d\x0a")
_SCHEMA_PREFIX = re.compile(rb'^\s*\{\s*"schema"\s*:\s*"kwsniff\.exchange/1"')


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def _hint_export(path: str) -> str:
    stem = os.path.basename(path).split(".")[0] or "export"
    return (f"make an export with `kwsniff export CAPTURE -o {stem}.jsonl --records`, or "
            f"decode captures with `kwsniff spark-decode CAPTURES --out DIR` and analyze DIR")


def _open(path: str):  # noqa: ANN202 - a binary file object
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    if path.endswith(".bz2"):
        return bz2.open(path, "rb")
    return open(path, "rb")


def _magic(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(4)


def _first_line(path: str) -> bytes | None:
    """The first non-empty line (at most MAX_LINE bytes), None for an empty file."""
    with _open(path) as fh:
        while True:
            line = fh.readline(MAX_LINE)
            if not line:
                return None
            if line.strip():
                return line


def _problem_of_export_file(path: str) -> str | None:
    """Why ``path`` is not a kwsniff export file, or None when it is one."""
    name = path.lower()
    if name.endswith(UNCHECKED_SUFFIXES):
        return None
    if _magic(path) in _PCAP_MAGICS:
        return (f"{path} is a packet capture, not an export: run `kwsniff export {path} -o "
                f"{os.path.splitext(os.path.basename(path))[0]}.jsonl --records` (or `kwsniff "
                f"spark-decode {path} --out DIR`) and analyze that")
    if _magic(path) == b"PAR1":
        return _problem_of_parquet_file(path)
    try:
        line = _first_line(path)
    except (OSError, EOFError) as err:
        return f"{path} cannot be read ({err}): not a kwsniff export; {_hint_export(path)}"
    if line is None:
        return f"{path} is empty: not a kwsniff export; {_hint_export(path)}"
    if len(line) >= MAX_LINE and not line.endswith(b"\n"):
        if _SCHEMA_PREFIX.match(line):
            return None
        return (f"{path}: the first line is not a {SCHEMA_ID} object: not a kwsniff export; "
                f"{_hint_export(path)}")
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return (f"{path}: the first line is not a JSON value: not a kwsniff export; "
                f"{_hint_export(path)}")
    if not isinstance(obj, dict) or obj.get("schema") != SCHEMA_ID:
        what = "a JSON object" if isinstance(obj, dict) else f"JSON {type(obj).__name__}"
        return (f"{path}: the first line is {what} without \"schema\": \"{SCHEMA_ID}\": "
                f"not a kwsniff export; {_hint_export(path)}")
    return None


def _problem_of_parquet_file(path: str) -> str | None:
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            fh.seek(max(0, size - 8))
            tail = fh.read(8)
            if len(tail) < 8 or tail[4:] != b"PAR1":
                return f"{path}: not a complete Parquet file"
            footer_len = int.from_bytes(tail[:4], "little")
            fh.seek(max(0, size - 8 - footer_len))
            footer = fh.read(footer_len)
    except OSError as err:
        return f"{path} cannot be read ({err})"
    absent = [c for c in PARQUET_COLUMNS if c.encode() not in footer]
    if absent:
        return (f"{path}: Parquet without the exchange columns ({', '.join(absent)}): not a "
                f"kwsniff exchange table; write one with `kwsniff spark-decode CAPTURES --out "
                f"DIR` and analyze DIR")
    return None


def _visible_files(directory: str) -> list[str]:
    return sorted(os.path.join(directory, n) for n in os.listdir(directory)
                  if not n.startswith((".", "_"))
                  and os.path.isfile(os.path.join(directory, n)))


def _problem_of_parquet_dir(directory: str, label: str) -> str | None:
    parts = [p for p in _visible_files(directory) if p.endswith(".parquet")]
    if not parts:
        return (f"{label}: no Parquet files in {directory}: not a kwsniff exchange table; "
                f"run `kwsniff spark-decode CAPTURES --out DIR` and analyze DIR")
    return _problem_of_parquet_file(parts[0])


def problem_of_export(path: str, fmt: str = "auto") -> str | None:
    """Why ``path`` cannot be analyzed, or None (see the module contract)."""
    if _is_remote(path):
        return None
    local = _local(path)
    if not os.path.exists(local):
        return f"no such export: {path}"
    if os.path.isdir(local):
        if os.path.isdir(os.path.join(local, "exchanges")):
            return _problem_of_parquet_dir(os.path.join(local, "exchanges"), path)
        files = _visible_files(local)
        if not files:
            return (f"{path} is an empty directory: no kwsniff export in it; "
                    f"{_hint_export(path)}")
        if fmt == "parquet" or any(f.endswith(".parquet") for f in files):
            return _problem_of_parquet_dir(local, path)
        for f in files:
            problem = _problem_of_export_file(f)
            if problem is not None:
                return problem
        return None
    if fmt == "parquet" or local.endswith(".parquet"):
        return _problem_of_parquet_file(local)
    return _problem_of_export_file(local)


def check_exports(paths: Iterable[str], fmt: str = "auto") -> None:
    """Raise UserError for the first input that is not analyzable (module contract)."""
    for path in paths:
        problem = problem_of_export(path, fmt)
        if problem is not None:
            raise UserError(problem)


#: Compressed bytes read from the start of a file to measure its compression ratio.
RATIO_SAMPLE = 1 << 20
#: Decompressed bytes after which the sample stops (a highly compressible file).
RATIO_SAMPLE_OUT = 64 << 20
#: Ratio assumed for codecs not sampled here (Hadoop's .lz4/.snappy/.deflate framing):
#: about what gzip achieves on exports.
DEFAULT_RATIO = 8.0


def _reader(name: str, raw: BinaryIO) -> BinaryIO | None:
    """A decompressing reader over the raw file ``raw`` for ``name``'s codec, None when
    it is not one read here."""
    if name.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if name.endswith(".bz2"):
        return bz2.BZ2File(raw, "rb")
    if name.endswith((".zst", ".zstd")):
        try:
            import zstandard
        except ImportError:
            return None
        return zstandard.ZstdDecompressor().stream_reader(raw, read_size=64 << 10)
    return None


def data_bytes(path: str) -> int:
    """The bytes Spark reads out of the local file ``path``: its size, or for a
    compressed file (``.gz``, ``.bz2``, ``.zst``; ``.lz4``, ``.snappy``, ``.deflate``)
    an estimate of its decompressed size: its size times the ratio measured on its
    first RATIO_SAMPLE bytes (exact for a file that short; DEFAULT_RATIO for the codecs
    not read here and for a file whose start does not decompress). Bounded work: at
    most about RATIO_SAMPLE bytes read and RATIO_SAMPLE_OUT produced."""
    size = os.path.getsize(path)
    name = path.lower()
    if not name.endswith((".gz", ".bz2", ".zst", ".zstd", *UNCHECKED_SUFFIXES)):
        return size
    consumed = produced = 0
    try:
        with open(path, "rb") as raw:
            reader = _reader(name, raw)
            if reader is None:
                return int(size * DEFAULT_RATIO)
            with reader:
                while raw.tell() < RATIO_SAMPLE and produced < RATIO_SAMPLE_OUT:
                    out = reader.read(1 << 20)
                    if not out:
                        break
                    produced += len(out)
                consumed = raw.tell()
    except Exception:  # noqa: BLE001 - a damaged file: whatever its codec raises
        return int(size * DEFAULT_RATIO)
    if consumed == 0 or produced == 0:
        return int(size * DEFAULT_RATIO) if size else 0
    return produced if consumed >= size else int(size * produced / consumed)


def local_input_bytes(paths: Iterable[str]) -> int | None:
    """Total size of the data in the local inputs (files, directory trees;
    :func:`data_bytes`: compressed files by an estimate of their decompressed size),
    None when one is remote."""
    total = 0
    for path in paths:
        if _is_remote(path):
            return None
        local = _local(path)
        if os.path.isdir(local):
            for root, _dirs, names in os.walk(local):
                total += sum(data_bytes(os.path.join(root, n)) for n in names)
        elif os.path.exists(local):
            total += data_bytes(local)
    return total


def check_captures(paths: Iterable[str]) -> None:
    """Raise UserError naming the local capture paths that do not exist."""
    missing = [p for p in paths if not _is_remote(p) and not os.path.exists(_local(p))]
    if missing:
        raise UserError("no such capture: " + ", ".join(missing))
