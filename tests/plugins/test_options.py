"""Plugin options: command line, TOML config file, typed access and mistakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kwsniff.plugin_api.options import (
    OptionError,
    PluginOptions,
    collect_options,
    load_config,
    parse_cli_option,
)


def test_cli_option_syntax() -> None:
    assert parse_cli_option("avro.schemas=dir/x") == ("avro", "schemas", "dir/x")
    assert parse_cli_option("protobuf.topics=a=b.C,d.*=e.F") == \
        ("protobuf", "topics", "a=b.C,d.*=e.F")
    assert parse_cli_option("json.topics=") == ("json", "topics", "")
    for bad in ("avro", "avro=x", "avro.=x", ".key=x", "9x.key=1", "a b.key=1"):
        with pytest.raises(OptionError, match="NAME.KEY=VALUE"):
            parse_cli_option(bad)


def test_typed_access() -> None:
    o = PluginOptions("p", {"on": "yes", "off": "0", "n": "12", "list": " a, b ,,c ",
                            "map": "orders=shop.Order, ev.*=shop.Event", "t": True,
                            "arr": ["x", "y"], "tbl": {"k": "v"}})
    assert o.get_bool("on") is True and o.get_bool("off") is False
    assert o.get_bool("t") is True and o.get_bool("missing", True) is True
    assert o.get_int("n") == 12 and o.get_int("missing") is None
    assert o.get_list("list") == ["a", "b", "c"] and o.get_list("arr") == ["x", "y"]
    assert o.get_list("missing", ["d"]) == ["d"]
    assert o.get_map("map") == {"orders": "shop.Order", "ev.*": "shop.Event"}
    assert o.get_map("tbl") == {"k": "v"} and o.get_map("missing") == {}
    assert o.get_str("n") == "12" and "n" in o and len(o) == 8


@pytest.mark.parametrize("call", [
    lambda o: o.get_bool("n"), lambda o: o.get_int("list"), lambda o: o.get_map("list"),
    lambda o: o.get_map("arr"), lambda o: o.get_list("tbl"), lambda o: o.get_str("tbl"),
])
def test_wrong_shapes_name_plugin_and_key(call) -> None:
    o = PluginOptions("myplug", {"n": "12", "list": "a,b", "arr": ["x"], "tbl": {"k": 1}})
    with pytest.raises(OptionError, match=r"plugin myplug: option \w+"):
        call(o)


def test_config_file_paths_resolve_against_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "conf" / "kw.toml"
    cfg.parent.mkdir()
    cfg.write_text('[avro]\nschemas = "schemas"\nids = {7 = "orders-value"}\n'
                   '[protobuf]\ndescriptors = ["a.desc", "/abs/b.desc"]\n')
    opts = collect_options(["avro.topics=x", "json.topics=j"], cfg, cwd=tmp_path / "cwd")
    assert opts["avro"].get_path("schemas") == cfg.parent / "schemas"
    assert opts["avro"].get_map("ids") == {"7": "orders-value"}
    assert opts["avro"].get_list("topics") == ["x"]
    assert opts["protobuf"].get_paths("descriptors") == [cfg.parent / "a.desc",
                                                         Path("/abs/b.desc")]
    assert set(opts) == {"avro", "protobuf", "json"}


def test_command_line_wins_and_resolves_against_cwd(tmp_path: Path) -> None:
    cfg = tmp_path / "kw.toml"
    cfg.write_text('[avro]\nschemas = "from-file"\n')
    opts = collect_options(["avro.schemas=from-cli"], cfg, cwd=tmp_path / "here")
    assert opts["avro"].get_path("schemas") == tmp_path / "here" / "from-cli"


def test_bad_config_files(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="cannot|No such"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[avro\nschemas=")
    with pytest.raises(OptionError, match="not valid TOML"):
        load_config(bad)
    flat = tmp_path / "flat.toml"
    flat.write_text('schemas = "x"\n')
    with pytest.raises(OptionError, match="must be a table"):
        load_config(flat)
