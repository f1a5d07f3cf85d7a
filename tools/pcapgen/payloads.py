"""Deterministic keys, values and headers for the scenarios (fixed seeds)."""

from __future__ import annotations

import json
import random


def random_bytes(length: int, seed: int) -> bytes:
    """Incompressible, reproducible bytes (same ``seed`` -> same bytes)."""
    return random.Random(seed).randbytes(length)


def order_json(n: int, padding: int = 0) -> bytes:
    """A small, compressible JSON document describing order ``n``."""
    doc = {
        "order_id": n,
        "customer": f"customer-{n % 7:03d}",
        "items": [{"sku": f"SKU-{(n * 31 + i) % 1000:04d}", "qty": (n + i) % 5 + 1}
                  for i in range(3)],
        "currency": "EUR",
        "note": "kwsniff sample " * padding,
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def repetitive_text(length: int, seed: int) -> bytes:
    """Highly compressible text of exactly ``length`` bytes."""
    rng = random.Random(seed)
    words = ["kafka", "broker", "partition", "offset", "record", "batch", "topic",
             "consumer", "producer", "replica"]
    out: list[str] = []
    size = 0
    while size < length:
        w = rng.choice(words)
        out.append(w)
        size += len(w) + 1
    return " ".join(out).encode()[:length]
