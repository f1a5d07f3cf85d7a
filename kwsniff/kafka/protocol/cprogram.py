"""Schema rows -> the program the C field decoder runs (``decode_fields``), and that decoder.

Contract: :func:`build_program` turns one field list at one version into nested tuples
(below) following the same :class:`~kwsniff.kafka.protocol.layout.Layout` rules as the
generated Python decoders. :func:`with_accelerator` wraps a generated decoder so that
the kernel's :data:`decode_fields` (``kwsniff.kafka.protocol._fields``) decodes first; where the C decoder declines (malformed or
truncated input, a null in a non-nullable field, a tagged field that does not decode
exactly, a buffer that is not ``bytes``, a Python exception) it leaves ``out`` empty and
the generated Python decoder decodes the bytes, as it always did (that decoder is
built on first use: :class:`LazyPython`). Where the C decoder succeeds, ``out`` holds
what the Python decoder would have put there, key for key and in the same order, and
no problem was found (``tests/protocol/test_fields_kernel.py``). :data:`decode_fields`
and :data:`skim_fields` (the same walk for summary lines, used by
:mod:`kwsniff.output.skim`) are None when the kernel is not in use.

Program: a struct is ``(ops, flexible, tagged)``: the in-line fields in order, whether a
tagged-field section follows, and ``{tag: op}``. Ops (``name`` None for an array's
element):

* ``(FIXED, names, codes, size)``: a run of fixed-size fields (``struct`` codes, bytes)
* ``(STRING | BYTES | RECORDS, name, compact, nullable, records_class)``
* ``(UUID, name)``
* ``(STRUCT, name, nullable, struct)``
* ``(ARRAY, name, compact, nullable, min_elem, element_op)``
"""

from __future__ import annotations

from typing import Any, Callable

from kwsniff import _compiled
from kwsniff.kafka.protocol.layout import FIXED, Layout
from kwsniff.kafka.protocol.schema import F_CHILDREN, F_NAME, F_TYPE

OP_FIXED, OP_STRING, OP_BYTES, OP_RECORDS, OP_UUID, OP_STRUCT, OP_ARRAY = range(7)

#: the C kernel of this module (None: the generated Python decoders only)
_kernel = _compiled.kernel("kwsniff.kafka.protocol._fields")
#: ``decode_fields(buf, pos, out, program)``: end offset, or None (``out`` left empty)
decode_fields: Any = _kernel.decode_fields if _kernel is not None else None
#: ``skim_fields(buf, pos, program, errors)``: (body, end offset) or None
skim_fields: Any = _kernel.skim_fields if _kernel is not None else None

_SCALAR = {"string": OP_STRING, "bytes": OP_BYTES, "records": OP_RECORDS}


class _Builder(Layout):
    def __init__(self, version: int, flexible: bool, records: type) -> None:
        super().__init__(version, flexible)
        self.records = records

    def struct(self, fields: tuple) -> tuple:
        plain, tagged = self.present(fields)
        ops: list[tuple] = []
        run: list[tuple] = []
        for f in plain:
            if f[F_TYPE] in FIXED and f[F_CHILDREN] is None:
                run.append(f)
                continue
            if run:
                ops.append(self.fixed(run))
                run = []
            ops.append(self.field(f, f[F_NAME]))
        if run:
            ops.append(self.fixed(run))
        tags = {tag: (self.fixed([row]) if row[F_TYPE] in FIXED and row[F_CHILDREN] is None
                      else self.field(row, row[F_NAME]))
                for tag, row in tagged.items()}
        return (tuple(ops), self.flex, tags)

    @staticmethod
    def fixed(run: list[tuple]) -> tuple:
        codes = "".join(FIXED[f[F_TYPE]][0] for f in run)
        return (OP_FIXED, tuple(f[F_NAME] for f in run), codes.encode("ascii"),
                sum(FIXED[f[F_TYPE]][1] for f in run))

    def field(self, row: tuple, name: str | None) -> tuple:
        t = row[F_TYPE]
        children = row[F_CHILDREN]
        compact = self.compact(row)
        if t.startswith("[]"):
            elem_t = t[2:]
            if children is not None:
                elem = (OP_STRUCT, None, False, self.struct(children))
            elif elem_t in FIXED:
                code, size = FIXED[elem_t]
                elem = (OP_FIXED, None, code.encode("ascii"), size)
            else:
                elem = self.scalar(elem_t, None, compact, False)
            return (OP_ARRAY, name, compact, self.nullable(row),
                    self.elem_min_size(row, compact), elem)
        if children is not None:
            return (OP_STRUCT, name, self.nullable(row), self.struct(children))
        return self.scalar(t, name, compact, self.nullable(row))

    def scalar(self, t: str, name: str | None, compact: bool, nullable: bool) -> tuple:
        if t == "uuid":
            return (OP_UUID, name)
        op = _SCALAR.get(t)
        if op is None:
            raise ValueError(f"unsupported type {t!r} in {name}")
        return (op, name, compact, nullable, self.records if op == OP_RECORDS else None)


def build_program(fields: tuple, version: int, flexible: bool, records: type) -> tuple:
    """The C decoder's program for ``fields`` at ``version`` (see the module docstring);
    ``records`` is the class a ``records`` field's bytes are given to."""
    return _Builder(version, flexible, records).struct(fields)


class LazyPython:
    """A generated Python decoder built on its first call (or :meth:`function`):
    ``build()`` returns the function. Calls go to that function. Safe with threads
    (two first calls at once may both build it; either result is the same function)."""

    __slots__ = ("_build", "_fn")

    def __init__(self, build: Callable[[], Callable[..., int]]) -> None:
        self._build = build
        self._fn: Callable[..., int] | None = None

    def function(self) -> Callable[..., int]:
        """The generated function (built now if it was not yet)."""
        fn = self._fn
        if fn is None:
            fn = self._fn = self._build()
        return fn

    @property
    def built(self) -> bool:
        return self._fn is not None

    @property
    def source(self) -> str:
        return getattr(self.function(), "source", "")

    def __call__(self, buf: bytes, pos: int, out: dict, problems: list,
                 spans: Any = None) -> int:
        return self.function()(buf, pos, out, problems, spans)


def with_accelerator(python_fn: Callable[..., int], program: tuple,
                     decode_fields: Any) -> Callable[..., int]:
    """``python_fn`` (a function or a :class:`LazyPython`) with the C decoder tried
    first (see the module docstring); ``fn.python`` is ``python_fn``."""

    def decode(buf: bytes, pos: int, out: dict, problems: list, spans: Any = None) -> int:
        end = decode_fields(buf, pos, out, program)
        if end is None:
            return python_fn(buf, pos, out, problems, spans)
        return end

    decode.python = python_fn  # type: ignore[attr-defined]
    decode.program = program  # type: ignore[attr-defined]
    return decode


def python_function(fn: Callable[..., int]) -> Callable[..., int]:
    """The generated Python function behind a decoder ``fn`` (``fn`` itself when no C
    decoder runs first), built now if it was not yet."""
    python = getattr(fn, "python", fn)
    return python.function() if isinstance(python, LazyPython) else python
