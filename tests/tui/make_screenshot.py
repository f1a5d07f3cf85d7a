#!/usr/bin/env python3
"""Export the README screenshot of the TUI (docs/tui.svg) from the real app.

    .venv/bin/python tests/tui/make_screenshot.py [OUT.svg]

Opens tests/tui/data/consumer-group.pcap (a copy of pcaps/rdkafka-consumer-group.pcap),
selects the large Produce request, focuses its topic name in the detail tree (so the
hex view highlights its bytes) and saves an SVG screenshot (Textual's exporter).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from kwsniff.tui.app import KwsniffApp  # noqa: E402

SIZE = (150, 46)


async def shoot(out: Path) -> None:
    app = KwsniffApp(capture=str(HERE / "data" / "consumer-group.pcap"))
    async with app.run_test(size=SIZE) as pilot:
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
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "tui.svg"
    asyncio.run(shoot(out))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
