"""Where the shipped plugins are found: the source tree's ``plugins/``, or the copy a wheel
installs under ``<prefix>/share/kwsniff/plugins`` — never a ``plugins`` directory that
merely sits next to an installed package."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kwsniff.plugin_api.manager import SHIPPED_DIR, shipped_dir

ROOT = Path(__file__).resolve().parents[2]


def _package(root: Path, pyproject: str | None, plugins: bool = True) -> str:
    (root / "kwsniff").mkdir(parents=True)
    (root / "kwsniff" / "__init__.py").write_text("")
    if plugins:
        (root / "plugins").mkdir()
    if pyproject is not None:
        (root / "pyproject.toml").write_text(pyproject)
    return str(root / "kwsniff" / "__init__.py")


def test_the_checkout_uses_its_plugins_directory() -> None:
    assert SHIPPED_DIR == ROOT / "plugins"
    assert shipped_dir() == ROOT / "plugins"


def test_an_installed_package_uses_the_installed_copy(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    package = _package(site, None)                 # e.g. another distribution's plugins/
    assert shipped_dir(package, str(tmp_path / "prefix")) == \
        tmp_path / "prefix" / "share" / "kwsniff" / "plugins"


def test_a_tree_of_another_project_is_not_ours(tmp_path: Path) -> None:
    package = _package(tmp_path / "other", '[project]\nname = "something-else"\n')
    assert shipped_dir(package, "/p") == Path("/p/share/kwsniff/plugins")
    ours = _package(tmp_path / "ours", '[project]\nname = "kwsniff"\n')
    assert shipped_dir(ours, "/p") == tmp_path / "ours" / "plugins"
    bare = _package(tmp_path / "bare", '[project]\nname = "kwsniff"\n', plugins=False)
    assert shipped_dir(bare, "/p") == Path("/p/share/kwsniff/plugins")


@pytest.mark.slow
def test_the_wheel_carries_every_shipped_plugin(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc")
    shutil.copytree(ROOT / "kwsniff", src / "kwsniff", ignore=ignore)
    shutil.copytree(ROOT / "plugins", src / "plugins", ignore=ignore)
    out = tmp_path / "wheel"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "-w", str(out), str(src)], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [wheel] = out.glob("kwsniff-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(p.name for p in (ROOT / "plugins").glob("*.py"))
    assert shipped
    carried = sorted(Path(n).name for n in names if "/data/share/kwsniff/plugins/" in n)
    assert carried == shipped
