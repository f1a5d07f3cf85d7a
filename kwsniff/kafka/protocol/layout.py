"""Wire layout rules of schema rows at one version, shared by the decoder builders.

Contract: :class:`Layout` answers, for one message version (``version``, ``flexible``),
which fields are present and which are tagged, whether a field uses the compact
(varint) encoding, and the fewest bytes a field, a struct or an array element can take.
The generated Python decoders (:mod:`codegen`) and the field-decoder kernel's programs
(:mod:`cprogram`) both follow these rules, so both decode the same bytes the same way.
"""

from __future__ import annotations

from kwsniff.kafka.protocol.schema import (
    F_CHILDREN,
    F_FLEX,
    F_NULLABLE,
    F_TAG,
    F_TAGGED,
    F_TYPE,
    F_VERSIONS,
    in_range,
)

#: fixed-size Kafka types: (struct code, size)
FIXED: dict[str, tuple[str, int]] = {
    "int8": ("b", 1), "int16": ("h", 2), "uint16": ("H", 2), "int32": ("i", 4),
    "uint32": ("I", 4), "int64": ("q", 8), "float64": ("d", 8), "bool": ("?", 1),
}

#: implausible element counts for arrays whose elements may take no bytes at all
MAX_EMPTY_ELEMENTS = 1 << 16


class Layout:
    """Field presence, encodings and minimum sizes at one version."""

    def __init__(self, version: int, flexible: bool) -> None:
        self.v = version
        self.flex = flexible

    def compact(self, row: tuple) -> bool:
        """Does this (array, string, bytes, records) field use the compact encoding?"""
        if not self.flex:
            return False
        over = row[F_FLEX]
        return over is None or in_range(self.v, over)

    def nullable(self, row: tuple) -> bool:
        return in_range(self.v, row[F_NULLABLE])

    def present(self, fields: tuple) -> tuple[list[tuple], dict[int, tuple]]:
        """The fields at this version: (in-line fields in order, tagged fields by tag)."""
        plain: list[tuple] = []
        tagged: dict[int, tuple] = {}
        for f in fields:
            if not in_range(self.v, f[F_VERSIONS]):
                continue
            if f[F_TAG] is not None and in_range(self.v, f[F_TAGGED]):
                tagged[f[F_TAG]] = f
            else:
                plain.append(f)
        return plain, tagged

    def min_size(self, row: tuple) -> int:
        t = row[F_TYPE]
        children = row[F_CHILDREN]
        compact = self.compact(row)
        if children is not None and not t.startswith("[]"):
            if in_range(self.v, row[F_NULLABLE]):
                return 1
            return self.struct_min_size(children)
        if t.startswith("[]") or t in ("string", "bytes", "records"):
            if compact:
                return 1
            return 2 if t == "string" else 4
        if t == "uuid":
            return 16
        return FIXED[t][1]

    def struct_min_size(self, fields: tuple) -> int:
        plain, _ = self.present(fields)
        return sum(self.min_size(f) for f in plain) + (1 if self.flex else 0)

    def elem_min_size(self, row: tuple, compact: bool) -> int:
        """The fewest bytes one element of the array field ``row`` takes."""
        if row[F_CHILDREN] is not None:
            return self.struct_min_size(row[F_CHILDREN])
        elem_t = row[F_TYPE][2:]
        if elem_t in FIXED:
            return FIXED[elem_t][1]
        if elem_t == "uuid":
            return 16
        return 1 if compact else (2 if elem_t == "string" else 4)
