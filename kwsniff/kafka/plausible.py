"""Cheap plausibility checks on the first bytes of a Kafka frame.

Contract: every function here works on a buffer and a position, never raises on any
bytes, allocates nothing on the reject path, and only looks at the fixed request header
prefix (size, api key, api version, correlation id, client id) or the response prefix
(size, correlation id).  They are used for resynchronisation, client-side detection and
Kafka detection on unconfigured ports, so they are deliberately strict: a frame that is
real but odd (unknown version, negative correlation id) is still decoded when the
stream is in sync; these checks only decide where a frame may *start*.
"""

from __future__ import annotations

import struct
from typing import Any

from kwsniff import _compiled
from kwsniff.kafka.protocol import schema

#: the C kernel (header_fields, request_fields), or None: the Python code only
_kernel = _compiled.kernel("kwsniff.kafka._frames")

_I32 = struct.Struct(">i")
_H16_H16_I32_H16 = struct.Struct(">hhih")

def _max_versions() -> tuple[int, ...]:
    keys = schema.api_keys()
    out = [-1] * (max(keys) + 1 if keys else 0)
    for k in keys:
        r = schema.version_range(k, schema.REQUEST)
        if r is not None:
            out[k] = r[1]
    return tuple(out)


#: Highest version of each API key in the schema table (-1: unknown key). Used only to
#: judge plausibility; decoding accepts whatever the schema table knows.
MAX_VERSIONS: tuple[int, ...] = _max_versions()


def _flexible_from(key: int, max_version: int) -> int:
    """First flexible request version of ``key`` (99: none, or an unknown key)."""
    f = schema.flexible_from(key, schema.REQUEST) if max_version >= 0 else None
    return 99 if f is None else f


_FLEXIBLE_FROM: tuple[int, ...] = tuple(_flexible_from(k, v) for k, v in enumerate(MAX_VERSIONS))

#: Smallest request: api key, api version, correlation id, client id length.
MIN_REQUEST_SIZE = 10
#: Smallest response any API produces: correlation id + an int16 error code.
MIN_RESPONSE_SIZE = 6

SASL_HANDSHAKE = 17
API_VERSIONS = 18
CONTROLLED_SHUTDOWN = 7


def max_version(api_key: int) -> int:
    """Highest plausible version of ``api_key`` (-1 when the key is unknown)."""
    if 0 <= api_key < len(MAX_VERSIONS):
        return MAX_VERSIONS[api_key]
    return -1


_PRINTABLE_ASCII = bytes(range(0x20, 0x7F))


def client_id_ok(buf: bytes | bytearray | memoryview, start: int, length: int) -> bool:
    """A client id is text without control characters (UTF-8 allowed)."""
    if length == 0:
        return True
    chunk = bytes(buf[start:start + length])
    if not chunk.translate(None, _PRINTABLE_ASCII):
        return True
    try:
        return chunk.decode("utf-8").isprintable()
    except UnicodeDecodeError:
        return False


def request_header_at(buf: bytes | bytearray | memoryview, pos: int, end: int,
                      max_frame: int) -> tuple[int, int, int, int] | None:
    """``(size, api_key, api_version, correlation_id)`` if a plausible request starts at ``pos``.

    Needs the size prefix and the complete client id inside ``buf[pos:end]``; returns None
    when the bytes are not a plausible request start *or* are too short to tell (callers
    that must distinguish use :func:`request_prefix_needed`).
    """
    if end - pos < 14:
        return None
    size = _I32.unpack_from(buf, pos)[0]
    if size < MIN_REQUEST_SIZE or size > max_frame:
        return None
    fields = _header_fields(buf, pos + 4, min(end, pos + 4 + size), size)
    if fields is None:
        return None
    return (size, fields[0], fields[1], fields[2])


def _request_fields_py(raw: bytes | bytearray | memoryview) -> tuple[int, int, int] | None:
    return _header_fields_py(raw, 0, len(raw), len(raw))


def _header_fields_py(buf: bytes | bytearray | memoryview, pos: int, end: int,
                      size: int) -> tuple[int, int, int] | None:
    if end - pos < 10 or size < MIN_REQUEST_SIZE:
        return None
    api_key, version, corr, cid_len = _H16_H16_I32_H16.unpack_from(buf, pos)
    if api_key < 0 or api_key >= len(MAX_VERSIONS) or version < 0 or version > MAX_VERSIONS[api_key]:
        return None
    if corr < 0:
        return None
    if api_key == CONTROLLED_SHUTDOWN and version == 0:
        return (api_key, version, corr)   # request header v0: no client id
    if cid_len < -1 or cid_len > size - MIN_REQUEST_SIZE:
        return None
    if cid_len > 0:
        if end - pos < 10 + cid_len:
            return None
        if not client_id_ok(buf, pos + 10, cid_len):
            return None
    return (api_key, version, corr)


def _bind_header_fields() -> tuple[Any, Any]:
    """``(header_fields, request_fields)``: the kernel's, with the Python code where it
    declines (NotImplemented), or the Python code alone."""
    if _kernel is None:
        return _header_fields_py, _request_fields_py
    fast, fast_whole = _kernel.header_fields, _kernel.request_fields
    versions = MAX_VERSIONS
    declined = NotImplemented

    def header_fields(buf: bytes | bytearray | memoryview, pos: int, end: int,
                      size: int) -> tuple[int, int, int] | None:
        r = fast(buf, pos, end, size, versions)
        return _header_fields_py(buf, pos, end, size) if r is declined else r

    def request_fields(raw: bytes | bytearray | memoryview) -> tuple[int, int, int] | None:
        r = fast_whole(versions, raw)
        return _request_fields_py(raw) if r is declined else r

    return header_fields, request_fields


#: ``_header_fields(buf, pos, end, size)``: ``(api_key, api_version, correlation_id)``
#: if a plausible request header of a ``size``-byte frame starts at ``buf[pos]``
#: (looking below ``end``), else None; ``request_fields(raw)``: the same for a whole
#: frame body ``raw`` (no size prefix)
_header_fields, request_fields = _bind_header_fields()


def request_prefix_needed(buf: bytes | bytearray | memoryview, pos: int, end: int) -> int:
    """Bytes from ``pos`` needed before :func:`request_header_at` can give a verdict."""
    if end - pos < 14:
        return 14
    cid_len = struct.unpack_from(">h", buf, pos + 12)[0]
    return 14 + max(cid_len, 0)


def response_size_at(buf: bytes | bytearray | memoryview, pos: int, end: int,
                     max_frame: int) -> tuple[int, int] | None:
    """``(size, correlation_id)`` if the 8 bytes at ``pos`` can start a response frame."""
    if end - pos < 8:
        return None
    size, corr = struct.unpack_from(">ii", buf, pos)
    if size < MIN_RESPONSE_SIZE or size > max_frame or corr < 0:
        return None
    return (size, corr)


def looks_like_tls(buf: bytes | bytearray | memoryview) -> bool:
    """True when ``buf`` starts with a TLS (or SSL 3.0) handshake/alert record header."""
    if len(buf) < 5:
        return False
    ctype, major, minor = buf[0], buf[1], buf[2]
    if ctype not in (0x15, 0x16) or major != 3 or minor > 4:
        return False
    length = (buf[3] << 8) | buf[4]
    return 0 < length <= 16384 + 2048


def produce_acks(raw: bytes, api_version: int, body_start: int) -> int | None:
    """The ``acks`` field of a Produce request body starting at ``body_start``.

    v0-v2: acks is the first body field; v3+: it follows the nullable transactional id
    (compact in flexible versions v9+).  None when the bytes are too short.
    """
    try:
        pos = body_start
        if api_version >= 3:
            if api_version >= 9:
                n, pos = read_uvarint(raw, pos)
                if n > 0:
                    pos += n - 1
            else:
                n = struct.unpack_from(">h", raw, pos)[0]
                pos += 2 + max(n, 0)
        return struct.unpack_from(">h", raw, pos)[0]
    except (struct.error, IndexError):
        return None


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Unsigned varint at ``pos`` -> ``(value, next_pos)``; raises IndexError when cut."""
    value = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise IndexError("varint too long")


def request_body_start(raw: bytes, api_key: int, api_version: int) -> int | None:
    """Offset of the body in a request frame ``raw`` (without size prefix), or None.

    Skips api key, version, correlation id, client id and, for flexible versions, the
    header's tagged fields.  ``flexible_from`` tells which versions are flexible.
    """
    try:
        if api_key == CONTROLLED_SHUTDOWN and api_version == 0:
            return 8
        n = struct.unpack_from(">h", raw, 8)[0]
        pos = 10 + max(n, 0)
        if api_version >= flexible_from(api_key):
            count, pos = read_uvarint(raw, pos)
            for _ in range(count):
                _tag, pos = read_uvarint(raw, pos)
                size, pos = read_uvarint(raw, pos)
                pos += size
        return pos if pos <= len(raw) else None
    except (struct.error, IndexError):
        return None


def flexible_from(api_key: int) -> int:
    """First flexible request version of ``api_key`` (99 when it has none or is unknown)."""
    if 0 <= api_key < len(_FLEXIBLE_FROM):
        return _FLEXIBLE_FROM[api_key]
    return 99
