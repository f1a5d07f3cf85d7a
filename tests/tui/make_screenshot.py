#!/usr/bin/env python3
"""Export the screenshots of the TUI in docs/ from the real app.

    .venv/bin/python tests/tui/make_screenshot.py [OUT.svg [WIDTHxHEIGHT]]

Opens tests/tui/data/consumer-group.pcap (a copy of pcaps/rdkafka-consumer-group.pcap),
selects the large Produce request, focuses its topic name in the detail tree (so the
hex view highlights its bytes) and saves an SVG screenshot (Textual's exporter).
Without arguments it writes docs/tui.svg (150x46, the README picture) and the small
terminal sizes docs/tui-80x24.svg and docs/tui-100x30.svg.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from kwsniff.tui.app import KwsniffApp  # noqa: E402

SIZE = (150, 46)
SMALL = [(80, 24), (100, 30)]


async def shoot(out: Path, size: tuple[int, int] = SIZE) -> None:
    app = KwsniffApp(capture=str(HERE / "data" / "consumer-group.pcap"))
    async with app.run_test(size=size) as pilot:
        while not (app.loader.done and app.tree_root is not None):
            await pilot.pause(0.1)
        app.exchanges.focus()
        app.exchanges.cursor = 7                       # the 100 KiB Produce request
        while app.tree_root is None or app.tree_root.label != "Exchange 8":
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        tree = app.detail
        tree.focus()
        name = next(n for _, n in app.tree_root.walk()
                    if n.label == "Name" and n.message == "request")
        tree.focus_node(name)
        await pilot.pause(0.5)
        out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=out.name, path=str(out.parent))


def main() -> int:
    if len(sys.argv) > 1:
        size = SIZE
        if len(sys.argv) > 2:
            width, height = sys.argv[2].lower().split("x")
            size = (int(width), int(height))
        shots = [(Path(sys.argv[1]), size)]
    else:
        # one process per picture: a second app in one process can hang on exit
        docs = ROOT / "docs"
        for out, (w, h) in [(docs / "tui.svg", SIZE)] + \
                [(docs / f"tui-{w}x{h}.svg", (w, h)) for w, h in SMALL]:
            subprocess.run([sys.executable, __file__, str(out), f"{w}x{h}"], check=True)
        return 0
    for out, size in shots:
        asyncio.run(shoot(out, size))
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
