#!/usr/bin/env python3
"""Keep the README's command examples what the commands really print.

Usage (from the repository root)::

    python tools/readme_examples.py            # check: exit 1 and list the differences
    python tools/readme_examples.py --update   # rewrite README.md from real runs

Every ```` ```console ```` block of README.md whose commands start with ``$ kwsniff``
is an example: the ``$`` lines are run (``kwsniff`` is this checkout's ``python -m
kwsniff``; shell pipes work), from the repository root, and the other lines are what
they print (standard output, then standard error). A line that is ``...`` once
stripped stands for lines left out; an ``...`` or ``…`` inside a line stands for text
left out of that line. Blocks whose commands start with ``#`` (``live``, which needs
root and traffic) are left alone.

Check: every shown line, in order, is a printed line (equal, or equal around its
elisions). Update: every shown line without an elision inside it is replaced by the
printed line most like it (the same in the same order, else the most similar one
after the previous match), so the examples follow the output when it changes; lines
with elisions inside are kept and must still match (fix those by hand).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
ELISION = re.compile(r"\.\.\.|…")
#: how alike (difflib ratio) a shown line and a printed one must be to be replaced
MIN_LIKENESS = 0.5


@dataclass
class Example:
    """One console block: its commands and the lines shown after them."""

    start: int                      # index in README lines of the first line after ```console
    commands: list[str]
    shown: list[tuple[int, str]] = field(default_factory=list)   # (README line index, text)


def examples(lines: list[str]) -> list[Example]:
    """The ``$ kwsniff`` console blocks of the README ``lines``."""
    out: list[Example] = []
    current: Example | None = None
    inside = False
    for i, line in enumerate(lines):
        if not inside:
            if line.strip() == "```console":
                inside = True
                current = Example(i + 1, [])
            continue
        if line.strip() == "```":
            inside = False
            if current is not None and current.commands:
                out.append(current)
            current = None
            continue
        if current is None:
            continue
        if line.startswith("$ "):
            current.commands.append(line[2:])
        elif line.startswith("# ") and not current.commands:
            current = None          # a root-only block (live): not run
        else:
            current.shown.append((i, line))
    return out


def run(command: str) -> list[str]:
    """What ``command`` prints (stdout, then stderr), run as the README shows it."""
    if not command.startswith("kwsniff "):
        raise ValueError(f"not a kwsniff command: {command}")
    shell = f"{sys.executable} -m " + command
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    env.pop("PYTHONUNBUFFERED", None)
    proc = subprocess.run(shell, shell=True, cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    return proc.stdout.splitlines() + proc.stderr.splitlines()


def _is_gap(text: str) -> bool:
    return text.strip() == "..."


def matches(shown: str, printed: str) -> bool:
    """Whether ``printed`` is ``shown`` with its elided parts filled in."""
    if shown == printed:
        return True
    parts = ELISION.split(shown)
    if len(parts) == 1:
        return False
    pattern = ".*".join(re.escape(p) for p in parts)
    return re.fullmatch(pattern, printed) is not None


def compare(example: Example, printed: list[str]) -> tuple[list[str], dict[int, str]]:
    """``(problems, replacements)``: shown lines not found in order in ``printed``, and
    the README line index -> printed line of the lines an update would change."""
    problems: list[str] = []
    replace: dict[int, str] = {}
    pos = 0
    for index, text in example.shown:
        if _is_gap(text):
            continue
        found = next((j for j in range(pos, len(printed)) if matches(text, printed[j])), None)
        if found is not None:
            pos = found + 1
            continue
        problems.append(f"README.md:{index + 1}: not printed by "
                        f"'{' | '.join(example.commands)}': {text}")
        if ELISION.search(text.strip().strip(".").strip()) is None:
            best, likeness = None, MIN_LIKENESS
            for j in range(pos, len(printed)):
                ratio = difflib.SequenceMatcher(None, text, printed[j]).ratio()
                if ratio > likeness:
                    best, likeness = j, ratio
            if best is not None:
                replace[index] = printed[best]
                pos = best + 1
    return problems, replace


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="rewrite README.md")
    args = parser.parse_args(argv)
    lines = README.read_text(encoding="utf-8").split("\n")
    problems: list[str] = []
    changed = 0
    for example in examples(lines):
        printed: list[str] = []
        for command in example.commands:
            printed.extend(run(command))
        found, replace = compare(example, printed)
        if args.update:
            for index, text in replace.items():
                lines[index] = text
                changed += 1
            found, _ = compare(Example(example.start, example.commands,
                                       [(i, lines[i]) for i, _ in example.shown]), printed)
        problems.extend(found)
    if args.update and changed:
        README.write_text("\n".join(lines), encoding="utf-8")
        print(f"README.md: {changed} example lines regenerated")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
