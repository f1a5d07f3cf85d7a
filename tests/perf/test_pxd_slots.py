"""Every class a ``.pxd`` makes an extension type declares the attributes its ``.py``
lists in ``__slots__``: an attribute added to the source but not to the ``.pxd`` would
make the compiled class refuse it (AttributeError at run time, only when compiled)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kwsniff"
PXDS = sorted(PACKAGE.rglob("*.pxd"))


def _declared(pxd: str) -> dict[str, set[str]]:
    """``class -> attribute names`` of the ``cdef class`` blocks of a .pxd."""
    out: dict[str, set[str]] = {}
    current = None
    for line in pxd.splitlines():
        m = re.match(r"cdef class (\w+)", line)
        if m:
            current = out.setdefault(m.group(1), set())
            continue
        if current is None or not line.startswith("    "):
            if line.strip() and not line.startswith((" ", "#")):
                current = None
            continue
        m = re.match(r"\s+cdef (?:public |readonly )?([\w.\[\]]+(?: \w+)?) (\w+(?:, *\w+)*)$",
                     line)
        if m:
            current.update(n.strip() for n in m.group(2).split(","))
    return out


def _slots(source: str) -> dict[str, set[str]]:
    """``class -> __slots__`` of the classes of a module that list them literally."""
    out: dict[str, set[str]] = {}
    tree = ast.parse(source)
    constants = {}          # module-level NAME = (literal tuple), e.g. model._MESSAGE_FIELDS
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            try:
                constants[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__slots__" for t in stmt.targets):
                if isinstance(stmt.value, ast.Name) and stmt.value.id in constants:
                    value = constants[stmt.value.id]
                else:
                    try:
                        value = ast.literal_eval(stmt.value)
                    except ValueError:
                        continue
                out[node.name] = set(value)
    return out


def test_the_pxd_files_were_found() -> None:
    assert len(PXDS) >= 10


@pytest.mark.parametrize("pxd", PXDS, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_pxd_declares_every_slot(pxd: Path) -> None:
    declared = _declared(pxd.read_text())
    slots = _slots(pxd.with_suffix(".py").read_text())
    checked = [name for name in declared if name in slots]
    if pxd.name in ("model.pxd", "framing.pxd", "conv_release.pxd", "tree.pxd"):
        assert checked, f"{pxd.name}: no class with __slots__ found to check"
    for name, attrs in declared.items():
        if name in slots:
            missing = slots[name] - attrs
            assert not missing, f"{pxd.name}: {name} lacks {sorted(missing)}"
