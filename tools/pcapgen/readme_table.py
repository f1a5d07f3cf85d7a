"""The capture table in pcaps/README.md, rebuilt from the manifests.

The table sits between ``<!-- captures-table:start -->`` and ``<!-- captures-table:end -->``;
``tools/make_pcaps.py`` rewrites it after generating, and ``tests/pcaps`` checks it.
"""

from __future__ import annotations

import json
from pathlib import Path

START = "<!-- captures-table:start -->"
END = "<!-- captures-table:end -->"


def _clients(doc: dict) -> str:
    libs: dict[str, int] = {}
    for c in doc["clients"]:
        lib = c["library"]
        if c.get("forced_api_version"):
            lib += f" (api_version {c['forced_api_version']})"
        libs[lib] = libs.get(lib, 0) + 1
    return ", ".join(f"{n} × {lib}" for lib, n in libs.items())


def _broker(doc: dict) -> str:
    b = doc["brokers"]
    name = f"{b[0]['software']} {b[0]['version']}"
    return name + (f", {len(b)} brokers" if len(b) > 1 else "")


def render(pcaps: Path, order: list[str]) -> str:
    rows = ["| capture | clients | broker | broker ports | bytes | packets | requests |",
            "|---|---|---|---|---|---|---|"]
    for name in order:
        path = pcaps / f"{name}.json"
        if not path.exists():
            continue
        doc = json.loads(path.read_text())
        cap = doc["capture"]
        rows.append(f"| `{doc['capture_file']}` | {_clients(doc)} | {_broker(doc)} | "
                    f"{', '.join(map(str, cap['ports']))} | {cap['file_size']} | "
                    f"{cap['packets_captured']} | {len(doc['requests'])} |")
    return "\n".join(rows)


def update(readme: Path, pcaps: Path, order: list[str]) -> bool:
    """Rewrite the table in ``readme``; False when the markers are missing."""
    text = readme.read_text()
    if START not in text or END not in text:
        return False
    head, rest = text.split(START, 1)
    _old, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{render(pcaps, order)}\n{END}{tail}")
    return True
