"""The accelerator's reorder buffer (``kwsniff._speedups.Reorder``) gives exactly what
its Python twin (:class:`kwsniff.kafka.ordering.PyReorderer`) gives: the same exchanges
released in the same order with the same indexes and problems, the same force calls,
counters and errors, on random runs of owners that open, move and close keys, overflow
the buffer and give things up; keys of other shapes (huge ints, other lengths) are
ordered as Python orders them. Skipped when the accelerator is not built."""

from __future__ import annotations

import gc
import random
import weakref
from typing import Any

import pytest

from kwsniff import accel
from kwsniff.kafka.ordering import PyReorderer, Reorderer

C = accel.speedups
pytestmark = pytest.mark.skipif(C is None, reason=f"accelerator not in use: {accel.status}")


class Ex:
    """A stand-in exchange: what the buffer touches (index, problems)."""

    __slots__ = ("name", "index", "problems")

    def __init__(self, name: str) -> None:
        self.name = name
        self.index = 0
        self.problems: list[str] = []


class Owner:
    """A conversation-like owner: it waits for ``items`` (order keys); forced, it gives
    up the oldest one as an exchange (as a request reported unanswered), or refuses."""

    def __init__(self, sim: "Sim", n: int) -> None:
        self.sim, self.n = sim, n
        self.items: list[tuple] = []
        self.refuse = False

    def open_key(self) -> tuple | None:
        return min(self.items) if self.items else None

    def force(self) -> bool:
        self.sim.log.append(("force", self.n, len(self.items), self.refuse))
        if self.refuse or not self.items:
            return False
        key = min(self.items)
        self.items.remove(key)
        self.sim.reorder.add(key, Ex(f"forced {key}"))
        self.sim.reorder.set_open(self, self.open_key())
        return True


class Sim:
    def __init__(self, impl: type, limit: int) -> None:
        self.reorder = impl(limit)
        self.log: list[Any] = []


def _run(impl: type, seed: int) -> list[Any]:
    rnd = random.Random(seed)
    sim = Sim(impl, rnd.choice([3, 5, 20, 1000]))
    owners = [Owner(sim, i) for i in range(rnd.randint(1, 6))]
    for o in owners:
        sim.reorder.register(o, o.force)
    t = 0
    for step in range(300):
        o = owners[rnd.randrange(len(owners))]
        op = rnd.random()
        if op < 0.3:                      # a new item to wait for
            t += rnd.randint(0, 2)
            o.items.append((t + rnd.randint(-2, 3), o.n, rnd.randint(0, 1), step))
            sim.reorder.set_open(o, o.open_key())
        elif op < 0.55 and o.items:       # an item completes: an exchange
            key = o.items.pop(rnd.randrange(len(o.items)))
            sim.reorder.add(key, Ex(f"done {key}"))
            sim.reorder.set_open(o, o.open_key())
        elif op < 0.62:                   # an exchange of nobody's item
            t += 1
            sim.reorder.add((t + rnd.randint(-6, 2), 99, 0, step), Ex(f"free {step}"))
        elif op < 0.66:
            o.refuse = not o.refuse
        elif op < 0.69:
            sim.reorder.forget(o)
            o.items.clear()
        elif op < 0.72:                   # the same open key again: nothing changes
            sim.reorder.set_open(o, o.open_key())
        else:
            dirty = sim.reorder.dirty
            out = sim.reorder.drain()
            sim.log.append(("drain", dirty, [(e.name, e.index, tuple(e.problems)) for e in out]))
        sim.log.append(("state", len(sim.reorder), bool(sim.reorder.ready), sim.reorder.dirty))
    out = sim.reorder.drain(final=True)
    sim.log.append(("final", [(e.name, e.index, tuple(e.problems)) for e in out]))
    r = sim.reorder
    sim.log.append(("counters", r.next_index, r.forced, r.out_of_order, r.last_key, len(r)))
    return sim.log


@pytest.mark.parametrize("seed", range(400))
def test_same_releases_forces_and_counters_as_the_python_twin(seed: int) -> None:
    assert _run(C.Reorder, seed) == _run(PyReorderer, seed)


def test_the_engine_uses_the_c_copy_and_its_frame_sink_reads_it() -> None:
    from kwsniff import engine as engine_mod
    from kwsniff.engine import Engine

    assert Reorderer is C.Reorder
    assert type(Engine().ctx.reorder) is C.Reorder
    assert engine_mod._FRAME_SINK is not None


@pytest.mark.parametrize("keys", [
    [(2**70, 0, 0, 0), (5, 0, 0, 0), (2**64, 1, 0, 0), (-(2**65), 0, 0, 1)],
    [(1, 2), (1, 2, 3, 4, 5), (0, 9, 9, 9), (1, 2, 3, 4)],
    [(3, 0, 0, 2**63), (3, 0, 0, 2**63 - 1), (3, 0, 0, -(2**63)), (3, 0, 0, 0)],
])
def test_keys_outside_int64_are_ordered_as_python_orders_them(keys: list[tuple]) -> None:
    def run(impl: type) -> list[Any]:
        r = impl(100)
        owner = object()
        r.set_open(owner, min(keys))
        exs = [Ex(str(k)) for k in keys]
        for k, ex in zip(keys, exs):
            r.add(k, ex)
        first = [e.name for e in r.drain()]
        r.set_open(owner, max(keys))
        second = [e.name for e in r.drain()]
        r.add(min(keys), Ex("late"))        # below one released: out of order
        late = [(e.name, e.problems) for e in r.drain(final=True)]
        return [first, second, late, r.out_of_order, r.last_key]

    assert run(C.Reorder) == run(PyReorderer)
    assert run(C.Reorder)[2][0][1] == ["released out of capture order (reorder buffer limit)"]


def test_incomparable_keys_raise_as_in_python() -> None:
    for impl in (C.Reorder, PyReorderer):
        r = impl(10)
        r.add((1, 0, 0, 0), Ex("a"))
        with pytest.raises(TypeError):
            r.add(("x", 0, 0, 0), Ex("b"))
        with pytest.raises(TypeError):
            r.drain(final=True)


def test_a_force_callback_that_raises_reaches_the_caller() -> None:
    def boom() -> bool:
        raise RuntimeError("boom")

    for impl in (C.Reorder, PyReorderer):
        r = impl(1)
        owner = object()
        r.register(owner, boom)
        r.set_open(owner, (0, 0, 0, 0))
        r.add((1, 0, 0, 0), Ex("a"))
        r.add((2, 0, 0, 0), Ex("b"))
        with pytest.raises(RuntimeError, match="boom"):
            r.drain()


def test_marks_stay_bounded_and_cycles_are_collected() -> None:
    r = C.Reorder(10)

    class Conv:
        pass

    owner = Conv()
    owner.reorder = r                       # owner -> buffer -> owner: a cycle
    r.register(owner, lambda: False)
    for i in range(20_000):
        r.set_open(owner, (i, 0, 0, 0))
    assert r.marks <= 1024 + 4 + 1
    alive = weakref.ref(owner)
    del owner, r
    gc.collect()
    assert alive() is None


def test_constructor_and_attributes() -> None:
    r = C.Reorder()
    assert (r.limit, r.dirty, r.next_index, r.forced, r.out_of_order, r.ready, len(r),
            r.last_key) == (10_000, False, 1, 0, 0, 0, 0, None)
    r = C.Reorder(limit=7)
    r.next_index = 40
    ex = Ex("x")
    r.add((1, 1, 1, 1), ex)
    assert r.dirty and r.ready == 1 and len(r) == 1
    assert r.drain() == [ex] and ex.index == 40 and r.next_index == 41 and not r.dirty
    with pytest.raises(TypeError):
        r.add((1, 1, 1, 1))
    with pytest.raises(TypeError):
        C.Reorder("many")


def test_a_comparison_that_calls_back_gets_an_error_not_a_changed_heap() -> None:
    r = C.Reorder(100)

    class Meddler:
        """A key element whose comparison adds to the buffer (and so would change the
        heap being sifted)."""

        def __init__(self, n: int) -> None:
            self.n = n

        def __eq__(self, other: object) -> bool:
            r.add((0, 0, 0, 0), Ex("meddled"))
            return isinstance(other, Meddler) and other.n == self.n

        def __lt__(self, other: "Meddler") -> bool:
            return self.n < other.n

        __hash__ = object.__hash__

    r.add((Meddler(1),), Ex("a"))
    with pytest.raises(RuntimeError, match="compared keys"):
        for i in range(2, 40):
            r.add((Meddler(i),), Ex(str(i)))
    assert len(r) >= 2
    with pytest.raises(RuntimeError, match="compared keys"):
        r.drain(final=True)
