"""An installed wheel, not the checkout: what ``pip install kwsniff`` users get.

Builds the wheel from the source tree (``pip wheel . --no-deps``, a few minutes: the C
kernels and the Cython modules are compiled), unpacks it into a directory and runs
kwsniff from there, with the checkout's editable install taken out of the import path
(the dependencies still come from the test environment). Checks:

* kwsniff is imported from the wheel, every C kernel loads and every module of
  ``kwsniff/_compiled.py`` runs compiled (the wheel carries the build's manifest and
  the sources the guard hashes);
* the package data a wheel must carry is there (schema tables, ``.tcss``, the export
  schema) and the shipped plugins are installed as data files;
* ``decode -V``, ``stats`` and ``export --records`` of sample captures print the same
  bytes as the checkout.

Slow (``--all``, CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kwsniff import _compiled

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ("rdkafka-consumer-group.pcap", "tansu-sasl.pcap", "rdkafka-produce-codecs.pcap")
COMMANDS = (["decode", "-V", "-j", "1"], ["stats"], ["export", "--records", "-o", "-", "-j", "1"])

pytestmark = pytest.mark.slow

# run kwsniff with the editable install's finder removed and the unpacked wheel first
_PRELUDE = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path
                    if "__editable__" not in (getattr(f, "__module__", "") or "")
                    and "__editable__" not in type(f).__module__]
sys.path[:] = [p for p in sys.path if p not in ("", {root!r})]
sys.path.insert(0, {site!r})
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(out), str(ROOT)], capture_output=True, text=True,
                           timeout=1800)
    assert build.returncode == 0, build.stderr[-4000:]
    wheels = list(out.glob("kwsniff-*.whl"))
    assert len(wheels) == 1, wheels
    target = out / "site"
    with zipfile.ZipFile(wheels[0]) as zf:
        zf.extractall(target)
    return target


def _python(site: Path, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    prelude = _PRELUDE.format(root=str(ROOT), site=str(site))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KWSNIFF_PURE")}
    return subprocess.run([sys.executable, "-c", prelude + code, *args], capture_output=True,
                          text=True, cwd=site.parent, env=env, timeout=600)


def test_the_wheel_carries_the_compiled_modules_and_data(site: Path) -> None:
    code = """
import importlib, json
import kwsniff, kwsniff._compiled as c
mods = [importlib.import_module(m) for m in c.MODULES]
from kwsniff.kafka.protocol import schema
print(json.dumps({"file": kwsniff.__file__,
                  "kernels": [k for k in c.KERNELS if c.kernel(k) is not None],
                  "compiled": [m.__name__ for m in mods if not m.__file__.endswith(".py")]}))
"""
    got = _python(site, code)
    assert got.returncode == 0, got.stderr[-4000:]
    info = json.loads(got.stdout)
    assert info["file"].startswith(str(site))
    assert sorted(info["kernels"]) == sorted(_compiled.KERNELS), "a C kernel did not load"
    assert sorted(info["compiled"]) == sorted(_compiled.MODULES)
    names = {p.name for p in (site / "kwsniff").rglob("*")}
    assert "export_schema.json" in names and "_compiled_manifest.json" in names
    assert any(n.endswith(".tcss") for n in names)
    data = next(site.glob("kwsniff-*.data"), None)
    assert data is not None
    shipped = {p.name for p in (data / "data" / "share" / "kwsniff" / "plugins").glob("*.py")}
    assert shipped == {p.name for p in (ROOT / "plugins").glob("*.py")}


@pytest.mark.parametrize("capture", CAPTURES)
def test_the_wheel_prints_what_the_checkout_prints(site: Path, capture: str) -> None:
    path = str(ROOT / "pcaps" / capture)
    for command in COMMANDS:
        args = [*command, "--no-default-plugins", path]
        wheel = _python(site, "import sys\nfrom kwsniff.cli import main\n"
                              "sys.exit(main(sys.argv[1:]))", *args)
        here = subprocess.run([sys.executable, "-m", "kwsniff", *args], capture_output=True,
                              text=True, cwd=ROOT, timeout=600)
        assert wheel.returncode == here.returncode == 0, (command, wheel.stderr[-2000:])
        assert wheel.stdout == here.stdout, command
        assert wheel.stderr == here.stderr, command
