"""The accelerator's tree parts give what the Python code gives.

* ``NodeBase`` (the storage of ``tree.TreeNode``) has the attributes, defaults and
  argument checks of its Python twin ``tree.PyNodeBase``;
* ``tree_fields`` (``_Builder.fields`` without byte spans) makes the same nodes as
  ``_Builder._fields_py``: compared on every exchange of the sample captures and on
  odd bodies (metadata keys, non-str keys, dict subclasses, scalars of every type,
  error codes, enums, nesting around and beyond the tree's bound, a body nested too
  deeply to show, a mutating payload view).

Skipped when the accelerator is not built.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from kwsniff import accel
from kwsniff.output import tree
from kwsniff.output.tree import PyNodeBase, TreeNode
from record_sets import record_sets

C = accel.speedups
pytestmark = pytest.mark.skipif(C is None, reason="the C accelerator is not built")

ROOT = Path(__file__).resolve().parents[2]
FIELDS = ("label", "value", "children", "start", "length", "message", "about", "path",
          "style")


class PyTreeNode(PyNodeBase):
    """TreeNode as it is without the accelerator (the same methods on the Python base)."""

    __slots__ = ()
    add = TreeNode.add


def _state(node: Any) -> list:
    """Every node's fields, depth first, with its depth and type (no recursion: trees
    of the deep tests are deeper than the interpreter's limit)."""
    out: list = []
    stack = [(0, node)]
    while stack:
        depth, n = stack.pop()
        if not isinstance(n, (TreeNode, PyNodeBase)):
            out.append((depth, n))
            continue
        children = n.children
        out.append((depth, type(n).__name__,
                    *(getattr(n, k) for k in FIELDS if k != "children"),
                    type(children).__name__))
        if isinstance(children, list):
            stack.extend((depth + 1, c) for c in reversed(children))
    return out


# ------------------------------------------------------------------ NodeBase

@pytest.mark.parametrize("args, kwargs", [
    (("label",), {}),
    (("l", "v"), {}),
    (("l", "v", [1], 1, 2, "request", "about", ("body", "X"), "warn"), {}),
    (("l",), {"style": "warn", "message": "response", "path": ("header",)}),
    (("l",), {"children": None}),            # an explicit None stays None
    ((), {"label": "kw", "value": "v", "start": 0, "length": 4}),
])
def test_node_defaults_and_arguments(args: tuple, kwargs: dict) -> None:
    c, p = TreeNode(*args, **kwargs), PyTreeNode(*args, **kwargs)
    assert [getattr(c, k) for k in FIELDS] == [getattr(p, k) for k in FIELDS]
    assert type(c).__mro__[1] is C.NodeBase


def test_node_children_default_is_a_new_list() -> None:
    a, b = TreeNode("a"), TreeNode("b")
    assert a.children == [] and a.children is not b.children
    assert a.path == () and a.value == ""


@pytest.mark.parametrize("args, kwargs", [
    ((), {}),
    (("a",) * 10, {}),
    (("a",), {"label": "b"}),
    (("a",), {"nope": 1}),
    (("a", "b"), {"value": "c"}),
    ((), {"value": "v"}),
])
def test_node_argument_errors(args: tuple, kwargs: dict) -> None:
    with pytest.raises(TypeError):
        TreeNode(*args, **kwargs)
    with pytest.raises(TypeError):
        PyTreeNode(*args, **kwargs)


def test_node_attributes_repr_pickle_and_identity() -> None:
    node = TreeNode("l", "v", style="error")
    node.add(TreeNode("child", "1"))
    node.start, node.length, node.about = 4, 8, "text"
    assert node.end == 12
    assert [(d, n.label) for d, n in node.walk()] == [(0, "l"), (1, "child")]
    copy = pickle.loads(pickle.dumps(node))
    assert _state(copy) == _state(node) and type(copy) is TreeNode
    assert repr(node).startswith("TreeNode(label='l', value='v', children=[TreeNode(")
    assert node != copy and node == node               # compared by identity
    with pytest.raises(AttributeError):
        node.other = 1                                 # type: ignore[attr-defined]
    node.children = None                               # type: ignore[assignment]
    assert node.children is None
    del node.style
    assert node.style is None                          # (a deleted slot reads as None)


def test_node_cycles_are_collected() -> None:
    import gc
    import weakref
    class Marker:
        pass

    gc.collect()
    node = TreeNode("loop", about=Marker())       # type: ignore[arg-type]
    node.add(node)
    probe = weakref.ref(node.about)
    del node
    gc.collect()
    assert probe() is None


# ------------------------------------------------------------------ tree_fields

def _both(build: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """``build()`` with the C fields and with the Python ones."""
    with_c = build()
    monkeypatch.setattr(tree, "_tree_fields", None)
    python = build()
    monkeypatch.undo()
    return with_c, python


def test_every_sample_exchange_has_the_same_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    from kwsniff.capture.source import open_capture
    from kwsniff.engine import Engine
    def trees(path: Path) -> list[Any]:
        # a fresh decoding each time: -V decodes record sets on the way (lazily)
        with open_capture(str(path)) as source:
            return [_state(tree.build_tree(ex)) for ex in Engine().run(source)]

    n = 0
    for path in sorted((ROOT / "pcaps").glob("*.pcap")):
        c, p = _both(lambda: trees(path), monkeypatch)   # noqa: B023 - called at once
        assert len(c) == len(p)
        for i, (a, b) in enumerate(zip(c, p)):
            assert a == b, (path.name, i + 1)
        n += len(c)
    assert n > 500


def _fields(body: Any, monkeypatch: pytest.MonkeyPatch, api_key: int = 1, kind: str = "response",
            version: int = 11) -> tuple[Any, Any]:
    from kwsniff.kafka.model import KafkaMessage

    def build() -> Any:
        msg = KafkaMessage(kind, b"\0" * 16, api_key, version, body=body)
        b = tree._Builder(msg, "kafka", False, 256)
        root = TreeNode("root")
        try:
            b.fields(root, body, "body", ())
        except Exception as err:  # noqa: BLE001 - the same error is the expectation
            return type(err).__name__, str(err)
        return _state(root)

    return _both(build, monkeypatch)


class Sub(dict):
    pass


class Text(str):
    pass


ODD_BODIES: list[Any] = [
    {},
    {"ErrorCode": 3, "ThrottleTimeMs": 0, "SessionId": -1},
    {"ErrorCode": 0, "Responses": []},
    {"Responses": [{"Topic": "t", "Partitions": [{"PartitionIndex": 0, "ErrorCode": 6,
                                                   "HighWatermark": 5}]}]},
    {"Responses": [{"Topic": "", "TopicId": "00000000-0000-0000-0000-000000000001",
                    "_topic_name": "named", "Partitions": []}]},
    {"Responses": [{"Name": Text("sub"), "Partitions": [Sub(PartitionIndex=1)]}]},
    {"A": True, "B": None, "C": 1.5, "D": b"\x00\x01", "E": b"", "F": [1, 2, 3],
     "G": ["x", "y"], "H": [True, None], "I": 2 ** 70, "J": -0, "K": Text("t")},
    {"Quoted": 'say "hi"', "Back": "a\\b", "Ctl": "tab\there", "Uni": "é✓", "Sur": "\ud800"},
    {"_problems": ["p1", 2], "_unknown_tags": [(5, b"\x01")], "X": 1},
    {"_problems": "not a list", "_unknown_tags": "odd", "X": 1},
    {"_redacted_Password": True, "Password": "secret", "Mechanism": "PLAIN"},
    {"_decoded_Metadata": {"schema": "ConsumerProtocolSubscription", "version": 1,
                           "data": {"Topics": ["t"]}}, "Metadata": b"\x00\x01"},
    {1: "int key", "X": 1},
    {"X": 1, 2: "late int key"},
    {"Nested": {"Inner": {"Deeper": {"ErrorCode": 7, "Name": "n"}}}},
    {"Items": [{"ApiKey": 3, "MinVersion": 0}, {"ApiKey": 99999, "MaxVersion": 1},
               {"NodeId": 4}, {"BrokerId": 5}, {"Index": 6}, {"Partition": True},
               {"GroupId": "g", "MemberId": "m"}, {"Key": "k"}, {"ResourceName": ""}]},
    {"Mixed": [{"A": 1}, 2], "Dicts": [Sub(A=1)], "Empty": [], "Tuple": ({"A": 1},)},
    {"Acks": -1, "TimeoutMs": 30000, "TransactionalId": None},
    {"IsolationLevel": 1, "CoordinatorType": 1, "ErrorCode": True},
    {"TopicId": None, "_topic_name": "t", "ErrorCode": 0, "Flag": False, "List": [],
     "RecordErrors": [], "ErrorMessage": None},
    {"_redacted_ErrorCode": True, "ErrorCode": 0, "Empty": [], "_decoded_Empty": {}},
    {"ErrorCode": 2 ** 70, "ThrottleTimeMs": 0, "Tuple": ()},
]


@pytest.mark.parametrize("body", ODD_BODIES, ids=range(len(ODD_BODIES)))
@pytest.mark.parametrize("api_key, kind, version", [(1, "response", 11), (0, "request", 9),
                                                    (3, "response", 12), (9999, "request", 0)])
def test_odd_bodies_same_as_python(body: Any, api_key: int, kind: str, version: int,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    c, p = _fields(body, monkeypatch, api_key, kind, version)
    assert c == p


def _nested(depth: int, leaf: Any) -> Any:
    body = leaf
    for i in range(depth):
        body = {"Level": body, "N": i} if i % 2 else {"Items": [body, {"K": i}]}
    return body


def test_the_bound_is_the_same_in_c_and_python() -> None:
    assert C.TREE_MAX_NESTING == tree.MAX_TREE_NESTING


@pytest.mark.parametrize("depth", [63, 64, 65, 66, 99, 100, 101, 150, 250])
def test_nesting_around_and_beyond_the_bound(depth: int,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    c, p = _fields(_nested(depth, {"ErrorCode": 1}), monkeypatch)
    assert c == p and isinstance(c, list)
    cut = [row for row in c if row[1] == "TreeNode" and row[2] == "Problem"]
    # the leaf struct sits ``depth`` levels below the body
    assert bool(cut) == (depth > tree.MAX_TREE_NESTING)
    if cut:
        assert cut[0][3] == f"nested more than {tree.MAX_TREE_NESTING} levels deep: not shown"


def test_too_deep_to_show_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    from kwsniff.kafka.model import Exchange, KafkaMessage
    body = _nested(20_000, {"X": 1})
    ex = Exchange(1, 0, ("127.0.0.1", 5000), ("127.0.0.1", 9092), "unanswered",
                  request=KafkaMessage("request", b"\0" * 16, 0, 9, body=body))
    c, p = _both(lambda: tree.build_tree(ex), monkeypatch)
    assert _state(c) == _state(p)
    lines = list(tree.render_tree(c))
    assert sum("nested more than 64 levels deep: not shown" in line for line in lines) == 1
    assert len(lines) < 300


def test_a_value_that_changes_the_body_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    body: dict[str, Any] = {"A": 1.5, "B": 1}
    real = tree._Builder.value

    def growing(self: Any, parent: Any, key: str, value: Any, *rest: Any) -> None:
        body["Z"] = 0
        real(self, parent, key, value, *rest)

    monkeypatch.setattr(tree._Builder, "value", growing)
    c = _fields(body, monkeypatch)[0]
    assert c[0] == "RuntimeError"


def test_env_is_checked() -> None:
    b = object()
    root = TreeNode("r")
    with pytest.raises(TypeError):
        C.tree_fields(b, root, {}, "body", (), None, (), (dict, {}, None, None, None))
    with pytest.raises(TypeError):
        C.tree_fields(b, root, {}, "body", (), None, ())
    with pytest.raises(AttributeError):      # a builder without kind/_schema
        C.tree_fields(b, root, {}, "body", (), None, (), tree._FIELDS_ENV)


# ------------------------------------------------------------------ tree_batch

def _exchanges(name: str) -> list[Any]:
    from kwsniff.capture.source import open_capture
    from kwsniff.engine import Engine
    with open_capture(str(ROOT / "pcaps" / name)) as source:
        return list(Engine().run(source))


def _outcome(build: Any) -> Any:
    """The states of the trees ``build()`` returns, or the name of what it raised."""
    try:
        return [_state(root) for root in build()]
    except Exception as exc:  # noqa: BLE001 - compared: both paths fail alike
        return type(exc).__name__


def _both_batches(build: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, int]:
    """``build()`` with the C batches and with the Python ones, and how many batches the
    C code made (not left to Python)."""
    made = [0]
    real = tree._tree_batch

    def counting(*args: Any) -> Any:
        result = real(*args)
        made[0] += result is None
        return result

    monkeypatch.setattr(tree, "_tree_batch", counting)
    with_c = _outcome(build)
    monkeypatch.setattr(tree, "_tree_batch", None)
    python = _outcome(build)
    monkeypatch.undo()
    return with_c, python, made[0]


@pytest.mark.parametrize("spans", [False, True])
def test_every_sample_batch_has_the_same_tree(spans: bool,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Fresh decodes each time (records and CRCs are decoded lazily by the tree)."""
    made = n = 0
    for path in sorted((ROOT / "pcaps").glob("*.pcap")):
        c, p, k = _both_batches(lambda: [tree.build_tree(ex, spans=spans)  # noqa: B023
                                         for ex in _exchanges(path.name)], monkeypatch)
        assert c == p, path.name
        made += k
        n += len(c)
    assert n > 500 and made > 100


def _mutated(change: Any, value_chars: int | None = 256,
             spans: bool = False) -> Any:
    """A builder of the trees of the codec sample's produce exchanges after ``change``
    was applied to every batch (the batches' records decoded first)."""
    exchanges = [ex for ex in _exchanges("rdkafka-produce-codecs.pcap")
                 if ex.request is not None and record_sets(ex.request.body)]
    assert exchanges
    for ex in exchanges:
        for rs in record_sets(ex.request.body):
            for b in rs.batches:
                b.records  # noqa: B018 - decoded before the change
                change(b)
    return lambda: [tree.build_tree(ex, spans=spans, value_chars=value_chars)
                    for ex in exchanges]


def _set(**fields: Any) -> Any:
    def change(b: Any) -> None:
        for k, v in fields.items():
            setattr(b, k, v)
    return change


def _set_records(**fields: Any) -> Any:
    def change(b: Any) -> None:
        for r in b.records:
            for k, v in fields.items():
                setattr(r, k, v() if callable(v) else v)
    return change


ODD_BATCHES = [
    ("plain", _set()),
    ("no base offset", _set(base_offset=None)),
    ("no delta", _set(last_offset_delta=None)),
    ("one record", _set(last_offset_delta=0, declared_count=1)),
    ("count unknown", _set(declared_count=None)),
    ("big offsets", _set(base_offset=2**62, last_offset_delta=2**31 - 1)),
    ("negative attributes", _set(attributes=-3)),          # left to Python
    ("no attributes", _set(attributes=None)),
    ("transactional control", _set(attributes=0x30)),
    ("log append time", _set(attributes=0x08 | 0x04)),
    ("codec 7", _set(attributes=0x07)),
    ("magic 0 shown", _set(magic=0)),
    ("no crc", _set(crc=None)),
    ("crc too big", _set(crc=2**40)),                      # left to Python
    ("crc mismatch", _set(crc=1, _crc_ok="unchecked")),
    ("crc not checked", _set(_crc_ok=None)),
    ("truncated", _set(truncated=True)),
    ("timestamps", _set(base_timestamp=-5, max_timestamp=None)),
    ("huge timestamp", _set(base_timestamp=2**62)),
    ("compressed", _set(compressed_size=10, decompressed_size=20, framing=None)),
    ("framing", _set(compressed_size=10, decompressed_size=20, framing="xerial")),
    ("legacy kind", _set(kind="legacy")),                  # left to Python
    ("problems", _set(_problems=["one", 2])),
    ("record control", _set_records(control={"type": "COMMIT", "data": {"a": 1}})),
    ("record decoded", _set_records(value_decoded={"schema": "s", "x": 1})),
    ("record headers", _set_records(headers=lambda: [("k", b"v"), ("é\n", None)])),
    ("record header triple", _set_records(headers=lambda: [("k", b"v", 1)])),
    ("record header not str", _set_records(headers=lambda: [(1, b"v")])),
    ("record headers tuple", _set_records(headers=lambda: (("k", b"v"),))),
    ("record crc", _set_records(crc=0xDEADBEEF, crc_ok=True)),
    ("record crc bad", _set_records(crc=5, crc_ok=False)),
    ("record crc odd", _set_records(crc=-1, crc_ok=None)),
    ("record problems", _set_records(problems=lambda: ["p", 3])),
    ("record no timestamp", _set_records(timestamp=None, offset=None)),
    ("record values", _set_records(key=b'{"a":[1,2]}', value=bytearray(b"x\x00"))),
    ("record start outside", _set_records(start=-1)),
    ("record offset str", _set_records(offset="7")),
]


@pytest.mark.parametrize("spans", [False, True])
@pytest.mark.parametrize("name, change", ODD_BATCHES, ids=[n for n, _ in ODD_BATCHES])
def test_odd_batches_same_as_python(name: str, change: Any, spans: bool,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    build = _mutated(change, spans=spans)
    c, p, made = _both_batches(build, monkeypatch)
    assert c == p
    if name in ("record header triple", "record header not str"):
        return      # the record fails in Python either way (the tree shows a problem)
    assert isinstance(c, list)
    python_only = name in ("negative attributes", "crc too big", "legacy kind")
    assert (made == 0) == python_only


@pytest.mark.parametrize("value_chars", [None, 0, 3])
def test_batch_values_cut_as_python(value_chars: int | None,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    c, p, made = _both_batches(_mutated(_set(), value_chars), monkeypatch)
    assert c == p and made


def test_batches_with_payload_decoders_stay_python(monkeypatch: pytest.MonkeyPatch) -> None:
    from kwsniff.kafka.payload import register_payload_decoder, unregister_payload_decoder
    handle = register_payload_decoder(None, lambda *_: None, name="declines")
    try:
        c, p, made = _both_batches(_mutated(_set()), monkeypatch)
    finally:
        unregister_payload_decoder(handle)
    assert c == p and made == 0


def test_batch_env_and_arguments_are_checked() -> None:
    b = object()
    root = TreeNode("r")
    with pytest.raises(TypeError):
        C.tree_batch(b, root, 0, b, b, None, (), "request", 256, (dict,) * 6)
    with pytest.raises(TypeError):
        C.tree_batch(b, root, 0, b, b, None, (), "request", 256)
    assert C.tree_batch(b, root, "0", b, b, None, (), "request", 256,
                        tree._BATCH_ENV) is NotImplemented
    assert C.tree_batch(b, root, 0, b, b, None, ["x"], "request", 256,
                        tree._BATCH_ENV) is NotImplemented
    with pytest.raises(AttributeError):      # not a batch
        C.tree_batch(b, root, 0, b, b, None, (), "request", 256, tree._BATCH_ENV)
    assert root.children == []
