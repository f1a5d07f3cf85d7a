"""The hooks plugins register: payload decoders, exchange fields, digests, and the
isolation of their failures (reported once, counted, never fatal)."""

from __future__ import annotations

import json

import pytest
from plugin_common import CAPTURE

from kwsniff.capture import open_capture
from kwsniff.engine import Engine, EngineOptions
from kwsniff.kafka import payload
from kwsniff.kafka.model import Exchange
from kwsniff.output.digest import digest
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.fields import FIELDS, field_help
from kwsniff.output.filter import compile_filter
from kwsniff.output.jsonl import ExportEncoder
from kwsniff.output.tree import build_tree, render_tree
from kwsniff.plugin_api import PluginManager
from kwsniff.plugin_api.context import PayloadWhere
from kwsniff.plugin_api.guard import json_problem


def capture_exchanges() -> list[Exchange]:
    with open_capture(str(CAPTURE)) as source:
        return list(Engine(EngineOptions(ports=(20192,))).run(source))


def produce_to(exchanges: list[Exchange], topic: str) -> Exchange:
    return next(ex for ex in exchanges if ex.api_key == 0
                and ExchangeFacts(ex).topics == [topic])


def load(manager: PluginManager, plugin_dir, source: str, name: str = "p", **options: str):
    from kwsniff.plugin_api.options import PluginOptions

    d = plugin_dir(name, source)
    loaded = manager.load([d], shipped=False, entry_points=False,
                          options={name: PluginOptions(name, options)} if options else None)
    return loaded[0]


# ----------------------------------------------------------------------------- payloads

def test_payload_decoder_sees_topic_part_and_header_key(manager, plugin_dir) -> None:
    load(manager, plugin_dir, """
        def register(api):
            api.payload_decoder(lambda data, where: {"where": list(where)},
                                topics=["orders", "ev.*"], parts=("key", "value"))
            api.payload_decoder(lambda data, where: {"hdr": where.header_key},
                                headers=["trace*"], name="hdr")
    """)
    r = payload.render_payload(b"x", topic="ev.1", partition=3, part="key")
    assert r.obj == {"where": ["ev.1", 3, "key", None]} and r.decoder == "p"
    assert payload.render_payload(b"x", topic="other").kind == "text"
    [(_, h1), (_, h2)] = payload.render_headers([("traceparent", b"v"), ("other", b"v")],
                                                topic="orders")
    assert (h1.obj, h1.decoder) == ({"hdr": "traceparent"}, "hdr") and h2.kind == "text"


def test_failing_payload_decoder_is_reported_once_and_counted(manager, plugin_dir,
                                                              reports) -> None:
    plugin = load(manager, plugin_dir, """
        def register(api):
            api.payload_decoder(lambda data, where: 1 / 0, name="divider")
    """)
    for _ in range(5):
        r = payload.render_payload(b'{"a": 1}', topic="t")
        assert r.kind == "json" and r.obj == {"a": 1}        # built-in view still works
        assert r.problems == ["payload decoder divider failed: ZeroDivisionError: "
                              "division by zero"]
    [line] = reports
    assert line.startswith("plugin p: payload decoder divider failed (topic 't', value): "
                           "ZeroDivisionError: division by zero; the data is shown undecoded")
    assert manager.close() == ["plugin p: payload decoder divider failed 5 times in all"]
    assert plugin.status == "active"


@pytest.mark.parametrize("result, why", [
    ("{1, 2}", "a set value ({1, 2}) is not JSON-like"),
    ("{('tuple', 'key'): 1}", "keys must be str, int, float, bool or None, not tuple"),
    ("{'x': [object()]}", "a object value"),
    ("__import__('functools').reduce(lambda a, _: [a], range(5000), [])",
     "nested more than 64 levels deep"),
    ("__import__('functools').reduce(lambda a, _: [a], range(64), [])",   # 65 levels
     "nested more than 64 levels deep"),
    ("(lambda d: d.setdefault('self', d))({})", "Circular reference detected"),
])
def test_bad_return_values_are_rejected(manager, plugin_dir, reports, result, why) -> None:
    load(manager, plugin_dir, f"""
        def register(api):
            api.payload_decoder(lambda data, where: {result})
    """)
    r = payload.render_payload(b"\x00\x01", topic="t")
    assert r.kind == "hex"
    assert len(r.problems) == 1 and why in r.problems[0]
    assert len(reports) == 1 and why in reports[0]


def test_a_value_nested_64_levels_deep_is_kept(manager, plugin_dir, reports) -> None:
    load(manager, plugin_dir, """
        import functools

        def register(api):
            api.payload_decoder(
                lambda data, where: functools.reduce(lambda a, _: [a], range(63), []))
    """)
    r = payload.render_payload(b"\x00\x01", topic="t")
    assert r.kind == "decoded" and not r.problems and not reports


def test_payload_problem_is_a_record_problem_not_a_plugin_failure(manager, plugin_dir,
                                                                   reports) -> None:
    load(manager, plugin_dir, """
        from kwsniff.plugin_api import PayloadProblem

        def register(api):
            def fmt(data, where):
                if not data.startswith(b"M1"):
                    return None
                if len(data) < 4:
                    raise PayloadProblem("M1 record too short")
                return {"m1": data[2:].decode()}
            api.payload_decoder(fmt, name="m1")
    """)
    assert payload.render_payload(b"M1ab").obj == {"m1": "ab"}
    assert payload.render_payload(b"M1").problems == ["m1: M1 record too short"]
    assert payload.render_payload(b"xyz").problems == []
    assert reports == []


def test_json_like_values() -> None:
    assert json_problem({"a": [1, 2.5, None, True, b"\x00", ("t", "u")], 3: "k"}) is None
    assert "not tuple" in json_problem({("k",): 1})


# ----------------------------------------------------------------------------- fields

FIELD_PLUGIN = """
from kwsniff.plugin_api import exchange_records, per_exchange

calls = []

def register(api):
    @per_exchange
    def keys(ex):
        calls.append(ex.index)
        return [r.key.decode() for _, _, _, r in exchange_records(ex) if r.key]

    api.exchange_field("keys", keys, multi=True, digest=True,
                       description="record keys of the exchange")
    api.exchange_field("nkeys", lambda ex: len(keys(ex)) or None, type="int")
    api.exchange_field("hidden", lambda ex: "x", export=False, tree=False)
"""


def test_exchange_fields_everywhere(manager, plugin_dir) -> None:
    load(manager, plugin_dir, FIELD_PLUGIN, name="kf")
    exchanges = capture_exchanges()
    ex = produce_to(exchanges, "plain-text")
    facts = ExchangeFacts(ex)
    # display filter (and --list-fields)
    assert compile_filter('kf.keys == "k" and kf.nkeys == 1').matches(facts)
    assert not compile_filter("kf.nkeys > 1").matches(facts)
    assert ("kf.keys", "string[]", "record keys of the exchange") in field_help()
    # export: nested by plugin, only export fields
    obj = ExportEncoder("c").exchange_object(ex)
    assert obj["plugins"] == {"kf": {"keys": ["k"], "nkeys": 1}}
    # digest (summary line) and tree
    assert digest(ex, facts).endswith(" kf.keys=k")
    lines = list(render_tree(build_tree(ex)))
    assert "    Plugin fields: 2" in lines and "        kf.keys: k" in lines
    assert not any("kf.hidden" in line for line in lines)
    # computed once per exchange although four views asked for it
    mod = [m for m in __import__("sys").modules.values()
           if getattr(m, "__file__", "") and m.__file__.endswith("/kf.py")][0]
    assert mod.calls.count(ex.index) == 1
    manager.close()
    assert "kf.keys" not in FIELDS and "plugins" not in ExportEncoder("c").exchange_object(ex)


def test_failing_and_badly_typed_fields(manager, plugin_dir, reports) -> None:
    load(manager, plugin_dir, """
        def register(api):
            api.exchange_field("boom", lambda ex: {}["missing"])
            api.exchange_field("typed", lambda ex: "not an int", type="int")
            api.exchange_field("multi", lambda ex: "not a list", multi=True)
    """, name="bad")
    ex = capture_exchanges()[0]
    obj = ExportEncoder("c").exchange_object(ex)
    assert obj["plugins"] == {"bad": {"boom": None, "typed": None, "multi": []}}
    assert not compile_filter("bad.typed == 1 or bad.boom").matches(ExchangeFacts(ex))
    assert len(reports) == 3
    assert "field bad.boom failed (exchange 1): KeyError: 'missing'" in reports[0]
    assert "returned str 'not an int', not int" in reports[1]
    assert "not a list (the field is multi-valued)" in reports[2]


def test_field_names_cannot_collide(manager, plugin_dir, reports) -> None:
    plugin = load(manager, plugin_dir, """
        def register(api):
            api.exchange_field("a", lambda ex: 1, type="int")
            api.exchange_field("a", lambda ex: 2, type="int")
    """, name="twice")
    assert plugin.status == "failed" and "already defined" in reports[0]
    assert "twice.a" not in FIELDS


# ----------------------------------------------------------------------------- digests

def test_digest_hook_with_fallback(manager, plugin_dir, reports) -> None:
    load(manager, plugin_dir, """
        def register(api):
            api.digest(0, request=lambda body, version, facts: f"custom v{version}",
                       response=lambda body, version, facts, req: 42)
    """, name="dg")
    ex = produce_to(capture_exchanges(), "plain-text")
    text = digest(ex)
    assert text == "custom v10 → ok"    # the bad response digest: the generic one
    assert len(reports) == 1 and "returned int, not a str" in reports[0]
    manager.close()
    assert digest(ex).startswith("plain-text[0]")


def test_where_is_a_tuple() -> None:
    w = PayloadWhere("t", 1, "header", "k")
    assert json.dumps(w) == '["t", 1, "header", "k"]'
