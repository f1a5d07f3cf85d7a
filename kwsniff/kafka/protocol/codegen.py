"""Turn schema-table rows into Python decode functions, compiled on first use.

Contract: :func:`compile_decoder` returns ``fn(buf, pos, out, problems, spans) -> pos``
for one field list at one version. ``fn`` decodes ``buf`` (bytes) from ``pos`` into the
dict ``out`` (filled top-down, so a failed decode leaves everything decoded so far in
place), appends non-fatal findings to ``problems`` and returns the offset after the
last byte it consumed. It raises :class:`DecodeError`, ``struct.error`` or
``IndexError`` on malformed or truncated input (see :data:`DECODE_ERRORS`); callers
turn those into problems. With ``with_spans=True`` the function also appends
``(path, offset, length)`` for every field, array element and unknown tag to
``spans`` (bulk decoding uses the variant without spans and pays nothing for them).

Value mapping: integers/floats/bools as Python values; strings as ``str`` (invalid
UTF-8 replaced with U+FFFD); bytes as ``bytes``; uuid as the canonical lowercase
``"8-4-4-4-12"`` string; ``records`` as :class:`kwsniff.kafka.records.Records`;
arrays as lists; structs as dicts; null as None. Unknown tagged fields are kept as
``out["_unknown_tags"] = [(tag, bytes), ...]``.

Generated code is measured faster than interpreting the table per message (see
docs/protocol-coverage.md); it groups runs of fixed-size fields into one
``struct.unpack_from`` call. With the C kernel the function returned (without
spans) first tries :data:`cprogram.decode_fields` on a program of the same rows and runs
the generated code only where that declines (:mod:`cprogram`); results are identical.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

from kwsniff.kafka.protocol import cprogram
from kwsniff.kafka.protocol.cprogram import LazyPython, build_program, with_accelerator
from kwsniff.kafka.protocol.layout import FIXED as _FIXED
from kwsniff.kafka.protocol.layout import MAX_EMPTY_ELEMENTS, Layout
from kwsniff.kafka.protocol.schema import (
    F_CHILDREN,
    F_FLEX,
    F_NAME,
    F_NULLABLE,
    F_TYPE,
    F_VERSIONS,
    in_range,
)
from kwsniff.kafka.records import Records


class DecodeError(ValueError):
    """Malformed input found by a generated decoder (message says what and where)."""


DECODE_ERRORS = (DecodeError, struct.error, IndexError)

DecodeFn = Callable[[bytes, int, dict, list, list | None], int]


def uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint of at most 5 bytes at ``buf[pos]``: (value, new pos)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise DecodeError(f"unsigned varint longer than 5 bytes at offset {pos - 5}")


def uuid_text(b: bytes) -> str:
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_SMALL = 64
_ARRAY_UNPACKERS = {code: [struct.Struct(f">{n}{code}").unpack_from for n in range(_SMALL)]
                    for code, _ in _FIXED.values()}


def _unpack_array(code: str, n: int, buf: bytes, pos: int) -> list:
    if n < _SMALL:
        return list(_ARRAY_UNPACKERS[code][n](buf, pos))
    return list(struct.unpack_from(f">{n}{code}", buf, pos))


class _Compiler(Layout):
    def __init__(self, version: int, flexible: bool, with_spans: bool) -> None:
        super().__init__(version, flexible)
        self.spans = with_spans
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {
            "_Bad": DecodeError, "_uv": uvarint, "_uuid": uuid_text, "_Records": Records,
            "_arr": _unpack_array, "_ERRS": DECODE_ERRORS,
            "_h": struct.Struct(">h").unpack_from, "_i": struct.Struct(">i").unpack_from,
        }
        self.n = 0
        self._structs: dict[str, str] = {}

    # -- helpers
    def tmp(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def w(self, ind: int, text: str) -> None:
        self.lines.append("    " * ind + text)

    def unpacker(self, fmt: str) -> str:
        name = self._structs.get(fmt)
        if name is None:
            name = f"_s{len(self._structs)}"
            self._structs[fmt] = name
            self.ns[name] = struct.Struct(">" + fmt).unpack_from
        return name

    @staticmethod
    def path(parts: list[str], name: str | None = None) -> str:
        items = parts + ([repr(name)] if name is not None else [])
        return "(" + "".join(f"{p}, " for p in items) + ")"

    def span(self, ind: int, parts: list[str], name: str | None, start: str) -> None:
        if self.spans:
            self.w(ind, f"S.append(({self.path(parts, name)}, {start}, pos - {start}))")

    # -- structure
    def struct_body(self, fields: tuple, d: str, ind: int, parts: list[str], where: str) -> None:
        plain, tagged = self.present(fields)
        run: list[tuple] = []
        for f in plain:
            if f[F_TYPE] in _FIXED and f[F_CHILDREN] is None:
                run.append(f)
                continue
            self.fixed_run(run, d, ind, parts)
            run = []
            self.field(f, f"{d}[{f[F_NAME]!r}]", ind, parts, f[F_NAME], where)
        self.fixed_run(run, d, ind, parts)
        if self.flex:
            self.tag_section(tagged, d, ind, parts, where)

    def fixed_run(self, run: list[tuple], d: str, ind: int, parts: list[str]) -> None:
        if not run:
            return
        fmt = "".join(_FIXED[f[F_TYPE]][0] for f in run)
        un = self.unpacker(fmt)
        targets = ", ".join(f"{d}[{f[F_NAME]!r}]" for f in run)
        if len(run) == 1:
            self.w(ind, f"{targets} = {un}(buf, pos)[0]")
        else:
            self.w(ind, f"{targets} = {un}(buf, pos)")
        if self.spans:
            off = 0
            for f in run:
                size = _FIXED[f[F_TYPE]][1]
                self.w(ind, f"S.append(({self.path(parts, f[F_NAME])}, pos + {off}, {size}))")
                off += size
        self.w(ind, f"pos += {struct.calcsize('>' + fmt)}")

    def read_len(self, ind: int, var: str, compact: bool, wide: bool) -> None:
        """Length/count into ``var``: compact uvarint-1, else int16 (strings) or int32."""
        if compact:
            self.w(ind, f"{var} = buf[pos]")
            self.w(ind, "pos += 1")
            self.w(ind, f"if {var} > 127:")
            self.w(ind + 1, f"{var}, pos = _uv(buf, pos - 1)")
            self.w(ind, f"{var} -= 1")
        elif wide:
            self.w(ind, f"{var} = _i(buf, pos)[0]")
            self.w(ind, "pos += 4")
        else:
            self.w(ind, f"{var} = _h(buf, pos)[0]")
            self.w(ind, "pos += 2")

    def null_case(self, ind: int, row: tuple, var: str, target: str, label: str,
                  compact: bool) -> None:
        """``if var < 0``: null (or a problem when the field is not nullable)."""
        self.w(ind, f"if {var} < 0:")
        if not compact:
            self.w(ind + 1, f"if {var} != -1:")
            self.w(ind + 2, f"raise _Bad('{label}: negative length ' + str({var}))")
        if not in_range(self.v, row[F_NULLABLE]):
            self.w(ind + 1, f"P.append('{label}: null in a non-nullable field')")
        self.w(ind + 1, f"{target} = None")

    def field(self, row: tuple, target: str, ind: int, parts: list[str], name: str,
              where: str) -> None:
        t = row[F_TYPE]
        children = row[F_CHILDREN]
        label = f"{where}.{name}" if where else name
        start = self.tmp("p")
        if self.spans:
            self.w(ind, f"{start} = pos")
        compact = self.compact(row)
        if children is not None and t.startswith("[]"):
            self.array(row, target, ind, parts, name, label, compact, struct_elems=True)
        elif t.startswith("[]"):
            self.array(row, target, ind, parts, name, label, compact, struct_elems=False)
        elif children is not None:
            if in_range(self.v, row[F_NULLABLE]):
                self.w(ind, "if buf[pos] > 127:")
                self.w(ind + 1, f"{target} = None")
                self.w(ind + 1, "pos += 1")
                self.w(ind, "else:")
                self.w(ind + 1, "pos += 1")
                e = self.tmp("d")
                self.w(ind + 1, f"{e} = {target} = {{}}")
                self.struct_body(children, e, ind + 1, parts + [repr(name)], label)
            else:
                e = self.tmp("d")
                self.w(ind, f"{e} = {target} = {{}}")
                self.struct_body(children, e, ind, parts + [repr(name)], label)
        else:
            self.scalar(t, row, target, ind, label, compact)
        self.span(ind, parts, name, start)

    def scalar(self, t: str, row: tuple, target: str, ind: int, label: str,
               compact: bool) -> None:
        if t in _FIXED:
            code, size = _FIXED[t]
            self.w(ind, f"{target} = {self.unpacker(code)}(buf, pos)[0]")
            self.w(ind, f"pos += {size}")
        elif t == "uuid":
            self.w(ind, "if pos + 16 > L:")
            self.w(ind + 1, f"raise _Bad('{label}: truncated uuid')")
            self.w(ind, f"{target} = _uuid(buf[pos:pos + 16])")
            self.w(ind, "pos += 16")
        elif t in ("string", "bytes", "records"):
            n = self.tmp("n")
            self.read_len(ind, n, compact, wide=t != "string")
            self.null_case(ind, row, n, target, label, compact)
            self.w(ind, f"elif {n} > L - pos:")
            self.w(ind + 1, f"raise _Bad('{label}: length ' + str({n}) + ' exceeds the ' "
                            f"+ str(L - pos) + ' bytes left')")
            self.w(ind, "else:")
            if t == "string":
                value = f"buf[pos:pos + {n}].decode('utf-8', 'replace')"
            elif t == "bytes":
                value = f"buf[pos:pos + {n}]"
            else:
                value = f"_Records(buf[pos:pos + {n}])"
            self.w(ind + 1, f"{target} = {value}")
            self.w(ind + 1, f"pos += {n}")
        else:
            raise ValueError(f"unsupported type {t!r} in {label}")

    def array(self, row: tuple, target: str, ind: int, parts: list[str], name: str,
              label: str, compact: bool, struct_elems: bool) -> None:
        n = self.tmp("n")
        self.read_len(ind, n, compact, wide=True)
        self.null_case(ind, row, n, target, label, compact)
        elem_t = row[F_TYPE][2:]
        min_elem = self.elem_min_size(row, compact)
        if min_elem > 0:
            self.w(ind, f"elif {n} * {min_elem} > L - pos:")
            self.w(ind + 1, f"raise _Bad('{label}: ' + str({n}) + ' elements cannot fit in the ' "
                            f"+ str(L - pos) + ' bytes left')")
        else:
            self.w(ind, f"elif {n} > {MAX_EMPTY_ELEMENTS}:")
            self.w(ind + 1, f"raise _Bad('{label}: implausible element count ' + str({n}))")
        self.w(ind, "else:")
        ind += 1
        if not struct_elems and elem_t in _FIXED and not self.spans:
            code, size = _FIXED[elem_t]
            small = "_A" + ("bool" if code == "?" else code)
            self.ns[small] = _ARRAY_UNPACKERS[code]
            self.w(ind, f"{target} = list({small}[{n}](buf, pos)) if {n} < {_SMALL} "
                        f"else _arr({code!r}, {n}, buf, pos)")
            self.w(ind, f"pos += {n} * {size}")
            return
        a = self.tmp("a")
        i = self.tmp("i")
        self.w(ind, f"{a} = {target} = []")
        self.w(ind, f"for {i} in range({n}):")
        elem_parts = parts + [repr(name), i]
        if struct_elems:
            e = self.tmp("d")
            es = self.tmp("p")
            if self.spans:
                self.w(ind + 1, f"{es} = pos")
            self.w(ind + 1, f"{e} = {{}}")
            self.w(ind + 1, f"{a}.append({e})")
            self.struct_body(row[F_CHILDREN], e, ind + 1, elem_parts, f"{label}[]")
            if self.spans:
                self.w(ind + 1, f"S.append(({self.path(elem_parts)}, {es}, pos - {es}))")
        else:
            x = self.tmp("x")
            es = self.tmp("p")
            if self.spans:
                self.w(ind + 1, f"{es} = pos")
            elem_row = (name, elem_t, row[F_VERSIONS], None, None, None, row[F_FLEX],
                        None, None, None, "", None)
            self.scalar(elem_t, elem_row, x, ind + 1, f"{label}[]", compact)
            self.w(ind + 1, f"{a}.append({x})")
            if self.spans:
                self.w(ind + 1, f"S.append(({self.path(elem_parts)}, {es}, pos - {es}))")

    def tag_section(self, tagged: dict[int, tuple], d: str, ind: int, parts: list[str],
                    where: str) -> None:
        n = self.tmp("n")
        self.w(ind, f"{n} = buf[pos]")
        self.w(ind, "pos += 1")
        self.w(ind, f"if {n} > 127:")
        self.w(ind + 1, f"{n}, pos = _uv(buf, pos - 1)")
        self.w(ind, f"if {n}:")
        ind += 1
        self.w(ind, f"if {n} * 2 > L - pos:")
        self.w(ind + 1, f"raise _Bad('{where or 'body'}: ' + str({n}) + ' tagged fields cannot "
                        f"fit in the ' + str(L - pos) + ' bytes left')")
        loop = self.tmp("k")
        self.w(ind, f"for {loop} in range({n}):")
        ind += 1
        tag, size, end, start = self.tmp("t"), self.tmp("z"), self.tmp("e"), self.tmp("p")
        self.w(ind, f"{start} = pos")
        for var in (tag, size):
            self.w(ind, f"{var} = buf[pos]")
            self.w(ind, "pos += 1")
            self.w(ind, f"if {var} > 127:")
            self.w(ind + 1, f"{var}, pos = _uv(buf, pos - 1)")
        self.w(ind, f"if {size} > L - pos:")
        self.w(ind + 1, f"raise _Bad('{where or 'body'}: tagged field ' + str({tag}) + ' of ' "
                        f"+ str({size}) + ' bytes exceeds the ' + str(L - pos) + ' bytes left')")
        self.w(ind, f"{end} = pos + {size}")
        first = True
        for tnum in sorted(tagged):
            row = tagged[tnum]
            name = row[F_NAME]
            label = f"{where}.{name}" if where else name
            self.w(ind, f"{'if' if first else 'elif'} {tag} == {tnum}:")
            first = False
            self.w(ind + 1, "try:")
            self.field(row, f"{d}[{name!r}]", ind + 2, parts, name, where)
            self.w(ind + 1, "except _ERRS as exc:")
            self.w(ind + 2, f"{d}.pop({name!r}, None)")
            self.w(ind + 2, f"{d}.setdefault('_unknown_tags', []).append(({tag}, buf[{end} - {size}:{end}]))")
            self.w(ind + 2, f"P.append('{label} (tag {tnum}): cannot decode ' + str({size}) "
                            "+ ' bytes: ' + str(exc))")
            self.w(ind + 2, f"pos = {end}")
            self.w(ind + 1, f"if pos != {end}:")
            self.w(ind + 2, f"P.append('{label} (tag {tnum}): decoded ' + str(pos - {end} "
                            f"+ {size}) + ' of its ' + str({size}) + ' bytes')")
            self.w(ind + 2, f"pos = {end}")
        self.w(ind, "else:" if not first else "if True:")
        self.w(ind + 1, f"{d}.setdefault('_unknown_tags', []).append(({tag}, buf[pos:{end}]))")
        if self.spans:
            self.w(ind + 1, f"S.append(({self.path(parts, '_unknown_tags')} + "
                            f"(len({d}['_unknown_tags']) - 1,), {start}, {end} - {start}))")
        self.w(ind + 1, f"pos = {end}")


def compile_decoder(fields: tuple, version: int, flexible: bool, with_spans: bool = False,
                    name: str = "decode") -> DecodeFn:
    """Build the decode function for ``fields`` at ``version`` (see module docstring).
    With the C kernel (and no spans) the generated Python behind it is compiled
    only when first needed: where the C decoder declines, or when ``fn.python`` is
    called or ``fn.python.function()`` asked for (most messages never need it, and
    compiling costs ~1 ms per decoder at start-up)."""
    decode_fields = cprogram.decode_fields
    if decode_fields is not None and not with_spans:
        program = build_program(fields, version, flexible, Records)
        python = LazyPython(lambda: _generate(fields, version, flexible, False, name))
        return with_accelerator(python, program, decode_fields)
    return _generate(fields, version, flexible, with_spans, name)


def _generate(fields: tuple, version: int, flexible: bool, with_spans: bool,
              name: str) -> DecodeFn:
    """The generated Python decode function (``fn.source`` holds its source)."""
    c = _Compiler(version, flexible, with_spans)
    c.w(1, "L = len(buf)")
    c.struct_body(fields, "r", 1, [], "")
    c.w(1, "return pos")
    src = f"def {name}(buf, pos, r, P, S):\n" + "\n".join(c.lines) + "\n"
    code = compile(src, f"<kwsniff decoder {name} v{version}>", "exec")
    exec(code, c.ns)  # noqa: S102 - source generated above from the schema table only
    fn = c.ns[name]
    fn.source = src  # type: ignore[attr-defined]
    return fn
