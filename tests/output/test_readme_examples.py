"""The README's ``$ kwsniff ...`` examples are what the commands print
(tools/readme_examples.py; ``--update`` regenerates them from real runs)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("readme_examples",
                                                  ROOT / "tools" / "readme_examples.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_examples"] = module
    spec.loader.exec_module(module)
    return module


def test_readme_examples_are_real_output(capsys) -> None:  # noqa: ANN001
    tool = _tool()
    lines = (ROOT / "README.md").read_text(encoding="utf-8").split("\n")
    blocks = tool.examples(lines)
    assert len(blocks) >= 8                      # decode, -Y, -V, -x, stats x2, export, protocols
    code = tool.main([])
    assert code == 0, capsys.readouterr().out


def test_elisions_and_updates() -> None:
    tool = _tool()
    assert tool.matches("a ... z", "a b c z") and tool.matches('{"x":1,...}', '{"x":1,"y":2}')
    assert not tool.matches("a ... z", "a b c y")
    example = tool.Example(0, ["kwsniff x"], [(5, "   28 0.5 JoinGroup 300.7 ms"), (6, "   ..."),
                                               (7, "done ...")])
    printed = ["   27 0.4 Heartbeat 0.05 ms", "   28 0.5 JoinGroup 300.72 ms", "done 3"]
    problems, replace = tool.compare(example, printed)
    assert len(problems) == 1 and replace == {5: "   28 0.5 JoinGroup 300.72 ms"}
