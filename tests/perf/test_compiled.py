"""The compiled hot path (``kwsniff/_compiled.py``): the guard, and identical output.

* The guard lets a module run compiled only while its source (``.py`` and ``.pxd``) has
  the hash the build recorded, and a C kernel run only while its C files have theirs;
  neither with ``KWSNIFF_PURE``.
* ``kwsniff`` run with its compiled modules and kernels and with ``KWSNIFF_PURE=1``
  (every module from source, no kernel) prints the
  same bytes (stdout and stderr) for ``decode`` (summary with 1 and 2 jobs, ``-V -x
  --offsets``), ``export --records`` and ``stats`` on sample captures: three in the
  default run, every one under ``--all``. Skipped when no module was compiled (no
  Cython or no C compiler at install time); under ``--all`` a machine with a C
  compiler must have built every module and kernel (``KWSNIFF_NO_CYTHON`` opts out).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kwsniff import _compiled

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted((ROOT / "pcaps").glob("*.pcap"))
QUICK = ("rdkafka-consumer-group.pcap", "tansu-sasl.pcap", "midstream.pcap")
COMMANDS = (
    ["decode"], ["decode", "-j", "1"], ["decode", "-j", "2"],
    ["decode", "-V", "-x", "--offsets", "-j", "1"],
    ["export", "--records", "-o", "-", "-j", "1"], ["stats"],
)


def _imports(env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """Under ``env``: the modules of :data:`_compiled.MODULES` that import compiled, and
    why the others run from source."""
    code = ("import importlib, json, kwsniff._compiled as c\n"
            "mods = [importlib.import_module(m) for m in c.MODULES]\n"
            "print(json.dumps([[m.__name__ for m in mods if not m.__file__.endswith('.py')],"
            " c.install().from_source]))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, cwd=ROOT)
    return tuple(json.loads(out.stdout))  # type: ignore[return-value]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k != "KWSNIFF_PURE"}
    env.update(extra)
    return env


COMPILED, FROM_SOURCE = _imports(_env())


def test_a_machine_that_builds_c_compiles_the_hot_path(request: pytest.FixtureRequest) -> None:
    if not request.config.getoption("--all"):
        pytest.skip("checked under --all (CI)")
    if os.environ.get("KWSNIFF_NO_CYTHON") or shutil.which("cc") is None:
        pytest.skip("no compiler at install time, or Cython builds switched off")
    # (a module edited since the build runs from source: that is the guard working)
    unbuilt = {m: why for m, why in FROM_SOURCE.items()
               if not why.startswith("source changed since the build")}
    assert COMPILED and not unbuilt, \
        f"a machine with a C compiler did not compile these hot-path modules: {unbuilt}"
    missing = [k for k in _compiled.KERNELS if k not in _compiled.read_manifest()]
    assert not missing, f"a machine with a C compiler did not build these kernels: {missing}"


def test_switched_off_nothing_runs_compiled() -> None:
    for env, why in ((_env(KWSNIFF_PURE="1"), "KWSNIFF_PURE is set"),):
        compiled, from_source = _imports(env)
        assert compiled == [] and from_source == dict.fromkeys(_compiled.MODULES, why)


def _run(args: list[str], capture: Path, env: dict[str, str]) -> tuple[int, bytes, bytes]:
    out = subprocess.run([sys.executable, "-m", "kwsniff", *args, str(capture)], env=env,
                         capture_output=True, cwd=ROOT, timeout=300)
    return out.returncode, out.stdout, out.stderr


@pytest.mark.skipif(not COMPILED, reason="no module was compiled (Cython build not done)")
@pytest.mark.parametrize("capture", [
    pytest.param(c, marks=() if c.name in QUICK else pytest.mark.slow, id=c.name)
    for c in CAPTURES])
def test_compiled_and_source_print_the_same(capture: Path) -> None:
    compiled, source = _env(), _env(KWSNIFF_PURE="1")
    keys = capture.with_suffix(".keys")         # a TLS sample capture: decrypt it
    extra = ["--tls-keylog", str(keys)] if keys.is_file() else []
    for args in COMMANDS:
        args = [*args, *extra]
        a, b = _run(args, capture, compiled), _run(args, capture, source)
        assert a[0] == b[0] == 0, (args, a[2][-500:], b[2][-500:])
        assert a[1] == b[1], f"stdout of kwsniff {' '.join(args)} differs"
        assert a[2] == b[2], f"stderr of kwsniff {' '.join(args)} differs"
        assert a[1], args


# ---------------------------------------------------------------------------- the guard

def _tree(tmp_path: Path, text: str = "X = 1\n") -> Path:
    src = tmp_path / "engine.py"
    src.write_text(text)
    return tmp_path


def test_guard_lets_the_build_run_only_while_the_source_is_unchanged(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    recorded = _compiled.source_hash(str(root / "engine.py"))
    guard = _compiled.Guard({"kwsniff.engine": recorded}, None, str(root))
    assert guard.reason("kwsniff.engine", str(root / "engine.py")) is None
    assert guard.find_spec("kwsniff.engine") is None            # the normal import
    assert guard.compiled == ["kwsniff.engine"]
    (root / "engine.py").write_text("X = 2\n")
    spec = guard.find_spec("kwsniff.engine")
    assert spec is not None and spec.origin == str(root / "engine.py")
    assert "source changed since the build" in guard.from_source["kwsniff.engine"]


def test_guard_without_a_build_or_switched_off(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    recorded = _compiled.source_hash(str(root / "engine.py"))
    assert _compiled.Guard({}, None, str(root)).reason(
        "kwsniff.engine", str(root / "engine.py")) == "not compiled"
    off = _compiled.Guard({"kwsniff.engine": recorded}, "KWSNIFF_PURE is set", str(root))
    assert off.find_spec("kwsniff.engine").origin == str(root / "engine.py")
    assert off.find_spec("kwsniff.cli") is None                  # not one of MODULES


@pytest.mark.parametrize("environ, why", [
    ({}, None), ({"KWSNIFF_PURE": "0"}, None), ({"KWSNIFF_PURE": ""}, None),
    ({"KWSNIFF_PURE": "1"}, "KWSNIFF_PURE is set"),
])
def test_environment_switches(environ: dict[str, str], why: str | None) -> None:
    assert _compiled.disabled_reason(environ) == why


def test_a_pxd_beside_a_module_is_part_of_its_hash(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    alone = _compiled.source_hash(_compiled.module_files("kwsniff.engine", str(root)))
    assert alone == _compiled.source_hash(str(root / "engine.py"))
    (root / "engine.pxd").write_text("cdef class Engine:\n    pass\n")
    files = _compiled.module_files("kwsniff.engine", str(root))
    assert files == [str(root / "engine.py"), str(root / "engine.pxd")]
    recorded = _compiled.source_hash(files)
    guard = _compiled.Guard({"kwsniff.engine": recorded}, None, str(root))
    assert guard.reason("kwsniff.engine", str(root / "engine.py")) is None
    (root / "engine.pxd").write_text("cdef class Engine:\n    cdef int x\n")
    assert "source changed" in guard.reason("kwsniff.engine", str(root / "engine.py"))


def test_the_pxd_files_a_pxd_cimports_are_part_of_its_hash(tmp_path: Path) -> None:
    """A module compiles in the extension types it cimports: when their module changes
    (.py or .pxd, transitively), its build is stale too."""
    root = _tree(tmp_path)
    kafka = root / "kafka"
    kafka.mkdir()
    (root / "engine.pxd").write_text("from kwsniff.kafka.conversation cimport Conversation\n")
    (kafka / "conversation.pxd").write_text(
        "from kwsniff.kafka.conv_state cimport Context\ncdef class Conversation:\n    pass\n")
    (kafka / "conv_state.pxd").write_text("cdef class Context:\n    pass\n")
    (kafka / "conversation.py").write_text("X = 1\n")
    (kafka / "conv_state.py").write_text("X = 1\n")
    files = _compiled.module_files("kwsniff.engine", str(root))
    assert files == [str(root / "engine.py"), str(root / "engine.pxd"),
                     str(kafka / "conversation.py"), str(kafka / "conversation.pxd"),
                     str(kafka / "conv_state.py"), str(kafka / "conv_state.pxd")]
    guard = _compiled.Guard({"kwsniff.engine": _compiled.source_hash(files)}, None, str(root))
    assert guard.reason("kwsniff.engine", str(root / "engine.py")) is None
    (kafka / "conv_state.py").write_text("X = 2\n")      # it runs from source: so must this
    assert "source changed" in guard.reason("kwsniff.engine", str(root / "engine.py"))
    (kafka / "conv_state.py").write_text("X = 1\n")
    assert guard.reason("kwsniff.engine", str(root / "engine.py")) is None
    (kafka / "conv_state.pxd").write_text("cdef class Context:\n    cdef int x\n")
    assert "source changed" in guard.reason("kwsniff.engine", str(root / "engine.py"))


def test_a_kernel_runs_only_from_the_c_files_it_was_built_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rel in _compiled.KERNELS["kwsniff.kafka._records"]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"/* {rel} */\n")
    files = _compiled.kernel_files("kwsniff.kafka._records", str(tmp_path))
    recorded = _compiled.source_hash(files)
    guard = _compiled.Guard({"kwsniff.kafka._records": recorded}, None, str(tmp_path))
    monkeypatch.setattr(_compiled, "_guard", guard)
    imported: list[str] = []
    monkeypatch.setattr(_compiled.importlib, "import_module",
                        lambda name: imported.append(name) or name)
    assert _compiled.kernel("kwsniff.kafka._records") == "kwsniff.kafka._records"
    (tmp_path / "kafka" / "_bytes.h").write_text("/* edited */\n")   # a header counts
    assert _compiled.kernel("kwsniff.kafka._records") is None
    assert "C source changed" in _compiled.kernels_unused["kwsniff.kafka._records"]
    assert _compiled.kernel("kwsniff.capture._pcap") is None
    assert _compiled.kernels_unused["kwsniff.capture._pcap"] == "not built"
    guard.disabled = "KWSNIFF_PURE is set"
    (tmp_path / "kafka" / "_bytes.h").write_text("/* kafka/_bytes.h */\n")
    assert _compiled.kernel("kwsniff.kafka._records") is None
    assert imported == ["kwsniff.kafka._records"]


def test_manifest_reading(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    assert _compiled.read_manifest(str(path)) == {}
    path.write_text("{not json")
    assert _compiled.read_manifest(str(path)) == {}
    path.write_text(json.dumps({"modules": {"kwsniff.engine": "ab", "x": 3}}))
    assert _compiled.read_manifest(str(path)) == {"kwsniff.engine": "ab"}


def test_every_listed_module_exists_and_the_list_has_no_repeats() -> None:
    assert len(set(_compiled.MODULES)) == len(_compiled.MODULES)
    for name in _compiled.MODULES:
        assert Path(_compiled.source_path(name)).is_file(), name
