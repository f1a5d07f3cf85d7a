"""Reorderer: exchanges are released exactly when their key is below every open key,
however the owners move their open keys (up, down, closed, forgotten)."""

from __future__ import annotations

import random

import pytest

from kwsniff.kafka.model import Exchange
from kwsniff.kafka.ordering import Reorderer

IMPLEMENTATIONS = [Reorderer]


def _exchange() -> Exchange:
    return Exchange(index=0, stream=0, client=("a", 1), broker=("b", 2), status="paired")


@pytest.mark.parametrize("Reorderer", IMPLEMENTATIONS, ids=lambda c: c.__name__)
def test_release_follows_the_smallest_open_key(Reorderer: type) -> None:
    for seed in range(300):
        rnd = random.Random(seed)
        reorder = Reorderer(limit=1_000_000)
        owners = [object() for _ in range(rnd.randint(1, 5))]
        gone: set[int] = set()
        open_keys: dict[int, tuple] = {}
        waiting: list[tuple] = []
        key_of: dict[int, tuple] = {}
        t = 0
        for step in range(200):
            i = rnd.randrange(len(owners))
            op = rnd.random()
            if i in gone:
                continue
            if op < 0.4:
                t += rnd.randint(0, 3)
                key = (t + rnd.randint(-3, 5), i, 0, 0) if rnd.random() < 0.8 else None
                reorder.set_open(owners[i], key)
                if key is None:
                    open_keys.pop(i, None)
                else:
                    open_keys[i] = key
            elif op < 0.75:
                t += 1
                key = (t + rnd.randint(-4, 4), 100, 0, step)
                ex = _exchange()
                key_of[id(ex)] = key
                reorder.add(key, ex)
                waiting.append(key)
            elif op < 0.97:
                mark = min(open_keys.values()) if open_keys else None
                out = reorder.drain()
                expect = sorted(k for k in waiting if mark is None or k < mark)
                assert [key_of[id(ex)] for ex in out] == expect, seed
                waiting = [k for k in waiting if k not in expect]
            else:
                reorder.forget(owners[i])
                open_keys.pop(i, None)
                gone.add(i)
        assert [key_of[id(ex)] for ex in reorder.drain(final=True)] == sorted(waiting)
