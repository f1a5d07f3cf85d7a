"""Finding and loading plugins: directories, entry points, shadowing, broken plugins."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kwsniff.kafka import payload
from kwsniff.output.fields import FIELDS
from kwsniff.plugin_api import PluginManager
from kwsniff.plugin_api.manager import ACTIVE, DISABLED, FAILED, IDLE, SHADOWED, SHIPPED_DIR
from kwsniff.plugin_api.options import OptionError, PluginOptions

GOOD = """
DESCRIPTION = "upper-cases values"
OPTIONS = {"topics": "topics to upper-case"}

def register(api):
    api.payload_decoder(lambda data, where: data.decode().upper(),
                        topics=api.options.get_list("topics", ["*"]))
"""


def names(loaded) -> dict[str, str]:
    return {p.name: p.status for p in loaded}


def test_loads_a_directory_plugin(manager: PluginManager, plugin_dir, reports) -> None:
    d = plugin_dir("upper", GOOD)
    loaded = manager.load([d], shipped=False, entry_points=False)
    assert names(loaded) == {"upper": ACTIVE}
    assert loaded[0].description == "upper-cases values"
    assert payload.render_payload(b"abc", topic="t").text == "ABC"
    assert reports == []
    manager.close()
    assert payload.render_payload(b"abc", topic="t").text == "abc"
    assert payload.registered_decoders() == []


def test_package_plugins_and_ignored_files(manager: PluginManager, tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    (d / "pkgplug").mkdir(parents=True)
    (d / "pkgplug" / "__init__.py").write_text("from .impl import register\n")
    (d / "pkgplug" / "impl.py").write_text("def register(api):\n    api.report('hello')\n")
    (d / "_private.py").write_text("raise RuntimeError('never imported')\n")
    (d / "notes.txt").write_text("not a plugin")
    (d / "emptydir").mkdir()
    # (loaded; it registers nothing, so "loaded, disabled")
    assert names(manager.load([d], shipped=False, entry_points=False)) == {"pkgplug": IDLE}


def test_broken_plugins_are_reported_once_and_skipped(manager: PluginManager, plugin_dir,
                                                       reports) -> None:
    plugin_dir("a_syntax", "def register(api)\n    pass\n")
    plugin_dir("b_import", "import kwsniff_no_such_module\n")
    plugin_dir("c_raises", "def register(api):\n    raise ValueError('boom')\n")
    plugin_dir("d_noregister", "X = 1\n")
    plugin_dir("e_exit", "import sys\nsys.exit(3)\n")
    plugin_dir("f_badfield", "def register(api):\n"
                             "    api.payload_decoder(lambda d, w: None)\n"
                             "    api.exchange_field('Bad Name!', lambda ex: 1)\n")
    d = plugin_dir("g_good", GOOD)
    loaded = manager.load([d], shipped=False, entry_points=False)
    assert names(loaded) == {"a_syntax": FAILED, "b_import": FAILED, "c_raises": FAILED,
                             "d_noregister": FAILED, "e_exit": FAILED, "f_badfield": FAILED,
                             "g_good": ACTIVE}
    assert len(reports) == 6
    for plugin, text in [("a_syntax", "SyntaxError"),
                         ("b_import", "ModuleNotFoundError: No module named "
                                      "'kwsniff_no_such_module'"),
                         ("c_raises", "register() failed: ValueError: boom"),
                         ("d_noregister", "has no register(api) function"),
                         ("e_exit", "SystemExit: 3"),
                         ("f_badfield", "bad registration: field name")]:
        [line] = reports.matching(f"plugin {plugin} (")
        assert text in line and line.endswith("; skipped"), line
    # what the broken plugin registered before failing is gone; the good one works
    assert [n for n, _, _ in payload.registered_decoders()] == ["g_good"]
    assert payload.render_payload(b"ok", topic="t").text == "OK"


def test_disabled_plugins_are_not_imported(manager: PluginManager, plugin_dir) -> None:
    d = plugin_dir("broken", "raise RuntimeError('must not be imported')\n")
    loaded = manager.load([d], shipped=False, entry_points=False,
                          options={"broken": PluginOptions("broken", {"enabled": "false"})})
    assert names(loaded) == {"broken": DISABLED}


def test_option_mistakes_are_user_errors(manager: PluginManager, plugin_dir) -> None:
    d = plugin_dir("upper", GOOD)
    with pytest.raises(OptionError, match="plugin upper has no option topcs"):
        manager.load([d], shipped=False, entry_points=False,
                     options={"upper": PluginOptions("upper", {"topcs": "x"})})
    other = PluginManager(reporter=lambda m: None)
    try:
        with pytest.raises(OptionError, match="plugin option for uper: no such plugin"):
            other.load([d], shipped=False, entry_points=False,
                       options={"uper": PluginOptions("uper", {"x": "1"})})
    finally:
        other.close()
    with pytest.raises(OptionError, match="not a directory"):
        PluginManager().discover([d / "nope"])


def test_first_plugin_of_a_name_wins(manager: PluginManager, tmp_path: Path, reports) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    for d, text in ((first, "FIRST"), (second, "SECOND")):
        d.mkdir()
        (d / "dup.py").write_text(
            f"def register(api):\n    api.payload_decoder(lambda data, where: {text!r})\n")
    loaded = manager.load([first, second], shipped=False, entry_points=False)
    assert [(p.name, p.status) for p in loaded] == [("dup", ACTIVE), ("dup", SHADOWED)]
    assert payload.render_payload(b"x").text == "FIRST"
    assert len(reports.matching("is shadowed by")) == 1


def test_entry_point_plugins(manager: PluginManager, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution installed on sys.path declares its plugin in entry_points.txt."""
    site = tmp_path / "site"
    (site / "acme_kwsniff").mkdir(parents=True)
    (site / "acme_kwsniff" / "__init__.py").write_text(
        "def register(api):\n"
        "    api.payload_decoder(lambda data, where: {'acme': data.decode()}, "
        "topics=['acme.*'])\n")
    dist = site / "acme_kwsniff-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-kwsniff\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[kwsniff.plugins]\nacme = acme_kwsniff\n")
    monkeypatch.syspath_prepend(str(site))
    loaded = manager.load(shipped=False, entry_points=True)
    acme = [p for p in loaded if p.name == "acme"]
    assert [(p.status, p.source) for p in acme] == [(ACTIVE, "entry point acme = acme_kwsniff")]
    r = payload.render_payload(b"widget", topic="acme.orders")
    assert (r.kind, r.obj, r.decoder) == ("decoded", {"acme": "widget"}, "acme")
    sys.modules.pop("acme_kwsniff", None)


def _fake_dist(site: Path, name: str, entry_points: str | None) -> None:
    dist = site / f"{name}-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    if entry_points is not None:
        (dist / "entry_points.txt").write_text(entry_points)


def test_entry_point_precheck_agrees_with_importlib(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The ~1 ms pre-check says "none possible" only where importlib.metadata finds none;
    for every group some installed distribution declares it defers to importlib."""
    from importlib.metadata import distributions, entry_points

    from kwsniff.plugin_api.manager import no_entry_points_possible

    site = tmp_path / "site"
    _fake_dist(site, "other_tool", "[console_scripts]\nother = other_tool:main\n")
    _fake_dist(site, "no_eps", None)
    (site / "legacy.egg-info").write_text("Metadata-Version: 1.0\n")   # a one-file egg-info
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(tmp_path / "missing"))
    groups = {ep.group for d in distributions() for ep in d.entry_points}
    assert "console_scripts" in groups
    for group in sorted(groups) + ["kwsniff.plugins", "no.such.group"]:
        possible = not no_entry_points_possible(group)
        assert possible or not list(entry_points(group=group)), group
        if group in groups:
            assert possible, group
    assert no_entry_points_possible("no.such.group")


def test_entry_point_precheck_defers_on_unusual_paths(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A mention of the group, a zip or egg on sys.path, another distribution finder:
    importlib.metadata decides."""
    from kwsniff.plugin_api.manager import no_entry_points_possible

    group = "kwsniff.test.group"
    assert no_entry_points_possible(group)
    with monkeypatch.context() as m:
        site = tmp_path / "site"
        _fake_dist(site, "mentions", f"# [{group}] in a comment is enough to ask\n")
        m.syspath_prepend(str(site))
        assert not no_entry_points_possible(group)
    for name in ("bundle.zip", "thing-1.0.egg"):
        with monkeypatch.context() as m:
            target = tmp_path / name
            target.write_bytes(b"PK\x05\x06" + bytes(18))
            m.syspath_prepend(str(target))
            assert not no_entry_points_possible(group), name

    class Finder:
        def find_spec(self, *args: object) -> None:
            return None

        def find_distributions(self, *args: object) -> list:
            return []

    with monkeypatch.context() as m:
        m.setattr(sys, "meta_path", [Finder(), *sys.meta_path])
        assert not no_entry_points_possible(group)
    assert no_entry_points_possible(group)


def test_shipped_plugins_are_inert_until_configured(manager: PluginManager, reports) -> None:
    loaded = manager.load(entry_points=False)
    assert {p.name: p.status for p in loaded} == {
        "avro": IDLE, "json": IDLE, "protobuf": IDLE, "trace": IDLE}
    assert all(Path(p.source).parent == SHIPPED_DIR for p in loaded)
    assert payload.registered_decoders() == []
    assert not [f for f in FIELDS if "." in f and not f.startswith("tls.")]  # (built in)
    assert reports == []


def test_listing(manager: PluginManager, plugin_dir) -> None:
    d = plugin_dir("upper", GOOD)
    plugin_dir("broken", "raise ImportError('nope')\n")
    manager.load([d], shipped=False, entry_points=False,
                 options={"upper": PluginOptions("upper", {"topics": "t"})})
    text = "\n".join(manager.listing())
    assert "upper        active" in text and "upper.topics: topics to upper-case" in text
    assert "options given: topics='t'" in text
    assert "broken       failed" in text and "error: failed to load: ImportError: nope" in text
