"""Every decoding command takes the plugin options (one shared helper) and loads plugins
for its run; option mistakes are one-line user errors."""

from __future__ import annotations

import pytest
from plugin_common import CAPTURE, CONFIG

from kwsniff.cli import main
from kwsniff.kafka import payload
from kwsniff.plugin_api import active_manager

COMMANDS = [["decode"], ["export", str(CAPTURE), "-o", "-"], ["stats", str(CAPTURE)],
            ["live"], ["tui"]]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
def test_every_command_lists_its_plugins(argv: list[str],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--list-plugins", "--plugin-config", str(CONFIG),
                 "--plugin-opt", "json.topics=x"]) == 0
    out, err = capsys.readouterr()
    assert "json         active " in out and "options given: topics='x'" in out, err
    assert "avro.schemas:" in out
    # the session is over: nothing stays registered
    assert payload.registered_decoders() == [] and active_manager() is None


@pytest.mark.parametrize("argv, message", [
    (["--plugin-opt", "json"], "expected NAME.KEY=VALUE"),
    (["--plugin-opt", "jsno.topics=x"], "plugin option for jsno: no such plugin"),
    (["--plugin-opt", "json.topcs=x"], "plugin json has no option topcs"),
    (["--plugins", "/nonexistent/dir"], "--plugins /nonexistent/dir: not a directory"),
    (["--plugin-config", "/nonexistent.toml"], "--plugin-config /nonexistent.toml:"),
    # values a plugin rejects stop the command too (docs/plugins.md)
    (["--plugin-opt", "trace.enabled=maybe"],
     "plugin trace: option enabled: expected true or false, got 'maybe'"),
    (["--plugin-opt", "avro.schemas=/nonexistent"],
     "plugin avro: option schemas: /nonexistent is not a directory"),
])
def test_option_mistakes(argv: list[str], message: str,
                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", str(CAPTURE), *argv]) == 2
    _, err = capsys.readouterr()
    assert err.startswith("kwsniff decode: ") and message in err and "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert payload.registered_decoders() == []


def test_listing_tells_loaded_from_active(capsys: pytest.CaptureFixture[str]) -> None:
    """A plugin that does nothing until an option turns it on is "loaded, disabled"."""
    assert main(["decode", "--list-plugins"]) == 0
    out = capsys.readouterr().out
    for name in ("avro", "json", "protobuf", "trace"):
        assert f"{name:<12} loaded, disabled " in out, out
    assert main(["decode", "--list-plugins", "--plugin-opt", "trace.enabled=true"]) == 0
    out = capsys.readouterr().out
    assert f"{'trace':<12} active " in out and f"{'avro':<12} loaded, disabled " in out


def test_no_default_plugins(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", "--list-plugins", "--no-default-plugins"]) == 0
    assert capsys.readouterr().out == "no plugins found\n"
