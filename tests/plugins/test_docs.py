"""The plugin examples of docs/plugins.md load and do what the text says."""

from __future__ import annotations

import re
import struct
from pathlib import Path

from plugin_common import ROOT

from kwsniff.kafka import payload
from kwsniff.kafka.protocol import decode_request, decode_response
from kwsniff.plugin_api import PluginManager


def test_doc_examples(manager: PluginManager, tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "plugins.md").read_text()
    for block in re.findall(r"```python\n(.*?)```", doc, re.S):
        name = re.match(r"# plugins/(\w+)\.py", block).group(1)
        (tmp_path / f"{name}.py").write_text(block)
    loaded = manager.load([tmp_path], shipped=False, entry_points=False)
    assert [(p.name, p.status) for p in loaded] == [("acme", "active"), ("orders", "active")]

    def s16(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    v0 = struct.pack(">hhi", 1000, 0, 1) + s16("c") + s16("yo") + struct.pack(">ii", 1, 5)
    v1 = struct.pack(">hhi", 1000, 1, 1) + s16("c") + b"\x00" + b"\x03yo" + b"\x02" + \
        struct.pack(">i", 5) + b"\x00"
    for raw in (v0, v1):
        msg = decode_request(raw)
        assert (msg.body, msg.problems) == ({"Message": "yo", "Targets": [5]}, [])
    resp = decode_response(struct.pack(">ihi", 1, 0, 1) + s16("yo"), 1000, 0)
    assert resp.body == {"ErrorCode": 0, "Echoes": ["yo"]}
    assert payload.render_payload(b"ORD1abc     00000012", topic="orders").obj == \
        {"format": "ord1", "data": {"id": "abc", "qty": 12}}
    assert payload.render_payload(b"ORD1", topic="orders").problems == \
        ["orders: ORD1 record shorter than 20 bytes"]
